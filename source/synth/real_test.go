package synth

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutMatchesEarthSearch compares the synthetic items with a real
// Earth Search v1 item from ../shared/data: the same asset keys, titles,
// common names, data types, resolutions and file names.
func TestLayoutMatchesEarthSearch(t *testing.T) {
	realPath := "../../../shared/data/earthsearch-s2-l2a-29RKH-2020-02-19/S2A_29RKH_20200219_0_L2A.json"
	body, err := os.ReadFile(realPath)
	if err != nil {
		t.Skipf("real sample data not available (%v)", err)
	}
	var real itemJSON
	if err := json.Unmarshal(body, &real); err != nil {
		t.Fatal(err)
	}
	var titles struct {
		Assets map[string]struct {
			Href  string `json:"href"`
			Title string `json:"title"`
		} `json:"assets"`
	}
	json.Unmarshal(body, &titles)

	cfg := tinyConfig(t)
	dir := genScene(t, "tiny", cfg)
	id := cfg.Dates[0].itemID(cfg.Tile)
	synthBody, _ := os.ReadFile(filepath.Join(dir, "sentinel-2-l2a", id, id+".json"))
	ours := readItem(t, filepath.Join(dir, "sentinel-2-l2a", id, id+".json"))
	var ourTitles = titles
	ourTitles.Assets = nil
	json.Unmarshal(synthBody, &ourTitles)

	for key, a := range ours.Assets {
		r, ok := real.Assets[key]
		if !ok {
			t.Errorf("asset %q is not an Earth Search key", key)
			continue
		}
		if ourTitles.Assets[key].Title != titles.Assets[key].Title {
			t.Errorf("%s: title %q, Earth Search %q", key, ourTitles.Assets[key].Title, titles.Assets[key].Title)
		}
		if filepath.Base(a.Href) != filepath.Base(titles.Assets[key].Href) {
			t.Errorf("%s: file %s, Earth Search %s", key, filepath.Base(a.Href), filepath.Base(titles.Assets[key].Href))
		}
		if a.Raster[0].DataType != r.Raster[0].DataType || a.Raster[0].Res != r.Raster[0].Res {
			t.Errorf("%s: raster:bands %+v, Earth Search %+v", key, a.Raster[0], r.Raster[0])
		}
		if len(r.EO) == 1 && (len(a.EO) != 1 || a.EO[0].CommonName != r.EO[0].CommonName) {
			t.Errorf("%s: eo:bands %+v, Earth Search %+v", key, a.EO, r.EO)
		}
	}
	for _, key := range []string{"blue", "green", "red", "nir", "rededge1", "rededge2", "rededge3", "nir08", "swir16", "swir22", "scl"} {
		if _, ok := ours.Assets[key]; !ok {
			t.Errorf("Earth Search asset %q missing", key)
		}
	}
	if !strings.HasPrefix(id, "S2") || !strings.HasSuffix(id, "_0_L2A") {
		t.Errorf("item id %s does not follow Earth Search's pattern", id)
	}
}
