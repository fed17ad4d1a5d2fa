package scenes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// TestSearcherCrawlsOnce: an ingest's scenes, labels and layer are found
// in a static catalog served over HTTP that is read once, each document
// asked for one time, however many collections the ingest searches.
func TestSearcherCrawlsOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	item := func(id, collection, datetime string, props map[string]any, asset string) {
		p := map[string]any{"datetime": datetime}
		for k, v := range props {
			p[k] = v
		}
		write(id+".json", map[string]any{
			"type": "Feature", "stac_version": "1.0.0", "id": id, "collection": collection,
			"bbox": []float64{2.9, 45.0, 3.1, 45.2}, "geometry": nil, "links": []any{}, "properties": p,
			"assets": map[string]any{asset: map[string]any{"href": "./" + id + ".tif"}},
		})
	}
	s2 := map[string]any{"s2:mgrs_tile": "31TEJ", "eo:cloud_cover": 10}
	item("S2A_31TEJ_20240418", "sentinel-2-l2a", "2024-04-18T10:56:29Z", s2, "red")
	item("S2B_31TEJ_20240707", "sentinel-2-l2a", "2024-07-07T10:56:21Z", s2, "red")
	item("S2B_31TEJ_20230707", "sentinel-2-l2a", "2023-07-07T10:56:21Z", s2, "red") // outside the dates
	item("WC_N45E002", "esa-worldcover", "2021-06-01T00:00:00Z", nil, "map")
	item("DEM_N45E002", "cop-dem-glo-30", "2021-04-22T00:00:00Z", nil, "data")
	var links []map[string]any
	for _, id := range []string{"S2A_31TEJ_20240418", "S2B_31TEJ_20240707", "S2B_31TEJ_20230707", "WC_N45E002", "DEM_N45E002"} {
		links = append(links, map[string]any{"rel": "item", "href": "./" + id + ".json", "type": "application/json"})
	}
	write("catalog.json", map[string]any{"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "test", "links": links})

	var mu sync.Mutex
	asked := map[string]int{}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()

	cfg, err := config.ParseIngestConfig([]byte(`source:
  catalog: ` + srv.URL + `/catalog.json
  allow_hrefs: [` + srv.URL + `/]
  collection: sentinel-2-l2a
  label_collection: esa-worldcover
area:
  bbox: [2.99, 45.12, 3.04, 45.16]
dates:
  start: 2024-04-01
  end: 2024-10-31
layers:
  - {name: elevation, collection: cop-dem-glo-30}
`))
	if err != nil {
		t.Fatal(err)
	}
	area, intersects, err := cfg.SearchArea()
	if err != nil {
		t.Fatal(err)
	}
	s := NewSearcher(cfg, stage.Options{})
	items, labels, err := s.Items(t.Context(), area, intersects)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := s.Layers(t.Context(), area, intersects)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != "S2A_31TEJ_20240418" || items[1].ID != "S2B_31TEJ_20240707" {
		t.Errorf("scene items %v, want the two of 2024 in date order", items)
	}
	if len(labels) != 1 || labels[0].ID != "WC_N45E002" {
		t.Errorf("label items %v", labels)
	}
	if dem := layers["elevation"]; len(dem) != 1 || dem[0].ID != "DEM_N45E002" {
		t.Errorf("elevation items %v", dem)
	}
	if len(asked) != 6 {
		t.Errorf("%d documents asked for, want the catalog and its 5 items: %v", len(asked), asked)
	}
	for path, n := range asked {
		if n != 1 {
			t.Errorf("%s asked for %d times, want once", path, n)
		}
	}
}
