package scene_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/source/scene"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// world is a bbox that every item intersects.
var world = [4]float64{-180, -90, 180, 90}

// tinyScene writes the tiny synthetic scene and returns its catalog's
// Sentinel-2 items (by date) and its label item.
func tinyScene(t *testing.T) (string, []catalog.Item, catalog.Item) {
	t.Helper()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "scene")
	if _, err := synth.Run(context.Background(), cfg, synth.Options{Out: dir}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "catalog.json")
	s2, err := catalog.Crawl(context.Background(), root, catalog.Query{Collections: []string{"sentinel-2-l2a"}, BBox: world}, catalog.HrefPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	labels, err := catalog.Crawl(context.Background(), root, catalog.Query{Collections: []string{"esa-worldcover"}, BBox: world}, catalog.HrefPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s2) != 3 || len(labels) != 1 {
		t.Fatalf("%d sentinel-2 and %d label items", len(s2), len(labels))
	}
	return root, s2, labels[0]
}

// One date read through this package, masked and quantised, is what ingest
// stacks when it is given that date alone: the two read paths agree.
func TestMatchesSingleDateIngest(t *testing.T) {
	root, items, labelItem := tinyScene(t)
	it := items[1] // the cloudiest date, with swath edges
	g, err := scene.Grid(it, "B04")
	if err != nil {
		t.Fatal(err)
	}
	if g.Width != 252 || g.Height != 252 || g.EPSG != 32631 || g.Transform[1] != 10 {
		t.Fatalf("B04 grid %+v", g)
	}

	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	day := it.Datetime.Format("2006-01-02")
	cfg.Source.Catalog, cfg.Dates.Start, cfg.Dates.End = root, day, day
	cfg.Bands = []string{"B04", "B11"}
	out := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	stackPath := filepath.Join(out, it.Tile, "stack.tif")
	if sg, err := scene.Grid(catalog.Item{ID: "stack", Assets: map[string]catalog.Asset{"red": {Href: stackPath}}}, "B04"); err != nil || sg != g {
		t.Fatalf("stack grid %+v (%v), want B04's %+v", sg, err, g)
	}

	scl, err := scene.Codes(it, "SCL", g, "nearest")
	if err != nil {
		t.Fatal(err)
	}
	bands := make([][]float32, len(cfg.Bands))
	for i, b := range cfg.Bands {
		if bands[i], err = scene.Reflectance(it, b, g, cfg.Resampling.Reflectance); err != nil {
			t.Fatal(err)
		}
	}
	valid := make([]bool, len(scl))
	if err := composite.Mask(valid, scl, bands, composite.DefaultDropSCL); err != nil {
		t.Fatal(err)
	}
	masked, nan := 0, 0
	for i := range valid {
		if !valid[i] {
			masked++
		}
		if math.IsNaN(float64(bands[0][i])) {
			nan++
		}
	}
	if masked < len(valid)/10 || masked == len(valid) {
		t.Errorf("%d of %d pixels masked on a cloudy date", masked, len(valid))
	}
	if nan != masked {
		t.Errorf("%d NaN reflectances for %d masked pixels", nan, masked)
	}
	for i := range cfg.Bands {
		want, _, err := raster.ReadBand[uint16](stackPath, i+1)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint16, len(want))
		composite.Quantise(got, bands[i], stage.StackScale, stage.StackOffset)
		for p := range got {
			if got[p] != want[p] {
				t.Fatalf("%s pixel %d: %d, ingest stacked %d", cfg.Bands[i], p, got[p], want[p])
			}
		}
	}

	labels, err := scene.Codes(labelItem, "labels", g, "mode")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := raster.ReadBand[uint8](filepath.Join(out, it.Tile, "labels.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	for p := range labels {
		if labels[p] != want[p] {
			t.Fatalf("label pixel %d: %d, ingest wrote %d", p, labels[p], want[p])
		}
		if !landcover.WorldCover.Has(labels[p]) {
			t.Fatalf("label pixel %d: %d is not a WorldCover class", p, labels[p])
		}
	}
	for p, c := range scl {
		if c != 0 && !landcover.SCL.Has(c) {
			t.Fatalf("SCL pixel %d: class %d", p, c)
		}
	}
}

func TestErrorsNameBandAndItem(t *testing.T) {
	_, items, _ := tinyScene(t)
	g, err := scene.Grid(items[0], "B04")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scene.Reflectance(items[0], "B99", g, "nearest"); err == nil || !strings.Contains(err.Error(), "B99") {
		t.Errorf("unknown band: %v", err)
	}
	if _, err := scene.Codes(items[0], "SCL", g, "sideways"); err == nil || !strings.Contains(err.Error(), items[0].ID) {
		t.Errorf("unknown resampling: %v", err)
	}
	broken := items[0]
	broken.Assets = map[string]catalog.Asset{"red": {Href: filepath.Join(t.TempDir(), "missing.tif")}}
	if _, err := scene.Grid(broken, "B04"); err == nil || !strings.Contains(err.Error(), "B04 of "+broken.ID) {
		t.Errorf("missing file: %v", err)
	}
}
