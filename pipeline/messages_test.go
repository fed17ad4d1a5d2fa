package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/scenes"
)

// TestVectorFieldMessages ingests a raster pair whose labels are a points
// layer (fields class and id) with fields it lacks: a missing class,
// weight or group field fails before anything is written, naming the
// setting, the field and the layer's fields, with no GDAL "skipping"
// and the tile named at most once.
func TestVectorFieldMessages(t *testing.T) {
	dir := t.TempDir()
	g := synthGrid
	g.Width, g.Height = 100, 80
	img, _ := rasterPair(t, dir, g)
	x, y := g.Transform[0]+55, g.Transform[3]-55
	layer := filepath.Join(dir, "points.geojson")
	gj := fmt.Sprintf(`{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32631"}},"features":[{"type":"Feature","properties":{"class":2,"id":1},"geometry":{"type":"Point","coordinates":[%f,%f]}}]}`, x, y)
	if err := os.WriteFile(layer, []byte(gj), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		label, weight, group string
		want                 string
	}{
		{"landcover", "", "", `layer points has no class field "landcover" (fields: class, id)`},
		{"class", "w", "", `source.label_weight_field: layer points has no field "w" (fields: class, id)`},
		{"class", "", "parcel", `source.label_group_field: layer points has no field "parcel" (fields: class, id)`},
	} {
		cfg := rasterConfig(t, img, layer)
		cfg.Source.Rasters[0].Tile = "mine"
		cfg.Source.LabelField, cfg.Source.LabelWeightField, cfg.Source.LabelGroupField = c.label, c.weight, c.group
		out := filepath.Join(dir, "out-"+c.label+c.weight+c.group)
		_, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "tile mine") > 1 || strings.Contains(err.Error(), "skipping") {
			t.Errorf("fields %q %q %q: %v, want %q once", c.label, c.weight, c.group, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("fields %q %q %q: the failed ingest left %s", c.label, c.weight, c.group, out)
		}
	}
}

// TestIngestWarnsOfSmallArea ingests the tiny scene with its own config's
// area (no warning) and with an area of about 2.5 % of it: ingest warns,
// naming area.bbox, the share and the tile. A scene from a STAC API is
// not judged (an area smaller than a tile is the usual case there).
func TestIngestWarnsOfSmallArea(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	var log strings.Builder
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "whole"), Log: textLog(&log)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "of the catalog's scenes") {
		t.Errorf("the tiny scene's own area warns:\n%s", log.String())
	}
	cfg.Area.BBox = []float64{3.01, 45.135, 3.02, 45.14}
	log.Reset()
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "corner"), Log: textLog(&log)}); err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`area: area.bbox \[3.01, 45.135, 3.02, 45.14\] covers (\d+\.\d) % of the catalog's scenes \(tiles 31TEJ\): only that part is mapped; set area.bbox`).FindStringSubmatch(log.String())
	if got == nil {
		t.Fatalf("no warning of the small area:\n%s", log.String())
	}
	if share, _ := strconv.ParseFloat(got[1], 64); share <= 0 || share >= scenes.AreaWarnPercent {
		t.Errorf("share %s %%", got[1])
	}
	cfg.Source.Catalog = ""
	if w := scenes.AreaCoverageWarning(cfg, [4]float64(cfg.Area.BBox), []scenes.TileItems{{Tile: "31TEJ", Items: []catalog.Item{{BBox: [4]float64{2, 45, 4, 46}}}}}); w != "" {
		t.Errorf("a STAC API's scenes are judged: %s", w)
	}
}
