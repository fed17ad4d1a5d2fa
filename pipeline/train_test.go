package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/baseline"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/train"
)

// demoStack ingests the tiny scene once for the training tests.
func demoStack(t *testing.T) string {
	t.Helper()
	if dir, ok := demoScenes["tiny-stack"]; ok {
		return dir
	}
	scene := makeScene(t, "tiny", synthConfig(t))
	tmp, err := os.MkdirTemp("", "lulc-stack")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "stack")
	if _, err := ingest.Ingest(context.Background(), ingestConfig(t, filepath.Join(scene, "catalog.json")), stage.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	demoScenes["tiny-stack"] = out
	return out
}

func trainConfig(t *testing.T, name, stack string) config.TrainConfig {
	t.Helper()
	raw, err := configs.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if stack != "" {
		cfg.Input.Stack = stack
	}
	cfg.Forest.Trees = 30 // keep tests quick; the demo config uses 100
	return cfg
}

func mustTrain(t *testing.T, cfg config.TrainConfig) (train.Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	res, err := train.Train(context.Background(), cfg, stage.Options{Out: out, Version: "test", Charts: drawer})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

func TestTrainDemo(t *testing.T) {
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	res, out := mustTrain(t, cfg)
	// A realistic, not perfect, accuracy on the synthetic scene.
	if a := res.Metrics.Accuracy; a < 0.75 || a > 0.97 {
		t.Errorf("validation accuracy %.3f", a)
	}
	for _, f := range []string{stage.ModelFile, stage.SamplesFile, stage.MetricsFile, "confusion.png", "importance.png", "train.yaml", "run.json"} {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil || fi.Size() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
	body, _ := os.ReadFile(filepath.Join(out, stage.ModelFile))
	m, err := forest.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(cfg.Features, []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}); err != nil || m.Scale != stage.StackScale {
		t.Errorf("model inputs: %v, scale %g", err, m.Scale)
	}

	// Samples: at most max_per_class per class and split; no block on both
	// sides of the split.
	sb, _ := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	set, err := sampleset.Decode(sb)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[[2]uint8]int{}
	blocks := map[[3]uint64]uint8{}
	for i := range set.N() {
		counts[[2]uint8{set.Y[i], set.Split[i]}]++
		p := set.Pixel[i]
		key := [3]uint64{p >> 40, (p >> 20 & 0xfffff) / uint64(cfg.Sampling.BlockSize), (p & 0xfffff) / uint64(cfg.Sampling.BlockSize)}
		if s, ok := blocks[key]; ok && s != set.Split[i] {
			t.Fatalf("block %v holds both training and validation samples", key)
		}
		blocks[key] = set.Split[i]
	}
	for k, n := range counts {
		if n > cfg.Sampling.MaxPerClass {
			t.Errorf("class %d split %d: %d samples over the cap", k[0], k[1], n)
		}
	}
	// Each sample's label matches the labels raster at its pixel.
	labels, _, _ := raster.ReadBand[uint8](filepath.Join(demoStack(t), "31TEJ", "labels.tif"), 1)
	for i := 0; i < set.N(); i += 97 {
		p := set.Pixel[i]
		if got := labels[int(p>>20&0xfffff)*252+int(p&0xfffff)]; got != set.Classes[set.Y[i]] {
			t.Fatalf("sample %d: class %d, labels raster %d", i, set.Classes[set.Y[i]], got)
		}
	}

	// Same config: byte-identical model and samples.
	_, again := mustTrain(t, cfg)
	for _, f := range []string{stage.ModelFile, stage.SamplesFile, stage.MetricsFile} {
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(again, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs of the same config", f)
		}
	}
	// Another sampling seed: other samples.
	cfg.Sampling.Seed++
	_, other := mustTrain(t, cfg)
	a, _ := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	b, _ := os.ReadFile(filepath.Join(other, stage.SamplesFile))
	if bytes.Equal(a, b) {
		t.Error("a different seed gave the same samples")
	}
}

func TestTrainBalance(t *testing.T) {
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	cfg.Sampling.Balance = true
	_, out := mustTrain(t, cfg)
	sb, _ := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	set, _ := sampleset.Decode(sb)
	counts := map[[2]uint8]int{}
	for i := range set.N() {
		counts[[2]uint8{set.Y[i], set.Split[i]}]++
	}
	per := map[uint8]int{}
	for k, n := range counts {
		if per[k[1]] != 0 && per[k[1]] != n {
			t.Fatalf("balanced split %d has classes with %d and %d samples", k[1], per[k[1]], n)
		}
		per[k[1]] = n
	}
}

// golearnFit is package baseline's forest as Options.Golearn takes it
// (bench.Golearn, which this package's tests cannot import).
func golearnFit(x []float32, nf int, y []uint8, classes, trees, featuresPerTree int, seed int64) (stage.GolearnForest, error) {
	f, err := baseline.Train(x, nf, y, classes, trees, featuresPerTree, seed)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func TestTrainGolearn(t *testing.T) {
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	cfg.Engine = "golearn"
	cfg.Golearn.MaxSamples = 2000
	out := filepath.Join(t.TempDir(), "run")
	if _, err := train.Train(context.Background(), cfg, stage.Options{Out: out, Version: "test"}); err == nil || !strings.Contains(err.Error(), "golearn is not linked") {
		t.Fatalf("golearn without Options.Golearn: %v", err)
	}
	res, err := train.Train(context.Background(), cfg, stage.Options{Out: out, Version: "test", Golearn: golearnFit})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.Accuracy < 0.3 || len(res.Warnings) == 0 {
		t.Errorf("golearn accuracy %.3f, warnings %v", res.Metrics.Accuracy, res.Warnings)
	}
	if _, err := os.Stat(filepath.Join(out, stage.ModelFile)); err == nil {
		t.Error("golearn run wrote a lulc model file")
	}
}

// TestTrainRealTerraMind trains on the real TerraMind patches with their
// Esri land cover, declared as a custom scheme in configs/train-real.yaml.
func TestTrainRealTerraMind(t *testing.T) {
	if _, err := os.Stat("../../shared/data/terramind-s2-lulc"); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	cfg := trainConfig(t, "train-real.yaml", "")
	for i := range cfg.Input.Rasters {
		cfg.Input.Rasters[i].Image = "../" + cfg.Input.Rasters[i].Image
		cfg.Input.Rasters[i].Labels = "../" + cfg.Input.Rasters[i].Labels
	}
	res, _ := mustTrain(t, cfg)
	if res.Samples < 1000 || res.Metrics.Accuracy < 0.5 {
		t.Errorf("%d samples, accuracy %.3f", res.Samples, res.Metrics.Accuracy)
	}
	t.Logf("TerraMind: %d/%d samples, OA %.3f, kappa %.3f, macro-F1 %.3f", res.Samples, res.Validation, res.Metrics.Accuracy, res.Metrics.Kappa, res.Metrics.MacroF1)
}

func TestTrainBadInput(t *testing.T) {
	stack := demoStack(t)
	// An image whose first two bands are zero: nd(B02, B03) divides 0 by 0.
	zero := filepath.Join(t.TempDir(), "img.tif")
	lab := filepath.Join(t.TempDir(), "lab.tif")
	g := geo.Grid{EPSG: 32631, Width: 64, Height: 64, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	w, err := raster.NewWriter(zero, g, "uint16", []raster.BandInfo{{}, {}, {}}, raster.COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]uint16, 64*64)
	for i := range ones {
		ones[i] = 1000 + uint16(i%50)
	}
	w.Write(0, 0, 0, 64, 64, make([]uint16, 64*64))
	w.Write(1, 0, 0, 64, 64, make([]uint16, 64*64))
	w.Write(2, 0, 0, 64, 64, ones)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	labels := make([]uint8, 64*64)
	for i := range labels {
		labels[i] = uint8(10 * (1 + i%2))
	}
	raster.WriteCOG(lab, g, labels, raster.COGOptions{})

	cases := []struct {
		name string
		edit func(c *config.TrainConfig)
		want string
	}{
		{"bands disagree", func(c *config.TrainConfig) { c.Features = append(c.Features, "nd(B01,B09)") }, "needs band B01"},
		{"unknown index", func(c *config.TrainConfig) { c.Features = []string{"ndvi", "ndzi"} }, "unknown feature \"ndzi\""},
		{"too few samples", func(c *config.TrainConfig) { c.Sampling.BlockSize = 100000 }, "too few samples"},
		{"below min_per_class", func(c *config.TrainConfig) { c.Sampling.MinPerClass = 2001 }, "below sampling.min_per_class 2001"},
		{"negative buffer", func(c *config.TrainConfig) { c.Sampling.Buffer = -1 }, "sampling.buffer: -1 is outside [0, block_size 32)"},
		{"buffer of a block", func(c *config.TrainConfig) { c.Sampling.Buffer = 32 }, "sampling.buffer: 32 is outside [0, block_size 32)"},
		{"not a stack", func(c *config.TrainConfig) { c.Input.Stack = t.TempDir() }, "no tile manifests"},
		{"all-NaN feature", func(c *config.TrainConfig) {
			c.Input.Stack = ""
			c.Input.Rasters = append(c.Input.Rasters, struct {
				Image  string `yaml:"image"`
				Labels string `yaml:"labels"`
			}{zero, lab})
			c.Input.Bands, c.Input.Scale = []string{"B02", "B03", "B04"}, 0.0001
			c.Features = []string{"nd(B02,B03)", "B04"}
			c.Sampling.BlockSize, c.Sampling.Buffer = 4, 0
		}, "NaN in every training sample"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := trainConfig(t, "train-demo.yaml", stack)
			c.edit(&cfg)
			out := filepath.Join(t.TempDir(), "run")
			_, err := train.Train(context.Background(), cfg, stage.Options{Out: out})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(out, stage.ModelFile)); err == nil {
				t.Error("failed training left a model file")
			}
			if _, err := os.Stat(filepath.Dir(out)); err == nil {
				if left, _ := os.ReadDir(filepath.Dir(out)); len(left) > 0 {
					t.Errorf("failed training left %s behind", left[0].Name())
				}
			}
		})
	}

	// A class of the scheme absent from the labels is a warning, not an
	// error: WorldCover's mangroves are not in the demo scene.
	res, _ := mustTrain(t, trainConfig(t, "train-demo.yaml", stack))
	found := false
	for _, w := range res.Warnings {
		found = found || strings.Contains(w, "have no labelled pixel, so the model will never predict them") && strings.Contains(w, "95 (Mangroves)")
	}
	if !found {
		t.Errorf("warnings %v", res.Warnings)
	}
}

func TestTrainConfigsParse(t *testing.T) {
	for _, name := range []string{"train-demo.yaml", "train-real.yaml", "train-full.yaml"} {
		raw, _ := configs.Read(name)
		if _, err := config.ParseTrainConfig(raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	raw, _ := configs.Read("train-real.yaml")
	bad := strings.Replace(string(raw), `color: "#419bdf"`, `color: "blue"`, 1)
	if _, err := config.ParseTrainConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("bad colour: %v", err)
	}
}

// TestTrainWarnsOfUnknownCodes labels 15 % of a raster's pixels with a code
// outside the scheme: training goes on, and says how many and which.
func TestTrainWarnsOfUnknownCodes(t *testing.T) {
	dir := t.TempDir()
	img, lab := filepath.Join(dir, "img.tif"), filepath.Join(dir, "lab.tif")
	g := geo.Grid{EPSG: 32631, Width: 100, Height: 100, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	w, err := raster.NewWriter(img, g, "uint16", []raster.BandInfo{{}, {}}, raster.COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		v := make([]uint16, 100*100)
		for i := range v {
			v[i] = uint16(1000 + 300*b + i%100 + 5*((i/100)%2))
		}
		w.Write(b, 0, 0, 100, 100, v)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	labels := make([]uint8, 100*100)
	for i := range labels {
		switch {
		case i%100 < 15:
			labels[i] = 77 // not a WorldCover class
		case i%2 == 0:
			labels[i] = 10
		default:
			labels[i] = 40
		}
	}
	if err := raster.WriteCOG(lab, g, labels, raster.COGOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := trainConfig(t, "train-demo.yaml", "")
	cfg.Input.Stack = ""
	cfg.Input.Rasters = append(cfg.Input.Rasters, struct {
		Image  string `yaml:"image"`
		Labels string `yaml:"labels"`
	}{img, lab})
	cfg.Input.Bands, cfg.Input.Scale = []string{"B04", "B08"}, 0.0001
	cfg.Features = []string{"B04", "B08", "ndvi"}
	cfg.Sampling.BlockSize, cfg.Sampling.MinPerClass = 10, 1
	res, _ := mustTrain(t, cfg)
	want := "labels: 15.0 % of the labelled pixels (1500 of 10000) have codes outside the scheme"
	for _, w := range res.Warnings {
		if strings.Contains(w, want) && strings.Contains(w, "77 (1500)") {
			return
		}
	}
	t.Errorf("warnings %q lack %q", res.Warnings, want)
}

// TestTrainRejectsUnknownBands: input.bands takes the names ingest
// accepts, and nothing else.
func TestTrainRejectsUnknownBands(t *testing.T) {
	raw, err := configs.Read("train-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), "  stack: runs/demo/stack\n",
		"  rasters: [{image: a.tif, labels: b.tif}]\n  bands: [B02, FOO, B04]\n  scale: 0.0001\n", 1)
	if bad == string(raw) {
		t.Fatal("train-demo.yaml has no input.stack line")
	}
	if _, err := config.ParseTrainConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), `"FOO"`) || !strings.Contains(err.Error(), "input.bands") {
		t.Fatalf("got %v", err)
	}
}

// TestTrainBuffer checks the buffered split end to end: no training
// sample lies within sampling.buffer pixels of a validation block (the
// blocks' splits recomputed from their seeded hashes), the drop is
// counted in the samples, metrics.json and run.json, and the validation
// samples are those of the unbuffered split.
func TestTrainBuffer(t *testing.T) {
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	cfg.Sampling.MaxPerClass = 100000 // every candidate: the drop shows in the counts
	cfg.Sampling.Buffer = 0           // not the context features' default
	_, plainOut := mustTrain(t, cfg)
	cfg.Sampling.Buffer = 6
	res, out := mustTrain(t, cfg)
	read := func(dir string) *sampleset.Set {
		b, err := os.ReadFile(filepath.Join(dir, stage.SamplesFile))
		if err != nil {
			t.Fatal(err)
		}
		set, err := sampleset.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	plain, set := read(plainOut), read(out)
	s := cfg.Sampling
	validation := func(ii uint64, row, col int) bool {
		return rng.Unit(rng.Hash(s.Seed, 0x7a1, ii, uint64(row/s.BlockSize), uint64(col/s.BlockSize))) < s.ValidationFraction
	}
	const side = 252 // the demo stack's tiles
	for i := range set.N() {
		if set.Split[i] != 0 {
			continue
		}
		p := set.Pixel[i]
		ii, row, col := p>>40, int(p>>20&0xfffff), int(p&0xfffff)
		for r := max(0, row-s.Buffer); r <= min(side-1, row+s.Buffer); r++ {
			for c := max(0, col-s.Buffer); c <= min(side-1, col+s.Buffer); c++ {
				if validation(ii, r, c) {
					t.Fatalf("training sample at (%d, %d) of input %d lies within %d of validation pixel (%d, %d)", row, col, ii, s.Buffer, r, c)
				}
			}
		}
	}
	_, plainVal := plain.Subset(1)
	_, plainTrain := plain.Subset(0)
	if res.Validation != len(plainVal) || set.Buffered == 0 || int64(res.Samples)+set.Buffered != int64(len(plainTrain)) || res.Buffered != set.Buffered {
		t.Errorf("buffered %d (result %d): %d training and %d validation samples, unbuffered %d and %d",
			set.Buffered, res.Buffered, res.Samples, res.Validation, len(plainTrain), len(plainVal))
	}
	for _, f := range []string{stage.MetricsFile, "run.json"} {
		b, _ := os.ReadFile(filepath.Join(out, f))
		if want := fmt.Sprintf(`"buffered_training_pixels": %d`, set.Buffered); !strings.Contains(string(b), want) {
			t.Errorf("%s does not say %s", f, want)
		}
		b, _ = os.ReadFile(filepath.Join(plainOut, f))
		if strings.Contains(string(b), "buffered") {
			t.Errorf("%s of an unbuffered split mentions a buffer", f)
		}
	}
}

// TestTrainProgress: training reports its draw, tile by tile and then the
// kept pixels' features, and its fit, tree by tree, to progress bars.
func TestTrainProgress(t *testing.T) {
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	var mu sync.Mutex
	bars := map[string]*countBar{}
	opt := stage.Options{Out: filepath.Join(t.TempDir(), "run"), Version: "test", NewBar: func(total int64, desc string) progress.Bar {
		mu.Lock()
		defer mu.Unlock()
		b := &countBar{total: total, desc: desc}
		bars[desc] = b
		return b
	}}
	if _, err := train.Train(context.Background(), cfg, opt); err != nil {
		t.Fatal(err)
	}
	for desc, want := range map[string]int64{"train: sampling tiles": 2, "train: trees grown": int64(cfg.Forest.Trees)} {
		b := bars[desc]
		if b == nil || b.total != want || b.n.Load() != want || !b.done {
			t.Errorf("bar %q: %+v, want %d steps of %d, finished", desc, b, want, want)
		}
	}
}
