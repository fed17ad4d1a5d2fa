package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// textPair writes a synthetic pair (rasterPair) on a small grid and a
// GeoJSON layer of one polygon per value of classes (raw JSON values), in
// columns of 20 pixels from the left edge, the full height.
func textPair(t *testing.T, classes ...string) (image, labels string, g geo.Grid) {
	t.Helper()
	dir := t.TempDir()
	g = geo.Grid{EPSG: 32631, Width: 200, Height: 60, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	image, _ = rasterPair(t, dir, g)
	var feats []string
	for i, c := range classes {
		x0, x1 := 500000+float64(i*20)*10, 500000+float64(i*20+20)*10
		feats = append(feats, fmt.Sprintf(`{"type":"Feature","properties":{"class":%s},"geometry":{"type":"Polygon","coordinates":[[[%g,5000000],[%g,5000000],[%g,4999400],[%g,4999400],[%g,5000000]]]}}`,
			c, x0, x1, x1, x0, x0))
	}
	labels = filepath.Join(dir, "fields.geojson")
	body := `{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32631"}},"features":[` + strings.Join(feats, ",") + `]}`
	if err := os.WriteFile(labels, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return image, labels, g
}

// textConfig is a short ingest config of one pair with vector labels in
// field class, plus extra YAML under source.
func textConfig(t *testing.T, image, labels, extra string) config.IngestConfig {
	t.Helper()
	cfg, err := config.ParseIngestConfig([]byte(`
source:
  rasters:
    - {image: ` + image + `, labels: ` + labels + `, tile: T1}
  bands: [B02, B03, B04, B08]
  scale: 0.0001
  label_field: class
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// columnCodes reads the labels a tile got, one per 20-pixel column strip.
func columnCodes(t *testing.T, out string, n int) []uint8 {
	t.Helper()
	v, g, err := raster.ReadBand[uint8](filepath.Join(out, "T1", "labels.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	var codes []uint8
	for i := range n {
		codes = append(codes, v[30*g.Width+i*20+10])
	}
	return codes
}

// TestIngestTextLabels burns text classes three ways: names of a built-in
// scheme take its codes, other words are numbered in sorted order into a
// scheme of their own, and source.label_codes maps them; NULLs and
// unmapped words burn nothing and are counted in the manifest; a layer
// with no usable class is an error naming the field and its values.
func TestIngestTextLabels(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		classes []string
		extra   string
		want    []uint8
		from    string
		scheme  string
		unused  string
	}{
		{"worldcover names", []string{`"Tree cover"`, `"permanent water bodies"`, `"CROPLAND"`}, "",
			[]uint8{10, 80, 40}, "the class names of scheme esa-worldcover", "esa-worldcover", ""},
		{"numbered", []string{`"forest"`, `" Water"`, `"Forest"`, "null", `"crop"`}, "",
			[]uint8{2, 3, 2, 0, 1}, "the values of field class, numbered 1–3 in sorted order", "class", `NULL`},
		{"mapped", []string{`"forest"`, `"paddy"`, `"water"`}, "  label_codes: {Forest: 10, water: 80}\n",
			[]uint8{10, 0, 80}, "source.label_codes", "esa-worldcover", `"paddy"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			image, labels, _ := textPair(t, c.classes...)
			cfg := textConfig(t, image, labels, c.extra)
			var log bytes.Buffer
			out := filepath.Join(t.TempDir(), "stack")
			if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
				t.Fatal(err)
			}
			if got := columnCodes(t, out, len(c.want)); !bytes.Equal(got, c.want) {
				t.Errorf("codes %v, want %v", got, c.want)
			}
			m := readManifest(t, filepath.Join(out, "T1"))
			if m.LabelCodes == nil || m.LabelCodes.From != c.from {
				t.Errorf("manifest label_codes %+v, want from %q", m.LabelCodes, c.from)
			}
			if m.LabelScheme == nil || m.LabelScheme.Name != c.scheme {
				t.Errorf("manifest label_scheme %+v, want %s", m.LabelScheme, c.scheme)
			}
			unused := fmt.Sprint(m.LabelsUnused)
			if c.unused == "" && len(m.LabelsUnused) > 0 || c.unused != "" && !strings.Contains(unused, c.unused) {
				t.Errorf("labels_unused %s, want %q", unused, c.unused)
			}
			if c.unused != "" && !strings.Contains(log.String(), "burn no label") {
				t.Errorf("no warning of the values that burn nothing:\n%s", log.String())
			}
			if !strings.Contains(log.String(), "text classes coded from "+c.from) {
				t.Errorf("the log does not say how classes were coded:\n%s", log.String())
			}
		})
	}

	t.Run("none usable", func(t *testing.T) {
		t.Parallel()
		image, labels, _ := textPair(t, `"paddy"`, `"paddy"`, "null")
		cfg := textConfig(t, image, labels, "  label_codes: {forest: 10}\n")
		_, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "stack")})
		if err == nil || !strings.Contains(err.Error(), "field class holds no class code") || !strings.Contains(err.Error(), `"paddy" ×2 (text the label codes do not map)`) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("bad codes", func(t *testing.T) {
		t.Parallel()
		for extra, want := range map[string]string{
			"  label_codes: {forest: 300}\n":          `source.label_codes: "forest": 300: class codes are 1–255`,
			"  label_codes: {forest: 1, Forest: 2}\n": `"Forest" and "forest" are the same value`,
		} {
			_, err := config.ParseIngestConfig([]byte("source:\n  rasters:\n    - {image: a.tif, labels: b.gpkg, tile: T1}\n  bands: [B02]\n  scale: 0.0001\n  label_field: class\n" + extra))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: got %v, want %q", extra, err, want)
			}
		}
	})
}

// TestIngestSkipsLayers stacks the Sentinel-2 bands of an image that also
// holds a layer lulc does not use, named in source.bands, and says so.
func TestIngestSkipsLayers(t *testing.T) {
	t.Parallel()
	image, labels, _ := textPair(t, "3", "4")
	cfg, err := config.ParseIngestConfig([]byte(`
source:
  rasters:
    - {image: ` + image + `, labels: ` + labels + `, tile: T1}
  bands: [B02, B03, elevation, B08]
  scale: 0.0001
  label_field: class
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"B02", "B03", "B08"}; fmt.Sprint(cfg.Bands) != fmt.Sprint(want) {
		t.Fatalf("default bands %v, want %v", cfg.Bands, want)
	}
	var log bytes.Buffer
	out := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Log: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, filepath.Join(out, "T1")); fmt.Sprint(m.Bands) != "[B02 B03 B08]" {
		t.Errorf("stack bands %v", m.Bands)
	}
	if !strings.Contains(log.String(), "source.bands: elevation left out of the stack") {
		t.Errorf("the log does not name the skipped layer:\n%s", log.String())
	}
	// The fourth image band (named B08) is the stack's third: rasterPair's
	// DN 1000 + 7·3 + x + y. Every band's darkest pixels lie above 0.08,
	// so offset auto, the default, removed 0.1, which the stack's own
	// +0.1 puts back.
	m := readManifest(t, filepath.Join(out, "T1"))
	if m.RadiometryOffset == nil || m.RadiometryOffset.Setting != "auto" || m.RadiometryOffset.Applied != -0.1 {
		t.Errorf("radiometry_offset %+v, want auto, -0.1", m.RadiometryOffset)
	}
	v, g := readU16(t, filepath.Join(out, "T1", "stack.tif"), 3)
	for _, i := range []int{0, 5*g.Width + 7} {
		if want := uint16(1000 + 21 + i%g.Width + i/g.Width); v[i] != want {
			t.Errorf("B08 at pixel %d: %d, want %d", i, v[i], want)
		}
	}
	_, err = config.ParseIngestConfig([]byte("source:\n  rasters:\n    - {image: a.tif, labels: b.tif, tile: T1}\n  bands: [dem, ndvi]\n  scale: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "names no Sentinel-2 reflectance band") {
		t.Errorf("no reflectance band: %v", err)
	}
}
