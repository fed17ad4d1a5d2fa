package synth

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/stacext"
)

// layersConfig is the tiny scene with an elevation tile and two radar
// acquisitions.
func layersConfig(t *testing.T) Config {
	cfg := tinyConfig(t)
	cfg.DEM = true
	cfg.Sentinel1 = []RadarDate{
		{Datetime: time.Date(2023, 5, 2, 17, 40, 12, 0, time.UTC), Platform: "sentinel-1a", OrbitState: "descending"},
		{Datetime: time.Date(2023, 7, 13, 5, 51, 40, 0, time.UTC), Platform: "sentinel-1a", OrbitState: "ascending"},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// readFloat32 reads band 1 of a Float32 raster.
func readFloat32(t *testing.T, path string) ([]float32, raster.Info) {
	t.Helper()
	info, err := raster.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := raster.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]float32, info.Width*info.Height)
	if err := raster.ReadBandWindowInto(s, 1, 0, 0, info.Width, info.Height, buf); err != nil {
		t.Fatal(err)
	}
	return buf, info
}

// TestLayersWritten: with dem and sentinel1, the scene's catalog gains a
// GLO-30-like elevation tile and Sentinel-1 RTC-like acquisitions whose
// items validate against STAC's schemas (sar and sat included), whose
// COGs hold the model's values on the grids the items declare, and whose
// bytes a second run repeats.
func TestLayersWritten(t *testing.T) {
	cfg := layersConfig(t)
	dirs := [2]string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for _, dir := range dirs {
		res, err := Run(context.Background(), cfg, Options{Out: dir})
		if err != nil {
			t.Fatal(err)
		}
		if res.Files < 2+3*len(cfg.Sentinel1) {
			t.Fatalf("%d files written", res.Files)
		}
	}
	dir := dirs[0]
	if _, err := stacext.Validate(filepath.Join(dir, "catalog.json")); err != nil {
		t.Fatal(err)
	}
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)

	grid := demGrid(geo)
	id := demItemID(grid)
	demPath := filepath.Join(dir, demCollection, id, id+".tif")
	dem, info := readFloat32(t, demPath)
	if info.EPSG != 4326 || info.DataType != "Float32" || info.Layout != "COG" || info.Grid != grid {
		t.Fatalf("elevation raster %+v, want a Float32 COG on %+v", info, grid)
	}
	if !slicesEqual(dem, sc.dem(geo, grid)) {
		t.Error("the elevation raster does not hold the model's values")
	}
	for _, v := range dem {
		if v < -500 || v > 3000 {
			t.Fatalf("elevation %g m", v)
		}
	}
	for _, d := range cfg.Sentinel1 {
		vv, vh := sc.backscatter(d, geo.centerLat)
		for pol, want := range map[string][]float32{"VV": vv, "VH": vh} {
			p := filepath.Join(dir, s1Collection, d.itemID(cfg.Tile), pol+".tif")
			got, info := readFloat32(t, p)
			if info.Grid != geo.utm || info.DataType != "Float32" || info.NoData == nil || *info.NoData != S1NoData {
				t.Fatalf("%s: %+v, want Float32 on the scene's grid with nodata %d", p, info, S1NoData)
			}
			if !slicesEqual(got, want) {
				t.Errorf("%s does not hold the model's values", p)
			}
			other, err := os.ReadFile(filepath.Join(dirs[1], s1Collection, d.itemID(cfg.Tile), pol+".tif"))
			if err != nil {
				t.Fatal(err)
			}
			if mine, _ := os.ReadFile(p); !bytes.Equal(mine, other) {
				t.Errorf("%s: a second run wrote other bytes", p)
			}
		}
	}
	a, _ := os.ReadFile(demPath)
	b, _ := os.ReadFile(filepath.Join(dirs[1], demCollection, id, id+".tif"))
	if !bytes.Equal(a, b) {
		t.Error("elevation: a second run wrote other bytes")
	}
	cat, _ := os.ReadFile(filepath.Join(dir, "catalog.json"))
	for _, c := range []string{demCollection, s1Collection} {
		if !strings.Contains(string(cat), "./"+c+"/collection.json") {
			t.Errorf("the catalog does not link %s", c)
		}
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLayersFollowTheLandscape: the layers carry the land cover's signal
// as real ones do: water lies lower than the land around it and is the
// darkest in VV, built-up the brightest, and a canopy's volume scatters
// more VH than grass.
func TestLayersFollowTheLandscape(t *testing.T) {
	cfg := layersConfig(t)
	cfg.Size = 600
	cfg.Classes = map[int]float64{10: 1, 30: 1, 40: 1, 50: 1, 80: 1}
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)
	n := cfg.Size
	var sumE, sumV, sumH [256]float64
	var count [256]int
	vv, vh := sc.backscatter(cfg.Sentinel1[1], geo.centerLat)
	for r := 0; r < n; r += 3 {
		for c := 0; c < n; c += 3 {
			u, v := (float64(c)+0.5)*10, (float64(r)+0.5)*10
			k := sc.surfaceAt(u, v).class
			sumE[k] += sc.elevation(u, v)
			sumV[k] += float64(vv[r*n+c])
			sumH[k] += float64(vh[r*n+c])
			count[k]++
		}
	}
	mean := func(s [256]float64, k uint8) float64 { return s[k] / float64(count[k]) }
	for _, k := range []uint8{10, 30, 40, 50, 80} {
		if count[k] == 0 {
			t.Fatalf("class %d absent from the test scene", k)
		}
	}
	for _, k := range []uint8{10, 30, 40, 50} {
		if mean(sumE, 80) >= mean(sumE, k) {
			t.Errorf("water at %.0f m, class %d at %.0f m: water should lie lower", mean(sumE, 80), k, mean(sumE, k))
		}
		if mean(sumV, 80) >= mean(sumV, k) {
			t.Errorf("VV of water %.4f, of class %d %.4f: water should be darkest", mean(sumV, 80), k, mean(sumV, k))
		}
		if k != 50 && mean(sumV, 50) <= mean(sumV, k) {
			t.Errorf("VV of built-up %.4f, of class %d %.4f: built-up should be brightest", mean(sumV, 50), k, mean(sumV, k))
		}
	}
	if mean(sumH, 10) <= mean(sumH, 30) {
		t.Errorf("VH of tree cover %.4f, of grassland %.4f: the canopy's volume should scatter more", mean(sumH, 10), mean(sumH, 30))
	}
}

// TestLayersRefused: the layer keys' bad values are errors that name the
// key.
func TestLayersRefused(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Sentinel1[0].Platform = "sentinel-2a" }, "sentinel1[0]: platform"},
		{func(c *Config) { c.Sentinel1[1].OrbitState = "polar" }, "sentinel1[1]: orbit_state"},
		{func(c *Config) { c.Sentinel1[0].Datetime = time.Time{} }, "sentinel1[0]: datetime missing"},
		{func(c *Config) { c.Sentinel1[1] = c.Sentinel1[0] }, "sentinel1[1]: a second acquisition"},
	} {
		cfg := layersConfig(t)
		tc.mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error naming %q", err, tc.want)
		}
	}
	if strings.Contains(string(tinyConfig(t).Resolved()), "sentinel1") || tinyConfig(t).Hash() == layersConfig(t).Hash() {
		t.Error("a scene without layers changes its config's resolved form or hash")
	}
}
