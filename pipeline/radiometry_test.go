package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// shiftedCopy writes image's 12 bands with the +1000 DN offset of
// Sentinel-2 processing baseline 04.00 and later added, as UInt16.
func shiftedCopy(t *testing.T, image, out string) {
	t.Helper()
	img, err := raster.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	g := img.Grid
	w, err := raster.NewWriter(out, g, "uint16", make([]raster.BandInfo, 12), raster.COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]float32, g.Width*g.Height)
	for k := 1; k <= 12; k++ {
		if err := raster.ReadBandWindowInto(img, k, 0, 0, g.Width, g.Height, src); err != nil {
			t.Fatal(err)
		}
		dn := make([]uint16, len(src))
		for i, v := range src {
			dn[i] = uint16(v) + 1000
		}
		if err := w.Write(k-1, 0, 0, g.Width, g.Height, dn); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRadiometryOffsetNoticed reproduces, on the real TerraMind patches,
// a map made across radiometric conventions: a model trained on one patch
// (no offset) maps the other with the +1000 DN offset added. Declared
// with offset 0, ingest warns that the tile looks offset and predict that
// its dark levels are 0.1 brighter than the training data's; declared
// with offset −0.1 (harmonised), or auto, neither warns, the stack is the
// plain patch's byte for byte, and so is the map, whose accuracy is
// recovered.
func TestRadiometryOffsetNoticed(t *testing.T) {
	cfg := realSampleConfig(t)
	dir := t.TempDir()
	for _, c := range []struct{ train, apply int }{{0, 0}, {1, 1}, {0, 1}, {1, 0}} {
		trainCfg, applyPair := cfg, cfg.Source.Rasters[c.apply]
		trainCfg.Source.Rasters = []config.RasterPair{cfg.Source.Rasters[c.train]}
		_, stack := mustIngest(t, trainCfg)
		tc := trainConfig(t, "train-real-sample.yaml", stack)
		// Per-pixel features, as the figures in docs/ingest.md were
		// measured: the effect of an offset on a pixel's own values.
		tc.Features = slices.DeleteFunc(tc.Features, func(f string) bool { return strings.Contains(f, "(") })
		tc.Sampling.Buffer = 0
		model := filepath.Join(t.TempDir(), "model")
		if _, err := train.Train(context.Background(), tc, stage.Options{Out: model}); err != nil {
			t.Fatal(err)
		}
		shifted := filepath.Join(dir, applyPair.Tile+"-offset.tif")
		if _, err := os.Stat(shifted); err != nil {
			shiftedCopy(t, applyPair.Image, shifted)
		}
		oa := map[string]float64{}
		maps := map[string][]byte{}
		for _, way := range []struct {
			name, image string
			offset      float64
			auto        bool
		}{{"plain", applyPair.Image, 0, false}, {"offset, declared 0", shifted, 0, false}, {"offset, declared -0.1", shifted, -0.1, false}, {"offset, auto", shifted, 0, true}} {
			ac := cfg
			pair := applyPair
			pair.Image = way.image
			ac.Source.Rasters = []config.RasterPair{pair}
			ac.Source.Offset = config.Offset{Value: way.offset, Auto: way.auto, Set: true}
			_, st := mustIngest(t, ac)
			body, err := os.ReadFile(filepath.Join(st, applyPair.Tile, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := stage.ParseManifest(body)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "pred")
			pr, err := predict.Predict(context.Background(), predict.Config{Model: filepath.Join(model, stage.ModelFile), Input: st, Window: 512}, stage.Options{Out: out})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := evaluate.Evaluate(context.Background(), filepath.Join(out, applyPair.Tile, stage.ClassFile), applyPair.Labels, evaluate.Config{Resampling: "nearest", Seed: 1}, stage.Options{Out: filepath.Join(t.TempDir(), "ev")})
			if err != nil {
				t.Fatal(err)
			}
			oa[way.name] = ev.Metrics.Accuracy
			maps[way.name], _ = os.ReadFile(filepath.Join(out, applyPair.Tile, stage.ClassFile))
			offsetLeft := way.name == "offset, declared 0"
			if got := m.RadiometryWarning != ""; got != offsetLeft || offsetLeft && !strings.Contains(m.RadiometryWarning, "offset: -0.1") {
				t.Errorf("%s → %s (%s): ingest warning %q", trainCfg.Source.Rasters[0].Tile, applyPair.Tile, way.name, m.RadiometryWarning)
			}
			if got := pr.Tiles[0].Radiometry; (got != "") != offsetLeft || offsetLeft && !strings.Contains(got, "brighter") {
				t.Errorf("%s → %s (%s): predict warning %q", trainCfg.Source.Rasters[0].Tile, applyPair.Tile, way.name, got)
			}
			if way.auto && (m.RadiometryOffset == nil || m.RadiometryOffset.Applied != -0.1 || m.Sources[0].Assets["B02"].Offset != -0.1) {
				t.Errorf("%s: offset auto did not remove the offset: %+v", applyPair.Tile, m.RadiometryOffset)
			}
			t.Logf("train %s, map %s (%s): OA %.3f, dark levels %v", trainCfg.Source.Rasters[0].Tile, applyPair.Tile, way.name, ev.Metrics.Accuracy, m.Dark)
		}
		for _, h := range []string{"offset, declared -0.1", "offset, auto"} {
			if !bytes.Equal(maps["plain"], maps[h]) || oa["plain"] != oa[h] {
				t.Errorf("%s: the harmonised map (%s) differs from the plain patch's", applyPair.Tile, h)
			}
		}
		if oa["offset, declared 0"] >= oa["plain"] {
			t.Errorf("%s: the offset left in did not cost accuracy (%.3f against %.3f)", applyPair.Tile, oa["offset, declared 0"], oa["plain"])
		}
	}
}
