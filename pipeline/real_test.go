package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/ingest"
)

const esDir = "../../shared/data/earthsearch-s2-l2a-29RKH-2020-02-19"

// TestIngestRealEarthSearchItem ingests the real Earth Search item
// S2A_29RKH_20200219_0_L2A from a static catalog whose hrefs point at the
// local COGs. The files are decimated 10× while the item's proj:shape still
// describes the full grid: lulc takes grids from the files. The item comes
// without labels for its desert, so the catalog adds a WorldCover-style
// label raster of bare ground (60) over the tile.
func TestIngestRealEarthSearchItem(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(esDir, "S2A_29RKH_20200219_0_L2A.json"))
	if err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	abs, _ := filepath.Abs(esDir)
	dir := t.TempDir()
	var item map[string]any
	json.Unmarshal(body, &item)
	for _, a := range item["assets"].(map[string]any) {
		asset := a.(map[string]any)
		href := asset["href"].(string)
		asset["href"] = filepath.Join(abs, href[strings.LastIndex(href, "/")+1:])
	}
	item["links"] = []any{}
	writeJSON(t, filepath.Join(dir, "s2", "item.json"), item)

	labels := make([]uint8, 1500*1500)
	for i := range labels {
		labels[i] = 60
	}
	lg := geo.Grid{EPSG: 4326, Width: 1500, Height: 1500, Transform: [6]float64{-12.1, 0.001, 0, 25.4, 0, -0.001}}
	os.MkdirAll(filepath.Join(dir, "wc"), 0o755)
	if err := raster.WriteCOG(filepath.Join(dir, "wc", "map.tif"), lg, labels, raster.COGOptions{NoData: stage.Ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "wc", "item.json"), map[string]any{
		"type": "Feature", "stac_version": "1.0.0", "id": "labels", "collection": "esa-worldcover",
		"bbox": []float64{-12.1, 23.9, -10.6, 25.4}, "geometry": nil, "links": []any{},
		"properties": map[string]any{"datetime": "2021-01-01T00:00:00Z"},
		"assets":     map[string]any{"map": map[string]any{"href": "./map.tif"}},
	})
	for _, c := range []struct{ id, item string }{{"sentinel-2-l2a", "s2"}, {"esa-worldcover", "wc"}} {
		writeJSON(t, filepath.Join(dir, c.item, "collection.json"), map[string]any{
			"type": "Collection", "stac_version": "1.0.0", "id": c.id, "description": c.id, "license": "other",
			"extent": map[string]any{"spatial": map[string]any{"bbox": [][]float64{{-180, -90, 180, 90}}},
				"temporal": map[string]any{"interval": [][]any{{nil, nil}}}},
			"links": []any{map[string]any{"rel": "item", "href": "./item.json"}},
		})
	}
	writeJSON(t, filepath.Join(dir, "catalog.json"), map[string]any{
		"type": "Catalog", "stac_version": "1.0.0", "id": "real", "description": "real",
		"links": []any{map[string]any{"rel": "child", "href": "./s2/collection.json"}, map[string]any{"rel": "child", "href": "./wc/collection.json"}},
	})

	cfg := ingestConfig(t, filepath.Join(dir, "catalog.json"))
	cfg.Area.BBox = []float64{-11.6, 24.6, -11.3, 24.9}
	cfg.Dates.Start, cfg.Dates.End = "2020-02-01", "2020-02-28"
	cfg.Grid.Resolution = 100 // the decimated files' finest resolution
	// The item's hrefs point into the shared data, outside the catalog's
	// directory: the policy must be widened to read them.
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "refused")}); !errors.Is(err, catalog.ErrHrefRefused) {
		t.Fatalf("hrefs outside the catalog were read: %v", err)
	}
	cfg.Source.AllowHrefs = []string{abs}
	res, out := mustIngest(t, cfg)
	if len(res.Tiles) != 1 || res.Tiles[0].Tile != "29RKH" {
		t.Fatalf("tiles %+v", res.Tiles)
	}
	stack := filepath.Join(out, "29RKH", "stack.tif")
	info, err := raster.Inspect(stack)
	if err != nil {
		t.Fatal(err)
	}
	// Aligned to the tile origin on a 600 m lattice, inside the tile.
	x0, y0 := info.Transform[0], info.Transform[3]
	if info.EPSG != 32629 || info.Transform[1] != 100 || int(x0-199980)%600 != 0 || int(2800020-y0)%600 != 0 || info.Width < 300 || info.Width > 360 {
		t.Fatalf("stack grid %+v", info.Grid)
	}

	// One date: where SCL keeps the pixel, the stack holds the source DN
	// re-encoded from baseline 02.14 (offset 0) to lulc's offset −0.1.
	red, _, _ := raster.ReadBand[uint16](stack, 3)
	src, sg, err := raster.ReadBand[uint16](filepath.Join(esDir, "B04.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	scl, _, _ := raster.ReadBand[uint8](filepath.Join(esDir, "SCL.tif"), 1)
	col0 := int((x0 - sg.Transform[0]) / 100)
	row0 := int((sg.Transform[3] - y0) / 100)
	kept, masked := 0, 0
	for i := 0; i < info.Width*info.Height; i += 7 {
		r, c := row0+i/info.Width, col0+i%info.Width
		dn := src[r*sg.Width+c]
		cls := scl[(r/2)*549+c/2]
		switch {
		case dn == 0 || cls == 0 || cls == 1 || cls == 3 || cls >= 8 && cls <= 10:
			if red[i] != 0 {
				t.Fatalf("pixel %d: masked (SCL %d) but stack holds %d", i, cls, red[i])
			}
			masked++
		default:
			if red[i] != dn+1000 {
				t.Fatalf("pixel %d: stack %d, source DN %d", i, red[i], dn)
			}
			kept++
		}
	}
	if kept == 0 {
		t.Fatal("no valid pixel checked")
	}
	lab, _, _ := raster.ReadBand[uint8](filepath.Join(out, "29RKH", "labels.tif"), 1)
	for _, v := range lab {
		if v != 60 {
			t.Fatalf("label %d, want 60", v)
		}
	}
	t.Logf("checked %d kept and %d masked pixels", kept, masked)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
