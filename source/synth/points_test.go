package synth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/stacext"
)

// TestLabelPoints checks the point layer written with label_points: as
// many points as asked, each at the centre of a label pixel inside the
// scene and carrying that pixel's class (burnt back onto the label grid,
// the points label exactly their pixels, with the map's codes), the item
// lists it, the catalog validates, and a second run writes the same
// bytes.
func TestLabelPoints(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.LabelPoints = 400
	dir := genScene(t, "tiny-points", cfg)
	maps, _ := filepath.Glob(filepath.Join(dir, "esa-worldcover", "*", "*_Map.tif"))
	if len(maps) != 1 {
		t.Fatalf("label COGs: %v", maps)
	}
	gpkg := strings.TrimSuffix(maps[0], "_Map.tif") + "_points.gpkg"
	labels, g, err := raster.ReadBand[uint8](maps[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	g.EPSG = wcEPSG // ReadBand names no code for this CRS
	burnt, err := raster.RasterizeLabels(gpkg, raster.VectorLabels{Field: PointsField, Layer: PointsLayer}, g)
	if err != nil {
		t.Fatal(err)
	}
	n, classes := 0, map[uint8]bool{}
	for i, c := range burnt {
		if c == 0 {
			continue
		}
		n++
		classes[c] = true
		if c != labels[i] {
			t.Fatalf("label pixel %d: a point of class %d on the map's %d", i, c, labels[i])
		}
	}
	if n != cfg.LabelPoints || len(classes) < 4 {
		t.Errorf("%d points burnt (want %d), %d classes", n, cfg.LabelPoints, len(classes))
	}
	// Inside the scene: on its UTM grid, every point labels a pixel.
	utm := geo.Grid{EPSG: cfg.EPSG, Width: cfg.Size, Height: cfg.Size, Transform: [6]float64{cfg.Origin[0], 10, 0, cfg.Origin[1], 0, -10}}
	onScene, err := raster.RasterizeLabels(gpkg, raster.VectorLabels{Field: PointsField}, utm)
	if err != nil {
		t.Fatal(err)
	}
	m := 0
	for _, c := range onScene {
		if c != 0 {
			m++
		}
	}
	// Two points may share a 10 m pixel (label pixels are smaller).
	if m < cfg.LabelPoints*9/10 || m > cfg.LabelPoints {
		t.Errorf("%d scene pixels labelled by %d points", m, cfg.LabelPoints)
	}
	items, _ := filepath.Glob(filepath.Join(dir, "esa-worldcover", "*", "ESA_*.json"))
	if len(items) != 1 {
		t.Fatalf("label items: %v", items)
	}
	body, _ := os.ReadFile(items[0])
	if !strings.Contains(string(body), `"href": "./`+filepath.Base(gpkg)+`"`) {
		t.Errorf("the label item does not list %s", filepath.Base(gpkg))
	}
	if _, err := stacext.Validate(filepath.Join(dir, "catalog.json")); err != nil {
		t.Fatalf("%#v", err)
	}
	again := filepath.Join(t.TempDir(), "again")
	if _, err := Run(context.Background(), cfg, Options{Out: again}); err != nil {
		t.Fatal(err)
	}
	a, b := digest(t, dir), digest(t, again)
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two runs", name)
		}
	}
	if len(a) != len(b) {
		t.Errorf("%d files, then %d", len(a), len(b))
	}

	cfg.LabelPoints = cfg.Size * cfg.Size
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "label_points") {
		t.Errorf("too many points: %v", err)
	}
}
