package synth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/source/stacext"
)

func tinyConfig(t testing.TB) Config {
	t.Helper()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// generated caches scenes by name so that several tests read one scene.
var generated = map[string]string{}

func genScene(t *testing.T, name string, cfg Config) string {
	t.Helper()
	if dir, ok := generated[name]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", "lulc-synth-"+name)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "scene")
	if _, err := Run(context.Background(), cfg, Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	generated[name] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range generated {
		os.RemoveAll(filepath.Dir(dir))
	}
	os.Exit(code)
}

type itemJSON struct {
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	Assets     map[string]struct {
		Href      string    `json:"href"`
		Shape     []int     `json:"proj:shape"`
		Transform []float64 `json:"proj:transform"`
		Raster    []struct {
			NoData   float64  `json:"nodata"`
			DataType string   `json:"data_type"`
			Scale    *float64 `json:"scale"`
			Offset   *float64 `json:"offset"`
			Res      float64  `json:"spatial_resolution"`
		} `json:"raster:bands"`
		EO []struct {
			Name       string `json:"name"`
			CommonName string `json:"common_name"`
		} `json:"eo:bands"`
	} `json:"assets"`
}

func readItem(t *testing.T, path string) itemJSON {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var it itemJSON
	if err := json.Unmarshal(body, &it); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return it
}

func TestTinySceneLayout(t *testing.T) {
	cfg := tinyConfig(t)
	dir := genScene(t, "tiny", cfg)

	wantKeys := map[string]string{
		"blue": "B02", "green": "B03", "red": "B04", "nir": "B08", "rededge1": "B05", "rededge2": "B06",
		"rededge3": "B07", "nir08": "B8A", "swir16": "B11", "swir22": "B12", "coastal": "B01", "nir09": "B09",
	}
	for _, d := range cfg.Dates {
		id := d.itemID(cfg.Tile)
		it := readItem(t, filepath.Join(dir, "sentinel-2-l2a", id, id+".json"))
		if it.Properties["s2:mgrs_tile"] != cfg.Tile || it.Properties["proj:epsg"] != float64(cfg.EPSG) {
			t.Errorf("%s: tile/epsg properties %v %v", id, it.Properties["s2:mgrs_tile"], it.Properties["proj:epsg"])
		}
		if _, ok := it.Properties["eo:cloud_cover"].(float64); !ok {
			t.Errorf("%s: no eo:cloud_cover", id)
		}
		for key, name := range wantKeys {
			a, ok := it.Assets[key]
			if !ok {
				t.Fatalf("%s: no asset %q", id, key)
			}
			if a.Href != "./"+name+".tif" || len(a.EO) != 1 || a.EO[0].Name != name {
				t.Errorf("%s/%s: href %s, eo:bands %+v", id, key, a.Href, a.EO)
			}
			rb := a.Raster[0]
			if rb.DataType != "uint16" || rb.NoData != 0 || rb.Scale == nil || *rb.Scale != 0.0001 || rb.Offset == nil || *rb.Offset != -0.1 {
				t.Errorf("%s/%s: raster:bands %+v", id, key, rb)
			}
			info, err := raster.Inspect(filepath.Join(dir, "sentinel-2-l2a", id, name+".tif"))
			if err != nil {
				t.Fatal(err)
			}
			checkCOG(t, info, "UInt16", cfg)
			res := rb.Res
			if info.EPSG != cfg.EPSG || info.Width != a.Shape[1] || info.Height != a.Shape[0] ||
				info.Width*int(res) != cfg.Size*10 || info.Transform != [6]float64{cfg.Origin[0], res, 0, cfg.Origin[1], 0, -res} {
				t.Errorf("%s/%s: grid %+v does not match proj:shape %v, resolution %g", id, key, info.Grid, a.Shape, res)
			}
			if a.Transform[0] != res || a.Transform[2] != cfg.Origin[0] || a.Transform[5] != cfg.Origin[1] {
				t.Errorf("%s/%s: proj:transform %v", id, key, a.Transform)
			}
		}
		info, err := raster.Inspect(filepath.Join(dir, "sentinel-2-l2a", id, "SCL.tif"))
		if err != nil {
			t.Fatal(err)
		}
		checkCOG(t, info, "Byte", cfg)
		if info.Width != cfg.Size/2 {
			t.Errorf("SCL width %d, want %d", info.Width, cfg.Size/2)
		}
	}
}

func checkCOG(t *testing.T, info raster.Info, dtype string, cfg Config) {
	t.Helper()
	if info.Layout != "COG" || info.Compression != cfg.Compress || info.DataType != dtype ||
		info.NoData == nil || *info.NoData != 0 {
		t.Errorf("layout %q, compression %q, type %q, nodata %v", info.Layout, info.Compression, info.DataType, info.NoData)
	}
	if want := min(cfg.BlockSize, info.Width); info.BlockSize[0] != want && info.BlockSize[0] != cfg.BlockSize {
		t.Errorf("block %v, want %d", info.BlockSize, cfg.BlockSize)
	}
}

func TestTinySceneLabels(t *testing.T) {
	cfg := tinyConfig(t)
	dir := genScene(t, "tiny", cfg)
	matches, _ := filepath.Glob(filepath.Join(dir, "esa-worldcover", "*", "*_Map.tif"))
	if len(matches) != 1 {
		t.Fatalf("label COGs: %v", matches)
	}
	info, err := raster.Inspect(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	checkCOG(t, info, "Byte", cfg)
	if info.EPSG != 4326 || math.Abs(info.Transform[1]-1.0/12000) > 1e-15 || math.Abs(info.Transform[5]+1.0/12000) > 1e-15 {
		t.Errorf("label grid %+v", info.Grid)
	}
	if lon := info.Transform[0] * 12000; math.Abs(lon-math.Round(lon)) > 1e-6 {
		t.Errorf("label origin %g is off the 1/12000° lattice", info.Transform[0])
	}
	for _, c := range landcover.WorldCover.Classes {
		e := info.ColorTable[c.Code]
		if e != [4]int16{int16(c.Color.R), int16(c.Color.G), int16(c.Color.B), 255} {
			t.Errorf("colour of %d = %v", c.Code, e)
		}
	}
	cats, err := raster.Categories(matches[0])
	if err != nil || len(cats) < 81 || cats[10] != "Tree cover" || cats[80] != "Permanent water bodies" {
		t.Errorf("category names %q, %v", cats, err)
	}
	if !strings.Contains(info.Metadata["legend"], "40  Cropland") {
		t.Errorf("legend metadata %q", info.Metadata["legend"])
	}

	// The labels cover the scene: its corners fall inside the label grid.
	b := info.Bounds()
	for _, g := range []struct{ lon, lat float64 }{{3.0028, 45.1538}, {3.0318, 45.1311}} {
		if g.lon < b[0] || g.lon > b[2] || g.lat < b[1] || g.lat > b[3] {
			t.Errorf("label bounds %v miss scene corner %v", b, g)
		}
	}

	labels, _, err := raster.ReadBand[uint8](matches[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint8]int{}
	for _, v := range labels {
		counts[v]++
	}
	for code := range counts {
		if _, ok := cfg.Classes[int(code)]; !ok {
			t.Errorf("label holds class %d, which the config does not list", code)
		}
	}
	if len(counts) < 5 {
		t.Errorf("only %d classes in the labels: %v", len(counts), counts)
	}
}

func TestCatalogValidates(t *testing.T) {
	dir := genScene(t, "tiny", tinyConfig(t))
	if _, err := stacext.Validate(filepath.Join(dir, "catalog.json")); err != nil {
		t.Fatalf("%#v", err)
	}
	// The validator must reject a broken item, or the check above proves
	// nothing.
	broken := t.TempDir()
	if err := os.CopyFS(broken, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	items, _ := filepath.Glob(filepath.Join(broken, "sentinel-2-l2a", "*", "*_L2A.json"))
	body, _ := os.ReadFile(items[0])
	body = []byte(strings.Replace(string(body), `"proj:shape": [`, `"proj:shape": ["x", `, 1))
	os.WriteFile(items[0], body, 0o644)
	if _, err := stacext.Validate(filepath.Join(broken, "catalog.json")); err == nil {
		t.Fatal("a catalog with a malformed proj:shape validated")
	}
}

func digest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[rel] = sha256.Sum256(body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func TestSameSeedSameBytes(t *testing.T) {
	cfg := tinyConfig(t)
	a := digest(t, genScene(t, "tiny", cfg))
	again := filepath.Join(t.TempDir(), "again")
	if _, err := Run(context.Background(), cfg, Options{Out: again, Writers: 1}); err != nil {
		t.Fatal(err)
	}
	b := digest(t, again)
	if len(a) != len(b) || len(a) < 40 {
		t.Fatalf("%d files vs %d", len(a), len(b))
	}
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
	}
}

func TestDifferentSeedDifferentScene(t *testing.T) {
	cfg := tinyConfig(t)
	a := digest(t, genScene(t, "tiny", cfg))
	cfg.Seed++
	other := filepath.Join(t.TempDir(), "other")
	if _, err := Run(context.Background(), cfg, Options{Out: other}); err != nil {
		t.Fatal(err)
	}
	b := digest(t, other)
	same := 0
	for name, sum := range a {
		if strings.HasSuffix(name, ".tif") && b[name] == sum {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d rasters identical across seeds", same)
	}
}

// TestOverviews uses a scene larger than one internal tile, so that GDAL
// must build overviews.
func TestOverviews(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Size = 1200
	cfg.Bands60m = false
	cfg.Dates = cfg.Dates[:1]
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := Run(context.Background(), cfg, Options{Out: dir}); err != nil {
		t.Fatal(err)
	}
	id := cfg.Dates[0].itemID(cfg.Tile)
	info, err := raster.Inspect(filepath.Join(dir, "sentinel-2-l2a", id, "B04.tif"))
	if err != nil {
		t.Fatal(err)
	}
	checkCOG(t, info, "UInt16", cfg)
	if info.Overviews < 1 || info.BlockSize != [2]int{512, 512} {
		t.Errorf("overviews %d, block %v", info.Overviews, info.BlockSize)
	}
}

// TestRealism checks the properties the scene exists for: clouds and
// nodata as configured, SCL agreeing with the pixels, classes with their
// spectra, cropland changing with the season, and label noise near the
// configured rate.
func TestRealism(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Size = 600
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)
	acqs := make([]*acquisition, len(cfg.Dates))
	for i := range cfg.Dates {
		acqs[i] = newAcquisition(sc, i, geo.centerLat)
	}
	sc.generate(acqs, nil)
	n := cfg.Size

	for i, a := range acqs {
		st := sclStats(a)
		nd := st.percentages["s2:nodata_pixel_percentage"]
		if math.Abs(nd-cfg.Dates[i].NoData) > 2 {
			t.Errorf("date %d: nodata %.1f %%, want %.0f", i, nd, cfg.Dates[i].NoData)
		}
		// Clouds: the SCL share of cloud pixels over the valid part of the
		// scene tracks the configured cover.
		valid := float64(n*n/4) - float64(a.sclCounts[sclNoData].Load())
		cloudy := float64(a.sclCounts[sclCloudHigh].Load()+a.sclCounts[sclCloudMedium].Load()) / valid * 100
		if math.Abs(cloudy-cfg.Dates[i].CloudCover) > 8 {
			t.Errorf("date %d: %.1f %% cloud pixels, want about %.0f", i, cloudy, cfg.Dates[i].CloudCover)
		}
		// SCL says where pixels are bright clouds and where nodata is.
		red := a.dns[iB04]
		for r2 := 0; r2 < n/2; r2 += 7 {
			for c2 := 0; c2 < n/2; c2 += 7 {
				dn := red[(2*r2)*n+2*c2]
				switch a.scl[r2*n/2+c2] {
				case sclNoData:
					if dn != 0 {
						t.Fatalf("date %d: SCL nodata over DN %d", i, dn)
					}
				case sclCloudHigh:
					if refl := float64(dn)*dnScale + dnOffset; refl < 0.18 {
						t.Fatalf("date %d: high-probability cloud with red reflectance %.3f", i, refl)
					}
				}
			}
		}
	}

	// Mean spectra of clear pixels per class, in July.
	type acc struct{ nir, red, n float64 }
	classes := func(a *acquisition) map[uint8]*acc {
		out := map[uint8]*acc{}
		for r := 0; r < n; r += 3 {
			for c := 0; c < n; c += 3 {
				s := a.scl[(r/2)*(n/2)+c/2]
				if s != sclVegetation && s != sclBare && s != sclWater {
					continue
				}
				cls := sc.classAt((float64(c)+0.5)*10, (float64(r)+0.5)*10)
				if out[cls] == nil {
					out[cls] = &acc{}
				}
				refl := func(b int) float64 { return float64(a.dns[b][r*n+c])*dnScale + dnOffset }
				out[cls].nir += refl(iB08)
				out[cls].red += refl(iB04)
				out[cls].n++
			}
		}
		return out
	}
	july := classes(acqs[1])
	ndvi := func(a *acc) float64 { return (a.nir - a.red) / (a.nir + a.red) }
	if w := july[80]; w == nil || ndvi(w) > 0 {
		t.Errorf("water NDVI should be negative: %+v", w)
	}
	if f := july[10]; f == nil || ndvi(f) < 0.6 {
		t.Errorf("tree cover NDVI in July should exceed 0.6: %+v", f)
	}
	if b := july[50]; b == nil || ndvi(b) > 0.3 {
		t.Errorf("built-up NDVI should be low: %+v", b)
	}
	// Cropland parcels follow their own calendars: per pixel, NDVI moves
	// between April and July far more than tree cover's does.
	change := func(class uint8) float64 {
		sum, count := 0.0, 0
		for r := 0; r < n; r += 3 {
			for c := 0; c < n; c += 3 {
				if sc.classAt((float64(c)+0.5)*10, (float64(r)+0.5)*10) != class {
					continue
				}
				k2 := (r/2)*(n/2) + c/2
				if acqs[0].scl[k2] > sclWater || acqs[1].scl[k2] > sclWater || acqs[0].scl[k2] < sclVegetation || acqs[1].scl[k2] < sclVegetation {
					continue
				}
				nd := func(a *acquisition) float64 {
					nir, red := float64(a.dns[iB08][r*n+c]), float64(a.dns[iB04][r*n+c])
					return (nir - red) / (nir + red - 2000)
				}
				sum += math.Abs(nd(acqs[0]) - nd(acqs[1]))
				count++
			}
		}
		return sum / float64(count)
	}
	if crop, trees := change(40), change(10); crop < 0.15 || crop < 2*trees {
		t.Errorf("mean |ΔNDVI| April→July: cropland %.3f, tree cover %.3f", crop, trees)
	}

	// Label noise: the share of label pixels that differ from the true
	// class at their centre.
	labels := sc.labels(geo, nil)
	wrong := 0
	for row := range geo.label.Height {
		for col := range geo.label.Width {
			u, v := geo.labelUVAt(row, col)
			if labels[row*geo.label.Width+col] != sc.classAt(u, v) {
				wrong++
			}
		}
	}
	rate := float64(wrong) / float64(len(labels))
	if rate < cfg.LabelNoise*0.4 || rate > cfg.LabelNoise*1.6 {
		t.Errorf("label noise %.3f, configured %.3f", rate, cfg.LabelNoise)
	}
}

func TestResumeAfterInterrupt(t *testing.T) {
	cfg := tinyConfig(t)
	want := digest(t, genScene(t, "tiny", cfg))
	out := filepath.Join(t.TempDir(), "scene")

	// Interrupt after the first COGs are written.
	ctx, cancel := context.WithCancel(context.Background())
	var adds int
	_, err := Run(ctx, cfg, Options{Out: out, Writers: 1, NewBar: func(total int64, desc string) progress.Bar {
		return countingBar{add: func() {
			if strings.HasPrefix(desc, "write") {
				if adds++; adds == 5 {
					cancel()
				}
			}
		}}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("interrupted run left %s", out)
	}

	res, err := Run(context.Background(), cfg, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Skipped < 5 {
		t.Errorf("resumed %v, skipped %d", res.Resumed, res.Skipped)
	}
	got := digest(t, out)
	if len(got) != len(want) {
		t.Fatalf("%d files after resume, %d in one run", len(got), len(want))
	}
	for name, sum := range want {
		if got[name] != sum {
			t.Errorf("%s differs after resume", name)
		}
	}
}

type countingBar struct{ add func() }

func (b countingBar) Add(int) error { b.add(); return nil }
func (countingBar) Describe(string) {}
func (countingBar) Finish() error   { return nil }
