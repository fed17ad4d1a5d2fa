package pipeline

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/predict"
)

// contextFeatures are the demo's features with neighbourhood statistics.
var contextFeatures = []string{"B02", "B03", "B04", "B08", "B11", "ndvi", "ndwi",
	"mean(B08,15)", "std(ndvi,7)", "range(B11,7)", "mean(ndwi,7)", "std(B04,15)"}

// TestRunContextFeatures runs the demo job with context features: the
// run's model, drawn from the tile in memory, equals lulc train's, drawn
// strip by strip from the stack's files, and lulc predict, reading the
// stack's windows with their halo, gives the run's map.
func TestRunContextFeatures(t *testing.T) {
	job := demoJob(t)
	job.Train.Features = contextFeatures
	out := filepath.Join(t.TempDir(), "run")
	res := runJob(t, job, out, stage.Options{})
	if res.Train == nil {
		t.Fatal("the run trained no model")
	}
	stack := demoStack(t)
	tc := trainConfig(t, "train-demo.yaml", stack)
	tc.Features = contextFeatures
	trained, trainDir := mustTrain(t, tc)
	a, _, err := predict.LoadModel(filepath.Join(out, "model", stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := predict.LoadModel(filepath.Join(trainDir, stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Features, contextFeatures) {
		t.Errorf("model features %v", a.Features)
	}
	if !reflect.DeepEqual(a.Forest, b.Forest) || !reflect.DeepEqual(a.Bins, b.Bins) {
		t.Error("the run's forest differs from lulc train's on the same stack")
	}
	if !reflect.DeepEqual(res.Train.Metrics.Confusion, trained.Metrics.Confusion) {
		t.Errorf("validation confusion %v, train's %v", res.Train.Metrics.Confusion, trained.Metrics.Confusion)
	}
	_, pred := mustPredict(t, predict.Config{Model: filepath.Join(out, "model", stage.ModelFile), Input: stack, Confidence: true})
	for _, f := range []string{stage.ClassFile, stage.ConfidenceFile} {
		sameFile(t, filepath.Join(out, "31TEJ", f), filepath.Join(pred, "31TEJ", f))
	}
}

// TestContextFeaturesInFlowLists checks that a YAML flow list of features
// with arguments reads as the user wrote it.
func TestContextFeaturesInFlowLists(t *testing.T) {
	raw, err := configs.Read("train-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw = regexp.MustCompile(`(?s)features: \[.*?\]`).ReplaceAll(raw, []byte("features: [B04, mean(B08, 15), std(nd(B08, B11), 7), ndvi]"))
	c, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"B04", "mean(B08,15)", "std(nd(B08,B11),7)", "ndvi"}
	if !reflect.DeepEqual([]string(c.Features), want) {
		t.Errorf("features %q, want %q", c.Features, want)
	}
}

// TestContextBufferDefault checks that a train config without
// sampling.buffer buffers its split by its features' largest context
// radius, and that an explicit buffer, 0 included, stands.
func TestContextBufferDefault(t *testing.T) {
	raw, err := configs.Read("train-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sampling.Buffer != 7 {
		t.Errorf("the demo's buffer is %d, want its largest radius 7", c.Sampling.Buffer)
	}
	for _, buf := range []int{0, 3} {
		set := regexp.MustCompile(`(?m)^sampling:\n`).ReplaceAll(raw, fmt.Appendf(nil, "sampling:\n  buffer: %d\n", buf))
		c, err := config.ParseTrainConfig(set)
		if err != nil {
			t.Fatal(err)
		}
		if c.Sampling.Buffer != buf {
			t.Errorf("buffer: %d read as %d", buf, c.Sampling.Buffer)
		}
	}
	small := regexp.MustCompile(`block_size: \d+`).ReplaceAll(raw, []byte("block_size: 6"))
	if _, err := config.ParseTrainConfig(small); err == nil || !strings.Contains(err.Error(), "too small for the context features") {
		t.Errorf("blocks of 6 with a default buffer of 7: %v", err)
	}
	pixel := regexp.MustCompile(`(?s)features: \[.*?\]`).ReplaceAll(raw, []byte("features: [B04, ndvi]"))
	if c, err := config.ParseTrainConfig(pixel); err != nil || c.Sampling.Buffer != 0 {
		t.Errorf("per-pixel features: buffer %d, %v", c.Sampling.Buffer, err)
	}
}

// TestDefaultFeatureSet checks that the named set default is the
// 56-feature list the embedded configs write out.
func TestDefaultFeatureSet(t *testing.T) {
	for _, name := range []string{"train-demo.yaml", "train-real.yaml"} {
		raw, _ := configs.Read(name)
		c, err := config.ParseTrainConfig(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d := config.DefaultTrainConfig(); !reflect.DeepEqual(c.Features, d.Features) || len(d.Features) != 56 {
			t.Errorf("%s's features differ from the default set (%d features)", name, len(d.Features))
		}
	}
}
