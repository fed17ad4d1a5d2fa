package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
)

// snowStack ingests an all-snow version of the tiny scene (lulc synth
// with classes {70: 1}: every patch snow and ice, SCL 11, which the tiny
// ingest config keeps).
func snowStack(t *testing.T) string {
	t.Helper()
	if dir, ok := demoScenes["snow-stack"]; ok {
		return dir
	}
	cfg := synthConfig(t)
	cfg.Classes = map[int]float64{70: 1}
	scene := makeScene(t, "snow", cfg)
	tmp, err := os.MkdirTemp("", "lulc-snow")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "stack")
	if _, err := ingest.Ingest(context.Background(), ingestConfig(t, filepath.Join(scene, "catalog.json")), stage.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	demoScenes["snow-stack"] = out
	return out
}

// readAOA reads aoa.tif's two bands.
func readAOA(t *testing.T, path string) (di, mask []float32, g geo.Grid) {
	t.Helper()
	info, err := raster.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := raster.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	n := info.Width * info.Height
	di, mask = make([]float32, n), make([]float32, n)
	if err := raster.ReadBandWindowInto(src, 1, 0, 0, info.Width, info.Height, di); err != nil {
		t.Fatal(err)
	}
	if err := raster.ReadBandWindowInto(src, 2, 0, 0, info.Width, info.Height, mask); err != nil {
		t.Fatal(err)
	}
	return di, mask, geo.Grid{Width: info.Width, Height: info.Height}
}

// TestAOAFlagsSnow: a model trained on the tiny scene, which has no snow,
// puts at least 90 % of an all-snow scene outside its area of
// applicability, and says so in the item and the result; its own scene
// lies mostly inside. Reruns give the same aoa.tif, byte for byte.
func TestAOAFlagsSnow(t *testing.T) {
	modelPath := demoModel(t)
	m, _, err := predict.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	if m.AOA == nil || m.AOA.N < 2 || !(m.AOA.Threshold > 0) {
		t.Fatalf("the demo model has no area of applicability: %+v", m.AOA)
	}
	outside := func(mask []float32) (float64, int) {
		var in, out int
		for _, v := range mask {
			switch {
			case v == 1:
				in++
			case v == 0:
				out++
			}
		}
		return 100 * float64(out) / float64(in+out), in + out
	}
	for _, step := range []int{1, 4} {
		res, dir := mustPredict(t, predict.Config{Model: modelPath, Input: snowStack(t), Window: 512, AOA: stage.AOAOptions{Step: step}})
		tile := res.Tiles[0]
		path := filepath.Join(dir, tile.Tile, stage.AOAFile)
		if tile.AOA != path {
			t.Fatalf("aoa path %q, want %q", tile.AOA, path)
		}
		di, mask, g := readAOA(t, path)
		if want := (252 + step - 1) / step; g.Width != want || g.Height != want {
			t.Fatalf("step %d: aoa.tif is %d × %d, want %d × %d", step, g.Width, g.Height, want, want)
		}
		pct, n := outside(mask)
		t.Logf("step %d: %.2f %% of %d snow pixels outside (threshold %.4g)", step, pct, n, m.AOA.Threshold)
		if n < len(mask)/2 || pct < 90 {
			t.Fatalf("step %d: %.1f %% of %d snow pixels outside the area of applicability, want ≥ 90 %%", step, pct, n)
		}
		for i, d := range di {
			if (d != d) != (mask[i] != mask[i]) || (d == d && (float64(d) <= m.AOA.Threshold) != (mask[i] == 1)) {
				t.Fatalf("pixel %d: DI %v and mask %v disagree (threshold %v)", i, d, mask[i], m.AOA.Threshold)
			}
		}
		if tile.AOAOutside == nil || math.Abs(*tile.AOAOutside-pct) > 1e-9 || tile.AOAWarning == "" {
			t.Fatalf("step %d: result says %v %% outside (%q), the file %.3f %%", step, tile.AOAOutside, tile.AOAWarning, pct)
		}
		var item struct {
			Properties map[string]any `json:"properties"`
			Assets     map[string]any `json:"assets"`
		}
		body, _ := os.ReadFile(tile.Item)
		if err := json.Unmarshal(body, &item); err != nil {
			t.Fatal(err)
		}
		if item.Assets["aoa"] == nil || item.Properties["lulc:aoa_warning"] == nil || item.Properties["lulc:aoa_outside_percent"].(float64) < 90 {
			t.Fatalf("item: %v", item.Properties)
		}
		checkCatalog(t, filepath.Join(dir, stage.CollectionFile))
		// A rerun writes the same bytes.
		res2, _ := mustPredict(t, predict.Config{Model: modelPath, Input: snowStack(t), Window: 1024, AOA: stage.AOAOptions{Step: step}})
		a, _ := os.ReadFile(path)
		b, _ := os.ReadFile(res2.Tiles[0].AOA)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("step %d: rerun (other window) gives another aoa.tif", step)
		}
	}
	// The training scene itself lies mostly inside.
	res, _ := mustPredict(t, predict.Config{Model: modelPath, Input: demoStack(t), Window: 512})
	_, mask, _ := readAOA(t, res.Tiles[0].AOA)
	pct, _ := outside(mask)
	t.Logf("training scene: %.2f %% outside", pct)
	if pct > 10 || res.Tiles[0].AOAWarning != "" {
		t.Errorf("%.1f %% of the training scene outside the area of applicability (%q)", pct, res.Tiles[0].AOAWarning)
	}
	// Off: no aoa.tif, no asset.
	res, dir := mustPredict(t, predict.Config{Model: modelPath, Input: demoStack(t), Window: 512, AOA: stage.AOAOptions{Off: true}})
	if res.Tiles[0].AOA != "" {
		t.Error("aoa.off wrote an area of applicability")
	}
	if _, err := os.Stat(filepath.Join(dir, res.Tiles[0].Tile, stage.AOAFile)); err == nil {
		t.Error("aoa.off: aoa.tif exists")
	}
}
