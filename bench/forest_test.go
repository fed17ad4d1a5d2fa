package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// fakePython stands in for python3 + scikit-learn: it checks the .npy
// files it is handed and answers as sklearn_rf.py does.
const fakePython = `#!/bin/sh
# $1 script, $2 train_x, $3 train_y, $4 val_x, $5 val_y, $6 trees ...
for f in "$2" "$3" "$4" "$5"; do
	head -c 6 "$f" | grep -q NUMPY || { echo "not npy: $f" >&2; exit 3; }
done
[ "$6" = "$FAKE_TREES" ] || { echo "trees $6" >&2; exit 4; }
echo '{"fit_seconds": 1.5, "accuracy": 0.75, "nodes": 42}'
`

// demoStack ingests the tiny synthetic scene, as the demo does, into a
// directory of the test's.
func demoStack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	scene := filepath.Join(dir, "scene")
	if _, err := synth.Run(context.Background(), scfg, synth.Options{Out: scene}); err != nil {
		t.Fatal(err)
	}
	if raw, err = configs.Read("ingest-tiny.yaml"); err != nil {
		t.Fatal(err)
	}
	icfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	icfg.Source.Catalog = filepath.Join(scene, "catalog.json")
	stack := filepath.Join(dir, "stack")
	if _, err := ingest.Ingest(context.Background(), icfg, stage.Options{Out: stack}); err != nil {
		t.Fatal(err)
	}
	return stack
}

func TestForest(t *testing.T) {
	stack := demoStack(t)
	raw, err := configs.Read("bench-forest-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bc, err := ParseForestConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(py, []byte(fakePython), 0o755); err != nil {
		t.Fatal(err)
	}
	bc.Sklearn.Python = py
	bc.Sizes = []int{1500, 4000}
	bc.Engines = []string{"cpu", "golearn", "sklearn", "gpu"}
	bc.GolearnMaxRows = 2000
	traw, err := configs.Find(bc.Train)
	if err != nil {
		t.Fatal(err)
	}
	tcfg, err := config.ParseTrainConfig(traw)
	if err != nil {
		t.Fatal(err)
	}
	tcfg.Input.Stack = stack
	tcfg.Forest.Trees = 8
	t.Setenv("FAKE_TREES", "8")
	out := filepath.Join(t.TempDir(), "fb")
	rep, err := Forest(context.Background(), bc, tcfg, "lulc bench forest", stage.Options{Out: out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.TrainPool+rep.Validation > rep.Pixels || rep.Validation == 0 || len(rep.Features) != 16 {
		t.Fatalf("pixels %d, training %d, validation %d, features %d", rep.Pixels, rep.TrainPool, rep.Validation, len(rep.Features))
	}
	byKey := map[string]ForestFit{}
	for _, f := range rep.Fits {
		byKey[f.Engine+"/"+itoa(f.Rows)] = f
	}
	if len(rep.Fits) != 8 {
		t.Fatalf("%d fits, want 2 sizes × 4 engines", len(rep.Fits))
	}
	for _, n := range []int{1500, 4000} {
		cpu := byKey["cpu/"+itoa(n)]
		if cpu.Skipped != "" || cpu.FitSec <= 0 || cpu.Accuracy < 0.6 || cpu.Nodes < 100 {
			t.Errorf("cpu at %d: %+v", n, cpu)
		}
		sk := byKey["sklearn/"+itoa(n)]
		if sk.Skipped != "" || sk.FitSec != 1.5 || sk.Accuracy != 0.75 {
			t.Errorf("sklearn at %d: %+v", n, sk)
		}
		if g := byKey["gpu/"+itoa(n)]; g.Skipped != "no usable GPU" {
			t.Errorf("gpu at %d without a device: %+v", n, g)
		}
	}
	if g := byKey["golearn/4000"]; !strings.Contains(g.Skipped, "golearn_max_rows") {
		t.Errorf("golearn above its cap ran: %+v", g)
	}
	if g := byKey["golearn/1500"]; g.Skipped != "" || g.Accuracy <= 0 {
		t.Errorf("golearn at 1500: %+v", g)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 4000 | sklearn | 1.50 |") {
		t.Errorf("report.md lacks the sklearn row:\n%s", md)
	}
	var back ForestReport
	body, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(body, &back); err != nil || len(back.Fits) != 8 {
		t.Fatalf("report.json: %v (%d fits)", err, len(back.Fits))
	}
	if _, err := os.Stat(filepath.Join(out, "npy")); !os.IsNotExist(err) {
		t.Error("the .npy files were left behind")
	}

	// A failing interpreter is reported, not fatal.
	bc.Sklearn.Python = filepath.Join(t.TempDir(), "no-python")
	bc.Engines = []string{"sklearn"}
	rep, err = Forest(context.Background(), bc, tcfg, "", stage.Options{Out: out, Force: true, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Fits[0].Skipped; !strings.Contains(s, "sklearn") {
		t.Errorf("missing interpreter: skipped %q", s)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseForestConfig(t *testing.T) {
	for bad, want := range map[string]string{
		"train: t\nsizes: [10]\nvalidation_fraction: 1.5\nvalidation_rows: 5\nengines: [cpu]\n": "validation_fraction",
		"train: t\nsizes: [10]\nvalidation_fraction: 0.5\nvalidation_rows: 5\nengines: [xgb]\n": "xgb",
		"train: t\nsizes: [1]\nvalidation_fraction: 0.5\nvalidation_rows: 5\nengines: [cpu]\n":  "sizes",
		"train: t\nsizes: [10]\nvalidation_fraction: 0.5\nvalidation_rows: 5\nengine: [cpu]\n":  "engine",
	} {
		if _, err := ParseForestConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %s", bad, err, want)
		}
	}
}
