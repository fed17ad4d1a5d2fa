package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// demoModel trains a small forest on the tiny stack once.
func demoModel(t *testing.T) string {
	t.Helper()
	if p, ok := demoScenes["tiny-model"]; ok {
		return p
	}
	cfg := trainConfig(t, "train-demo.yaml", demoStack(t))
	tmp, err := os.MkdirTemp("", "lulc-model")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "run")
	if _, err := train.Train(context.Background(), cfg, stage.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	demoScenes["tiny-model"] = filepath.Join(out, stage.ModelFile)
	return demoScenes["tiny-model"]
}

func mustPredict(t *testing.T, pc predict.Config) (predict.Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "pred")
	res, err := predict.Predict(context.Background(), pc, stage.Options{Out: out, Charts: drawer})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

// TestPredictMatchesForest predicts the tiny stack and compares every pixel
// with the forest applied directly to the same features.
func TestPredictMatchesForest(t *testing.T) {
	stack, modelPath := demoStack(t), demoModel(t)
	res, out := mustPredict(t, predict.Config{Model: modelPath, Input: stack, Confidence: true, Window: 512})
	if len(res.Tiles) != 1 {
		t.Fatalf("tiles %+v", res.Tiles)
	}
	m, _, err := predict.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := raster.Inspect(filepath.Join(stack, "31TEJ", "stack.tif"))
	n := info.Width * info.Height
	set, err := features.NewSet(m.Features, m.Bands)
	if err != nil {
		t.Fatal(err)
	}
	planes := make([][]float32, len(m.Bands))
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = true
	}
	for b := range planes {
		dn, _, _ := raster.ReadBand[uint16](filepath.Join(stack, "31TEJ", "stack.tif"), b+1)
		planes[b] = composite.Reflectance(dn, 0, float32(m.Scale), float32(m.Offset))
		for i, v := range dn {
			if v == 0 {
				valid[i] = false
			}
		}
	}
	feats := make([][]float32, len(set.Features))
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	// The context features, from the whole tile.
	for range set.Planes() - len(set.Bands) {
		planes = append(planes, make([]float32, n))
	}
	rect := features.Rect{Width: info.Width, Height: info.Height, InnerW: info.Width, InnerH: info.Height}
	if err := set.ContextCompute(planes[len(set.Bands):], planes[:len(set.Bands)], rect); err != nil {
		t.Fatal(err)
	}
	if err := (features.CPU{Set: set}).Compute(feats, planes); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, n*len(feats))
	for i := range n {
		for f := range feats {
			x[i*len(feats)+f] = feats[f][i]
		}
	}
	xb, _ := m.Bins.Bin(x, len(feats))
	cls, prob, _ := m.Forest.Classify(xb)
	got, _, _ := raster.ReadBand[uint8](filepath.Join(out, "31TEJ", stage.ClassFile), 1)
	conf, _, _ := raster.ReadBand[uint8](filepath.Join(out, "31TEJ", stage.ConfidenceFile), 1)
	nodata := 0
	for i := range n {
		want := m.Classes[cls[i]].Code
		if !valid[i] {
			want = 0
			nodata++
			if conf[i] != 0 {
				t.Fatalf("pixel %d: nodata with confidence %d", i, conf[i])
			}
		} else if c := int(math.Round(float64(prob[i]) * 100)); int(conf[i]) != max(1, c) {
			t.Fatalf("pixel %d: confidence %d, want %d", i, conf[i], c)
		}
		if got[i] != want {
			t.Fatalf("pixel %d: class %d, forest says %d", i, got[i], want)
		}
	}
	if nodata == 0 {
		t.Error("the tiny stack has nodata pixels; none were checked")
	}

	// Class COG: layout, palette, names; the item validates.
	ci, err := raster.Inspect(filepath.Join(out, "31TEJ", stage.ClassFile))
	if err != nil {
		t.Fatal(err)
	}
	if ci.Layout != "COG" || ci.DataType != "Byte" || ci.NoData == nil || *ci.NoData != 0 || ci.BlockSize != [2]int{512, 512} && ci.BlockSize != [2]int{252, 252} {
		t.Errorf("class COG %+v", ci)
	}
	water, _ := landcover.WorldCover.Class(80)
	if e := ci.ColorTable[80]; e != [4]int16{int16(water.Color.R), int16(water.Color.G), int16(water.Color.B), 255} {
		t.Errorf("palette entry 80 = %v", e)
	}
	if names, _ := raster.Categories(filepath.Join(out, "31TEJ", stage.ClassFile)); len(names) < 81 || names[80] != water.Name {
		t.Errorf("category names %q", names)
	}
	// The output is a collection of one item; the stack it was predicted
	// from is one too.
	if items := checkCatalog(t, filepath.Join(out, stage.CollectionFile)); len(items) != 1 || filepath.Base(items[0]) != stage.ItemFile {
		t.Errorf("prediction items %v", items)
	}
	if items := checkCatalog(t, filepath.Join(stack, stage.CollectionFile)); len(items) != 1 || filepath.Base(items[0]) != stage.StackItemFile {
		t.Errorf("stack items %v", items)
	}
	if fi, err := os.Stat(filepath.Join(out, "31TEJ", stage.QuicklookFile)); err != nil || fi.Size() < 1000 {
		t.Errorf("quicklook: %v", err)
	}

	// Evaluate against the stack's labels: the forest was trained on them.
	ev, err := evaluate.Evaluate(context.Background(), filepath.Join(out, "31TEJ", stage.ClassFile), filepath.Join(stack, "31TEJ", "labels.tif"), evaluate.DefaultConfig(), stage.Options{Out: filepath.Join(t.TempDir(), "ev")})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Metrics.Accuracy < 0.8 || ev.Pixels < n/2 {
		t.Errorf("evaluate: OA %.3f over %d pixels", ev.Metrics.Accuracy, ev.Pixels)
	}
}

func TestPredictOverviewsAndResume(t *testing.T) {
	scfg := synthConfig(t)
	scfg.Size, scfg.Bands60m = 1200, false
	scfg.Dates = scfg.Dates[:2]
	scene := makeScene(t, "mid", scfg)
	icfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	icfg.Area.BBox = []float64{2.9, 45.0, 3.2, 45.2}
	_, stack := mustIngest(t, icfg)
	pc := predict.Config{Model: demoModel(t), Input: stack, Window: 512}
	_, want := mustPredict(t, pc)
	ci, _ := raster.Inspect(filepath.Join(want, "31TEJ", stage.ClassFile))
	if ci.Overviews < 1 || ci.Layout != "COG" {
		t.Errorf("class COG of %d×%d: %d overviews, layout %q", ci.Width, ci.Height, ci.Overviews, ci.Layout)
	}

	// Interrupt, then resume: the same bytes.
	out := filepath.Join(t.TempDir(), "pred")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := predict.Predict(ctx, pc, stage.Options{Out: out, Charts: drawer, NewBar: func(int64, string) progress.Bar {
		return hookBar{func() {
			if n++; n == 2 {
				cancel()
			}
		}}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("interrupted prediction left its output")
	}
	pc.Resume = true
	if _, err := predict.Predict(context.Background(), pc, stage.Options{Out: out, Charts: drawer}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{stage.ClassFile, stage.ItemFile, stage.QuicklookFile, filepath.Join("..", stage.CollectionFile)} {
		a, _ := os.ReadFile(filepath.Join(want, "31TEJ", f))
		b, _ := os.ReadFile(filepath.Join(out, "31TEJ", f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs after resume", f)
		}
	}
}

func TestPredictBadInput(t *testing.T) {
	stack, modelPath := demoStack(t), demoModel(t)
	dir := t.TempDir()
	body, _ := os.ReadFile(modelPath)
	corrupt := filepath.Join(dir, "corrupt.lulcrf")
	os.WriteFile(corrupt, body[:len(body)-100], 0o644)

	// A model expecting other bands: decode, change, re-encode.
	m, _ := forest.Decode(body)
	m.Bands = append([]string{"B01"}, m.Bands[1:]...)
	other, _ := m.Encode()
	otherPath := filepath.Join(dir, "other.lulcrf")
	os.WriteFile(otherPath, other, 0o644)

	// A stack whose manifest names an unusable CRS.
	badCRS := filepath.Join(dir, "badcrs")
	os.CopyFS(badCRS, os.DirFS(stack))
	mf := filepath.Join(badCRS, "31TEJ", "manifest.json")
	mb, _ := os.ReadFile(mf)
	os.WriteFile(mf, bytes.Replace(mb, []byte(`"epsg": 32631`), []byte(`"epsg": 999999`), 1), 0o644)

	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		name      string
		pc        predict.Config
		out, want string
	}{
		{"corrupt model", predict.Config{Model: corrupt, Input: stack}, "", "corrupt or truncated"},
		{"bands differ", predict.Config{Model: otherPath, Input: stack}, "", "bands: model [B01, B03"},
		{"unusable CRS", predict.Config{Model: modelPath, Input: badCRS}, "", "EPSG:999999"},
		{"not a stack", predict.Config{Model: modelPath, Input: dir}, "", "no tile manifests"},
		{"unwritable output", predict.Config{Model: modelPath, Input: stack}, filepath.Join(file, "out"), "not writable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "pred")
			}
			_, err := predict.Predict(context.Background(), c.pc, stage.Options{Out: out})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(out, "31TEJ", stage.ClassFile)); err == nil {
				t.Error("failed prediction left a class map")
			}
		})
	}
}

// TestPredictRealTerraMind trains on one real TerraMind patch and predicts
// the other, then evaluates against its labels.
func TestPredictRealTerraMind(t *testing.T) {
	root := "../../shared/data/terramind-s2-lulc"
	if _, err := os.Stat(root); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	cfg := trainConfig(t, "train-real.yaml", "")
	for i := range cfg.Input.Rasters {
		cfg.Input.Rasters[i].Image = "../" + cfg.Input.Rasters[i].Image
		cfg.Input.Rasters[i].Labels = "../" + cfg.Input.Rasters[i].Labels
	}
	_, run := mustTrain(t, cfg)
	// Turn each patch into a one-tile "stack" on the model's scaling.
	stack := t.TempDir()
	for _, r := range cfg.Input.Rasters {
		name := strings.TrimSuffix(filepath.Base(r.Image), ".tif")
		info, err := raster.Inspect(r.Image)
		if err != nil {
			t.Fatal(err)
		}
		tile := filepath.Join(stack, name)
		os.MkdirAll(tile, 0o755)
		var bands []raster.BandInfo
		for range cfg.Input.Bands {
			bands = append(bands, raster.BandInfo{Scale: 0.0001})
		}
		w, err := raster.NewWriter(filepath.Join(tile, "stack.tif"), info.Grid, "uint16", bands, raster.COGOptions{NoData: stage.Ptr(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		src, err := raster.Open(r.Image)
		if err != nil {
			t.Fatal(err)
		}
		for b := range cfg.Input.Bands {
			v := make([]float32, info.Width*info.Height)
			if err := raster.ReadBandWindowInto(src, b+1, 0, 0, info.Width, info.Height, v); err != nil {
				t.Fatal(err)
			}
			dn := make([]uint16, len(v))
			for i, x := range v {
				dn[i] = uint16(max(1, x))
			}
			w.Write(b, 0, 0, info.Width, info.Height, dn)
		}
		src.Close()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		m := stage.Manifest{Tile: name, Bands: cfg.Input.Bands, Scale: 0.0001, Offset: 0,
			Grid: stage.ManifestGrid{EPSG: info.EPSG, Transform: info.Transform, Width: info.Width, Height: info.Height}}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(tile, "manifest.json"), b, 0o644)
	}
	res, out := mustPredict(t, predict.Config{Model: filepath.Join(run, stage.ModelFile), Input: stack})
	for i, tile := range res.Tiles {
		ev, err := evaluate.Evaluate(context.Background(), filepath.Join(out, tile.Tile, stage.ClassFile), cfg.Input.Rasters[i].Labels, evaluate.Config{Resampling: "nearest", SamplePerClass: 1000, Seed: 1}, stage.Options{Out: filepath.Join(t.TempDir(), "ev")})
		if err != nil {
			t.Fatal(err)
		}
		// These pixels include the training samples: a consistency check
		// of predict + evaluate on real data, not a held-out score.
		if ev.Metrics.Accuracy < 0.6 {
			t.Errorf("%s: OA %.3f", tile.Tile, ev.Metrics.Accuracy)
		}
		t.Logf("%s: OA %.3f kappa %.3f over %d pixels", tile.Tile, ev.Metrics.Accuracy, ev.Metrics.Kappa, ev.Pixels)
	}
}
