package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

const terramindDir = "../../shared/data/terramind-s2-lulc"

// realSampleConfig is configs/ingest-real-sample.yaml with its paths made
// relative to this package's directory (they are relative to the
// repository root).
func realSampleConfig(t *testing.T) config.IngestConfig {
	t.Helper()
	if _, err := os.Stat(terramindDir); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	raw, err := configs.Read("ingest-real-sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseIngestConfig([]byte(strings.ReplaceAll(string(raw), "../shared/", "../../shared/")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestIngestRastersTerraMind ingests the two real TerraMind patches: the
// stack holds every band's reflectance (Int16 DN × 0.0001) re-encoded to
// lulc's DN × 0.0001 − 0.1 at every pixel, on the image's grid, the labels
// are the source labels, and a rerun gives the same bytes.
func TestIngestRastersTerraMind(t *testing.T) {
	cfg := realSampleConfig(t)
	res, out := mustIngest(t, cfg)
	if len(res.Tiles) != 2 || res.DecodedBytes != 2*224*224*10*2 {
		t.Fatalf("tiles %+v, %d bytes decoded", res.Tiles, res.DecodedBytes)
	}
	for ti, p := range cfg.Source.Rasters {
		tr := res.Tiles[ti]
		dir := filepath.Join(out, p.Tile)
		if tr.Tile != p.Tile || tr.Dates != 1 || tr.Pixels != 224*224 || tr.NoValidFrac != 0 {
			t.Errorf("tile %+v", tr)
		}
		img, err := raster.Open(p.Image)
		if err != nil {
			t.Fatal(err)
		}
		info, err := raster.Inspect(filepath.Join(dir, "stack.tif"))
		if err != nil {
			t.Fatal(err)
		}
		if info.Grid != img.Grid || info.Bands != 10 || info.DataType != "UInt16" || info.Layout != "COG" {
			t.Errorf("%s: stack %+v, image grid %+v", p.Tile, info, img.Grid)
		}
		for bi, band := range cfg.Bands {
			src := make([]float32, 224*224)
			k := 1 + strings.Index(" B01 B02 B03 B04 B05 B06 B07 B08 B8A B09 B11 B12", " "+band)/4
			if err := raster.ReadBandWindowInto(img, k, 0, 0, 224, 224, src); err != nil {
				t.Fatal(err)
			}
			dn, _ := readU16(t, filepath.Join(dir, "stack.tif"), bi+1)
			for i, v := range src {
				// The STAC path's rule (composite.Reflectance, then
				// Quantise) and the plain arithmetic agree.
				r := float32(v*float32(0.0001)) + 0
				want := uint16(math.Round((float64(r) + 0.1) / 0.0001))
				if v < 1 || dn[i] != want || dn[i] != uint16(v)+1000 {
					t.Fatalf("%s %s pixel %d: stack DN %d, source %g (want %d)", p.Tile, band, i, dn[i], v, want)
				}
				if got := float64(dn[i])*stage.StackScale + stage.StackOffset; math.Abs(got-float64(v)*0.0001) > 1e-9 {
					t.Fatalf("%s %s pixel %d: reflectance %g, source %g", p.Tile, band, i, got, float64(v)*0.0001)
				}
			}
		}
		img.Close()
		want, _, err := raster.ReadBand[uint8](p.Labels, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := raster.ReadBand[uint8](filepath.Join(dir, "labels.tif"), 1)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: labels differ from the source's", p.Tile)
		}
		if li, err := raster.Inspect(filepath.Join(dir, "labels.tif")); err != nil || li.Grid != info.Grid || li.DataType != "Byte" || li.NoData == nil || *li.NoData != 0 {
			t.Errorf("%s: labels.tif %+v, %v", p.Tile, li, err)
		}
		count, _, _ := raster.ReadBand[uint8](filepath.Join(dir, "valid_count.tif"), 1)
		if bytes.Count(count, []byte{1}) != len(count) {
			t.Errorf("%s: valid counts are not all 1", p.Tile)
		}

		var m stage.Manifest
		body, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		imgSum, _, _ := stage.FileSHA256(p.Image)
		b08 := m.Sources[0].Assets["B08"]
		if m.Tile != p.Tile || m.Scale != stage.StackScale || m.Offset != stage.StackOffset || m.ConfigHash != cfg.Hash() ||
			len(m.Sources) != 1 || b08.Band != 8 || b08.SHA256 != imgSum || b08.Scale != 0.0001 || m.Sources[0].Datetime == "" ||
			len(m.Labels) != 1 || m.Labels[0].Assets["labels"].SHA256 == "" || len(m.Outputs) != 3 {
			t.Errorf("%s: manifest %s", p.Tile, body)
		}
		for _, o := range m.Outputs {
			if sum, _, _ := digest.File(filepath.Join(dir, o.File)); sum != o.BLAKE3 {
				t.Errorf("%s: %s checksum %s, file %s", p.Tile, o.File, o.BLAKE3, sum)
			}
		}
	}
	_, again := mustIngest(t, cfg)
	if d := diffTrees(t, out, again); len(d) > 0 {
		t.Errorf("a rerun differs: %v", d)
	}
}

// diffTrees lists the files that differ between two directories.
func diffTrees(t *testing.T, a, b string) []string {
	t.Helper()
	var diffs []string
	n := 0
	filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			diffs = append(diffs, rel)
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("%s is empty", a)
	}
	return diffs
}

// rasterPair writes a synthetic analysis-ready pair: a UInt16 image of
// bands B02, B03, B04, B08 (DN = 1000 + 7·band + x + y, with DN 0 at every
// 97th pixel of B04) and labels 1…5 by column.
func rasterPair(t *testing.T, dir string, g geo.Grid) (image, labels string) {
	t.Helper()
	image, labels = filepath.Join(dir, "image.tif"), filepath.Join(dir, "labels.tif")
	w, err := raster.NewWriter(image, g, "uint16", make([]raster.BandInfo, 4), raster.COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := g.Width * g.Height
	for b := range 4 {
		v := make([]uint16, n)
		for i := range v {
			v[i] = uint16(1000 + 7*b + i%g.Width + i/g.Width)
			if b == 2 && i%97 == 0 {
				v[i] = 0
			}
		}
		if err := w.Write(b, 0, 0, g.Width, g.Height, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lab := make([]uint8, n)
	for i := range lab {
		lab[i] = uint8(1 + (i%g.Width)*5/g.Width)
	}
	if err := raster.WriteCOG(labels, g, lab, raster.COGOptions{}); err != nil {
		t.Fatal(err)
	}
	return image, labels
}

func rasterConfig(t *testing.T, image, labels string) config.IngestConfig {
	t.Helper()
	cfg, err := config.ParseIngestConfig([]byte(`
source:
  rasters:
    - {image: ` + image + `, labels: ` + labels + `, tile: T1, datetime: 2021-07-23}
  bands: [B02, B03, B04, B08]
  scale: 0.0001
  offset: -0.1
  nodata: 0
bands: [B08, B04, B02]
window: 512
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var synthGrid = geo.Grid{EPSG: 32631, Width: 1100, Height: 700, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}

// TestIngestRastersWindows ingests a synthetic pair larger than a window
// (6 windows on several workers), with nodata, a band subset in another
// order and a baseline-04 offset, checks every pixel, and resumes an
// interrupted run to the same bytes.
func TestIngestRastersWindows(t *testing.T) {
	image, labels := rasterPair(t, t.TempDir(), synthGrid)
	cfg := rasterConfig(t, image, labels)
	res, out := mustIngest(t, cfg)
	// The raster pair's stack is a STAC item too, its labels' codes the
	// user's: no classification.
	if items := checkCatalog(t, filepath.Join(out, stage.CollectionFile)); len(items) != 1 || strings.Contains(string(must(os.ReadFile(items[0]))), "classification:classes") {
		t.Errorf("stack items %v", items)
	}
	n := synthGrid.Width * synthGrid.Height
	holes := (n + 96) / 97
	if len(res.Tiles) != 1 || math.Abs(res.Tiles[0].NoValidFrac-float64(holes)/float64(n)) > 1e-12 {
		t.Fatalf("tiles %+v", res.Tiles)
	}
	for bi, src := range []int{3, 2, 0} { // B08, B04, B02
		dn, g := readU16(t, filepath.Join(out, "T1", "stack.tif"), bi+1)
		if g.Transform != synthGrid.Transform || g.Width != synthGrid.Width || g.Height != synthGrid.Height {
			t.Fatalf("grid %+v", g)
		}
		for i, v := range dn {
			want := uint16(1000 + 7*src + i%g.Width + i/g.Width)
			if i%97 == 0 {
				want = 0 // B04 is nodata there, so the whole pixel is
			}
			if v != want {
				t.Fatalf("band %d pixel %d: %d, want %d", bi+1, i, v, want)
			}
		}
	}
	count, _, _ := raster.ReadBand[uint8](filepath.Join(out, "T1", "valid_count.tif"), 1)
	if bytes.Count(count, []byte{0}) != holes {
		t.Errorf("%d pixels without a valid observation, want %d", bytes.Count(count, []byte{0}), holes)
	}
	got, _, _ := raster.ReadBand[uint8](filepath.Join(out, "T1", "labels.tif"), 1)
	want, _, _ := raster.ReadBand[uint8](labels, 1)
	if !bytes.Equal(got, want) {
		t.Error("labels differ from the source's")
	}

	// Interrupted after the third window, then resumed: the same bytes.
	resumed := filepath.Join(t.TempDir(), "stack")
	ctx, cancel := context.WithCancel(context.Background())
	var windows atomic.Int32
	_, err := ingest.Ingest(ctx, cfg, stage.Options{Out: resumed, Version: "test", Workers: 2, NewBar: func(int64, string) progress.Bar {
		return hookBar{func() {
			if windows.Add(1) == 3 {
				cancel()
			}
		}}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted ingest: %v", err)
	}
	if _, err := os.Stat(resumed); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("interrupted ingest left its output")
	}
	r2, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: resumed, Version: "test", Workers: 3})
	if err != nil || !r2.Resumed {
		t.Fatalf("resume: %v, resumed %v", err, r2.Resumed)
	}
	if d := diffTrees(t, out, resumed); len(d) > 0 {
		t.Errorf("resumed run differs: %v", d)
	}
}

// TestIngestRastersResumeKeepsTiles: a run interrupted in its second tile
// keeps the first on resume and ends with the same bytes.
func TestIngestRastersResumeKeepsTiles(t *testing.T) {
	cfg := realSampleConfig(t)
	_, want := mustIngest(t, cfg)
	out := filepath.Join(t.TempDir(), "stack")
	ctx, cancel := context.WithCancel(context.Background())
	var tiles atomic.Int32
	_, err := ingest.Ingest(ctx, cfg, stage.Options{Out: out, Version: "test", NewBar: func(int64, string) progress.Bar {
		if tiles.Add(1) == 2 {
			cancel()
		}
		return progress.OrNop(nil)(0, "")
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted ingest: %v", err)
	}
	res, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test"})
	if err != nil || !res.Resumed || !res.Tiles[0].Skipped || res.Tiles[1].Skipped {
		t.Fatalf("resume: %v, %+v", err, res)
	}
	if d := diffTrees(t, want, out); len(d) > 0 {
		t.Errorf("resumed run differs: %v", d)
	}
}

func TestIngestRastersBadInput(t *testing.T) {
	dir := t.TempDir()
	image, labels := rasterPair(t, dir, synthGrid)
	shifted := synthGrid
	shifted.Transform[0] += 10
	other := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(other, 0o755)
	_, offGrid := rasterPair(t, other, shifted)
	int16Labels := filepath.Join(dir, "labels16.tif")
	if err := raster.WriteCOG(int16Labels, synthGrid, make([]uint16, synthGrid.Width*synthGrid.Height), raster.COGOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(c *config.IngestConfig)
		want []string
	}{
		{"missing image", func(c *config.IngestConfig) { c.Source.Rasters[0].Image = filepath.Join(dir, "nope.tif") }, []string{"source.rasters[0].image", "nope.tif"}},
		{"missing labels", func(c *config.IngestConfig) { c.Source.Rasters[0].Labels = filepath.Join(dir, "nope.tif") }, []string{"source.rasters[0].labels", "nope.tif"}},
		{"band count", func(c *config.IngestConfig) { c.Source.Bands = append(c.Source.Bands, "B11") }, []string{"image.tif has 4 bands but source.bands names 5"}},
		{"labels on another grid", func(c *config.IngestConfig) { c.Source.Rasters[0].Labels = offGrid }, []string{"source.rasters[0].labels", "another grid", "500010.000"}},
		{"labels not Byte", func(c *config.IngestConfig) { c.Source.Rasters[0].Labels = int16Labels }, []string{"labels16.tif", "UInt16"}},
		{"resolution", func(c *config.IngestConfig) { c.Grid.Resolution = 20 }, []string{"but grid.resolution is 20"}},
		{"catalog and rasters", func(c *config.IngestConfig) { c.Source.Catalog = "catalog.json" }, []string{"source: set exactly one of catalog"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := rasterConfig(t, image, labels)
			c.edit(&cfg)
			ingestFails(t, cfg, c.want)
		})
	}
}

func TestIngestRastersConfigErrors(t *testing.T) {
	raw, _ := configs.Read("ingest-real-sample.yaml")
	for _, c := range []struct{ old, new, want string }{
		{"source:\n", "source:\n  catalog: x.json\n", "source: set exactly one of catalog"},
		{"source:\n", "source:\n  api: https://example.com\n", "source: set exactly one of catalog"},
		{"  scale: 0.0001\n", "", "source.scale"},
		{"  bands: [B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B11, B12]\n", "", "source.bands"},
		{"[B01, B02, B03, B04, B05", "[B01, B02, B03, B04, B4", "bands: B05 is not among source.bands"}, // B4 is a layer to skip
		{"bands: [B02, B03, B04, B08,", "bands: [B02, B03, B04, B08, B10,", "bands: \"B10\""},
		{"[B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B11, B12]", "[B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B11, B01]", "source.bands: B01 listed twice"},
		{"bands: [B02, B03, B04, B08,", "bands: [B02, B03, B04, B08, B01,", ""}, // B01 is among the images' bands
		{"window: 1024", "window: 1024\nmask:\n  drop_scl: [3]", "mask: not used with source.rasters"},
		{"window: 1024", "window: 1024\narea:\n  bbox: [0, 0, 1, 1]", "area: not used with source.rasters"},
		{"window: 1024", "window: 1024\ndates:\n  start: 2024-01-01", "dates: not used"},
		{"resolution: 10", "resolution: 10\n  epsg: 32632", "grid.epsg and grid.bounds: not used"},
		{"window: 1024", "window: 1024\nresampling:\n  labels: mode", "resampling: not used"},
		{"tile: 637U_59R_1_3", "tile: 282D_485L_3_3", "also rasters[0]'s"},
		{"tile: 637U_59R_1_3", "tile: ../x", "tile: not a usable file name: \"../x\""},
		{"datetime: 2017-10-30T10:41:51Z", "datetime: yesterday", "source.rasters[1].datetime"},
		{"      datetime: 2017-10-30T10:41:51Z\n", "", ""}, // optional
		{"      labels: ../shared/data/terramind-s2-lulc/LULC/637U_59R_1_3.tif\n", "", "source.rasters[1]: image and labels are both required"},
	} {
		edited := strings.Replace(string(raw), c.old, c.new, 1)
		if edited == string(raw) {
			t.Fatalf("%q is not in the config", c.old)
		}
		_, err := config.ParseIngestConfig([]byte(edited))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s → %s: %v", c.old, c.new, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v", c.old, c.new, err)
		}
	}
	// STAC configs reject the rasters' image description.
	raw, _ = configs.Read("ingest-tiny.yaml")
	bad := strings.Replace(string(raw), "  limit: 100\n", "  limit: 100\n  scale: 0.0001\n", 1)
	if _, err := config.ParseIngestConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "describe rasters") {
		t.Errorf("scale on a STAC source: %v", err)
	}
	// A pair's tile defaults to the image's file name.
	if got := (config.RasterPair{Image: "/data/x/637U_59R_1_3.tif"}).TileName(); got != "637U_59R_1_3" {
		t.Errorf("tile name %q", got)
	}
}

// TestIngestRastersVectorLabels ingests a real TerraMind image with its
// labels as a vector layer in the image's CRS: a polygon over the left
// half of the grid (class 2, the centre rule) and a point (class 5, one
// pixel). The stack's labels are those pixels exactly; a vector layer
// without source.label_field is refused with the reason.
func TestIngestRastersVectorLabels(t *testing.T) {
	cfg := realSampleConfig(t)
	cfg.Source.Rasters = cfg.Source.Rasters[:1]
	img, err := raster.Open(cfg.Source.Rasters[0].Image)
	if err != nil {
		t.Fatal(err)
	}
	g := img.Grid
	img.Close()
	x0, y0, res := g.Transform[0], g.Transform[3], g.Transform[1]
	xmid := x0 + res*float64(g.Width)/2 + 0.3*res
	y1 := y0 - res*float64(g.Height)
	px, py := x0+10.5*res, y0-20.5*res // the centre of column 10, row 20
	geojson := fmt.Sprintf(`{"type": "FeatureCollection",
 "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::%d"}},
 "features": [
  {"type": "Feature", "properties": {"code": 2}, "geometry": {"type": "Polygon", "coordinates": [[[%f, %f], [%f, %f], [%f, %f], [%f, %f], [%f, %f]]]}},
  {"type": "Feature", "properties": {"code": 5}, "geometry": {"type": "Point", "coordinates": [%f, %f]}}]}`,
		g.EPSG, x0, y0, xmid, y0, xmid, y1, x0, y1, x0, y0, px, py)
	labels := filepath.Join(t.TempDir(), "labels.geojson")
	if err := os.WriteFile(labels, []byte(geojson), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Source.Rasters[0].Labels = labels
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "refused")}); err == nil || !strings.Contains(err.Error(), "label_field") {
		t.Errorf("vector labels without label_field: %v", err)
	}
	cfg.Source.LabelField = "code"
	_, out := mustIngest(t, cfg)
	got, _ := readU16(t, filepath.Join(out, cfg.Source.Rasters[0].Tile, "labels.tif"), 1)
	for i, v := range got {
		col, row := i%g.Width, i/g.Width
		want := uint16(0)
		if x0+(float64(col)+0.5)*res < xmid {
			want = 2
		}
		if col == 10 && row == 20 {
			want = 5
		}
		if v != want {
			t.Fatalf("pixel (%d, %d): label %d, want %d", col, row, v, want)
		}
	}
}
