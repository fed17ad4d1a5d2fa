package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/npy"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/chips"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/train"
)

// TestExportChips cuts a stack of text classes into chips and checks the
// contract of docs/chips.md: the split plane holds exactly the forest's
// samples (every one where the draw put it, as many of each), chips cover
// the tile and carry its pixels, the files match their checksums, a map
// of class indices comes back as the tile's class COG, and evaluate
// --split compares only the validation pixels. Bad sizes, tiles and
// arrays are refused with the reason.
func TestExportChips(t *testing.T) {
	t.Parallel()
	image, labels, g := textPair(t, `"forest"`, `"crops"`, `"water"`, `"forest"`, `"urban"`, `"crops"`, `"water"`, `"grass"`, `"forest"`, `"crops"`)
	cfg := textConfig(t, image, labels, "")
	_, stack := mustIngest(t, cfg)
	tc, err := config.ParseTrainConfig([]byte("features: [B02, B03, B04, B08, ndvi, ndwi]\nsampling: {block_size: 8, buffer: 2, seed: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc.Input.Stack = stack
	model := filepath.Join(t.TempDir(), "model")
	if _, err := train.Train(context.Background(), tc, stage.Options{Out: model}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "chips")
	res, err := chips.ExportChips(context.Background(), chips.Config{Train: tc, Size: 32, Stride: 24}, stage.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	var idx chips.Index
	body, _ := os.ReadFile(filepath.Join(out, chips.ChipsFile))
	if err := json.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	if res.Chips != len(idx.Chips) || len(idx.Planes) != 6 || len(idx.Classes) != 5 || idx.Classes[0].Name != "crops" {
		t.Fatalf("index: %d chips, planes %v, classes %+v", len(idx.Chips), idx.Planes, idx.Classes)
	}
	for name, f := range idx.Files {
		sum, _ := sha256Of(t, filepath.Join(out, name))
		if sum != f.SHA256 {
			t.Errorf("%s: sha256 %s, recorded %s", name, sum, f.SHA256)
		}
	}

	// The split plane against the forest's samples.
	split, rows, cols, err := npy.ReadUint8(filepath.Join(out, "tiles", "T1_split.npy"))
	if err != nil || rows != g.Height || cols != g.Width {
		t.Fatalf("split %d×%d: %v", rows, cols, err)
	}
	raw, _ := os.ReadFile(filepath.Join(model, stage.SamplesFile))
	set, err := sampleset.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	var drawn, plane [4]int
	for i, px := range set.Pixel {
		row, col := int(px>>20)&(1<<20-1), int(px&(1<<20-1))
		want := uint8(sampling.PlaneTrain + set.Split[i])
		if got := split[row*cols+col]; got != want {
			t.Fatalf("sample %d at (%d, %d): split plane %d, draw %d", i, row, col, got, want)
		}
		drawn[want]++
	}
	for _, v := range split {
		plane[v]++
	}
	if drawn[1] != plane[1] || drawn[2] != plane[2] || plane[3] == 0 {
		t.Errorf("drawn %v, plane %v", drawn, plane)
	}

	// Chips carry the tile's pixels: chip k's label rows are the tile's.
	y, _, _, _ := npy.ReadUint8(filepath.Join(out, "tiles", "T1_y.npy"))
	chipY, err := os.ReadFile(filepath.Join(out, "y.npy"))
	if err != nil {
		t.Fatal(err)
	}
	chipY = chipY[len(npy.Header("|u1", []int{len(idx.Chips), 32, 32})):]
	for k, c := range idx.Chips {
		for r := range 32 {
			got := chipY[(k*32+r)*32 : (k*32+r+1)*32]
			want := y[(c.Y+r)*cols+c.X : (c.Y+r)*cols+c.X+32]
			if string(got) != string(want) {
				t.Fatalf("chip %d row %d differs from the tile", k, r)
			}
		}
		if c.X+32 > cols || c.Y+32 > rows {
			t.Fatalf("chip %d at (%d, %d) leaves the tile", k, c.X, c.Y)
		}
	}

	// A map of indices comes back as codes; evaluate --split keeps the
	// validation pixels only.
	pred := filepath.Join(t.TempDir(), "pred.npy")
	os.WriteFile(pred, append(npy.Header("|u1", []int{rows, cols}), y...), 0o644)
	class := filepath.Join(t.TempDir(), "unet", "class.tif")
	if err := chips.ImportClasses(out, "T1", pred, class, stage.Options{}); err != nil {
		t.Fatal(err)
	}
	back, _, err := raster.ReadBand[uint8](class, 1)
	if err != nil {
		t.Fatal(err)
	}
	stackLabels, _, _ := raster.ReadBand[uint8](filepath.Join(stack, "T1", "labels.tif"), 1)
	for i := range back {
		if back[i] != stackLabels[i] {
			t.Fatalf("pixel %d: imported %d, labels %d", i, back[i], stackLabels[i])
		}
	}
	ev, err := evaluate.Evaluate(context.Background(), class, filepath.Join(stack, "T1", "labels.tif"),
		evaluate.Config{Resampling: "nearest", Seed: 1, Split: filepath.Join(out, "tiles", "T1_split.npy")}, stage.Options{Out: filepath.Join(t.TempDir(), "ev")})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Pixels != plane[2] || ev.Metrics.Accuracy != 1 {
		t.Errorf("evaluate --split compared %d pixels (accuracy %g), want the %d validation pixels", ev.Pixels, ev.Metrics.Accuracy, plane[2])
	}

	for _, c := range []struct {
		cc   chips.Config
		want string
	}{
		{chips.Config{Train: tc, Size: 512, Stride: 256}, "larger than tile T1"},
		{chips.Config{Train: tc, Size: 32, Stride: 0}, "stride 0"},
	} {
		if _, err := chips.ExportChips(context.Background(), c.cc, stage.Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("size %d stride %d: %v", c.cc.Size, c.cc.Stride, err)
		}
	}
	if err := chips.ImportClasses(out, "T9", pred, class+"2", stage.Options{}); err == nil || !strings.Contains(err.Error(), "not a tile of the chips ([T1])") {
		t.Errorf("unknown tile: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short.npy")
	os.WriteFile(short, append(npy.Header("|u1", []int{2, 3}), make([]byte, 6)...), 0o644)
	if err := chips.ImportClasses(out, "T1", short, class+"3", stage.Options{}); err == nil || !strings.Contains(err.Error(), "is 2×3") {
		t.Errorf("wrong shape: %v", err)
	}
}
