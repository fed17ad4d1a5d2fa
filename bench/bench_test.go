package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/stage"
)

const terramindDir = "../../shared/data/terramind-s2-lulc"

func TestBenchReport(t *testing.T) {
	raw, _ := configs.Read("bench-demo.yaml")
	bc, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	bc.Engines = []string{"cpu", "golearn", "gpu"}
	out := filepath.Join(t.TempDir(), "bench")
	rep, err := Run(context.Background(), bc, "lulc bench --out x", stage.Options{Out: out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	body, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if back.Inputs.Pixels != 252*252 || back.Inputs.Tiles != 1 || back.Inputs.Dates != 3 || back.Inputs.Bands != 10 {
		t.Errorf("inputs %+v", back.Inputs)
	}
	for _, e := range back.Engines {
		if e.Skipped != "" {
			if e.Engine != "gpu" {
				t.Errorf("%s skipped: %s", e.Engine, e.Skipped)
			}
			continue
		}
		// The report's numbers come from the runs: stage medians add up to
		// the total (two repeats: medians are means), every run has every
		// stage, and pixel counts match the input.
		sum := 0.0
		for _, s := range Stages {
			sum += e.Stages[s]
		}
		if math.Abs(sum-e.Total) > 1e-9*max(1, e.Total) || len(e.Runs) != 2 || e.Total <= 0 {
			t.Errorf("%s: stages sum to %g, total %g, %d runs", e.Engine, sum, e.Total, len(e.Runs))
		}
		if e.Engine == "cpu" && (e.Pixels != 252*252 || e.Reproducible == nil || !*e.Reproducible || e.MapAccuracy < 0.7) {
			t.Errorf("cpu: %d pixels, reproducible %v %v, map OA %.3f", e.Pixels, e.Reproducible, e.Differences, e.MapAccuracy)
		}
		if e.Engine != "golearn" && (e.OnePass <= 0 || len(e.OnePassRuns) != 2 || e.OnePassStages["composite"] <= 0 || e.OnePassStages["stream"] <= 0) {
			t.Errorf("%s: one pass %g s over %d runs, stages %v", e.Engine, e.OnePass, len(e.OnePassRuns), e.OnePassStages)
		}
		if want := 1 / e.Total; math.Abs(e.TilesPerSec-want) > 1e-9*want {
			t.Errorf("%s: %g tiles/s for one tile in %g s", e.Engine, e.TilesPerSec, e.Total)
		}
		if e.Accuracy < 0.5 || e.CostPerTile <= 0 {
			t.Errorf("%s: accuracy %.3f, cost %g", e.Engine, e.Accuracy, e.CostPerTile)
		}
	}
	if rep.PeakRSS <= 0 || back.Host.Cores < 1 || back.Host.GDAL == "" {
		t.Errorf("host %+v, rss %d", back.Host, rep.PeakRSS)
	}
	page, _ := os.ReadFile(filepath.Join(out, "report.html"))
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	png, _ := os.Stat(filepath.Join(out, "stages.png"))
	if !strings.Contains(string(page), "<table>") || !strings.Contains(string(page), "data:image/png;base64,") || png == nil || png.Size() < 5000 {
		t.Errorf("report.html (%d bytes) or stages.png not rendered", len(page))
	}
	if !strings.Contains(string(md), "## How to reproduce") || !strings.Contains(string(md), "lulc bench --out x") {
		t.Error("report.md lacks the reproduce section")
	}

	// The reproducibility check catches a perturbed output.
	a, b := filepath.Join(out, "cpu", "run1"), filepath.Join(out, "cpu", "run2")
	if d := compareRuns(a, b); len(d) != 0 {
		t.Fatalf("clean runs differ: %v", d)
	}
	class := filepath.Join(b, "predict", "31TEJ", stage.ClassFile)
	data, _ := os.ReadFile(class)
	data[len(data)/2] ^= 0xff
	os.WriteFile(class, data, 0o644)
	if d := compareRuns(a, b); len(d) != 1 || !strings.Contains(d[0], stage.ClassFile) {
		t.Errorf("perturbed class map not detected: %v", d)
	}
}

func TestBenchConfigErrors(t *testing.T) {
	raw, _ := configs.Read("bench-demo.yaml")
	for _, c := range []struct{ old, new, want string }{
		{"engines: [cpu, golearn, gpu]", "engines: [cpu, tpu]", "tpu"},
		{"repeat: 2", "repeat: 0", "repeat"},
		{"synth: synth-tiny.yaml", "catalog: x\nsynth: synth-tiny.yaml", "exactly one"},
		{"ingest: ingest-tiny.yaml", "ingest: \"\"", "ingest and train"},
	} {
		_, err := ParseConfig([]byte(strings.Replace(string(raw), c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.new, err)
		}
	}
}

// TestReportRemoteInputs renders a report whose inputs have no digest (an
// API source: nothing local to checksum) without failing.
func TestReportRemoteInputs(t *testing.T) {
	md := reportMarkdown(&Report{ConfigHash: strings.Repeat("a", 64), Command: "lulc bench"})
	if !strings.Contains(md, "(none: remote inputs)") {
		t.Fatalf("report:\n%s", md)
	}
}

// TestBenchRealSample runs lulc bench with configs/bench-real-sample.yaml
// from the repository root, on the CPU engine once: the whole job on the
// real TerraMind patches.
func TestBenchRealSample(t *testing.T) {
	if _, err := os.Stat(terramindDir); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "bench")
	t.Chdir("..") // the config's paths are relative to the repository root
	raw, err := configs.Find("configs/bench-real-sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bc, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	bc.Engines, bc.Repeat = []string{"cpu"}, 1
	rep, err := Run(context.Background(), bc, "lulc bench -c configs/bench-real-sample.yaml --out x", stage.Options{Out: out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	in := rep.Inputs
	if in.Tiles != 2 || in.Pixels != 2*224*224 || in.Dates != 1 || in.Bands != 10 || in.Bytes != 2*(1206010+50792) || len(in.Digest) != 64 {
		t.Errorf("inputs %+v", in)
	}
	e := rep.Engines[0]
	if e.Pixels != 2*224*224 || e.Accuracy < 0.5 || e.MapAccuracy < 0.5 || e.Total <= 0 {
		t.Errorf("cpu: %d pixels, OA %.3f, map OA %.3f, %.2f s", e.Pixels, e.Accuracy, e.MapAccuracy, e.Total)
	}
	for _, f := range []string{"report.md", "report.html", "report.json", "stages.png"} {
		if !atomicfs.Exists(filepath.Join(out, f)) {
			t.Errorf("no %s", f)
		}
	}
	t.Logf("cpu: OA %.3f kappa %.3f, map OA %.3f, %.2f s", e.Accuracy, e.Kappa, e.MapAccuracy, e.Total)
}

// TestBenchRastersMissing: without the data, the bench stops before any
// run with an error naming the missing file.
func TestBenchRastersMissing(t *testing.T) {
	dir := t.TempDir()
	raw, _ := configs.Read("ingest-real-sample.yaml")
	ingestPath := filepath.Join(dir, "ingest.yaml")
	os.WriteFile(ingestPath, []byte(strings.ReplaceAll(string(raw), "../shared/data", filepath.Join(dir, "absent"))), 0o644)
	bc := Config{Ingest: ingestPath, Train: "train-real-sample.yaml", Engines: []string{"cpu"}, Repeat: 1}
	_, err := Run(context.Background(), bc, "lulc bench", stage.Options{Out: filepath.Join(dir, "bench")})
	if err == nil || !strings.Contains(err.Error(), "source.rasters[0].image") || !strings.Contains(err.Error(), "absent/terramind-s2-lulc/S2L2A/282D_485L_3_3.tif") {
		t.Fatalf("got %v", err)
	}
	bc.Catalog = "catalog.json"
	if _, err := Run(context.Background(), bc, "lulc bench", stage.Options{Out: filepath.Join(dir, "bench")}); err == nil || !strings.Contains(err.Error(), "neither synth nor catalog") {
		t.Fatalf("catalog with rasters: %v", err)
	}
	if atomicfs.Exists(filepath.Join(dir, "bench")) {
		t.Error("failed bench left its output")
	}
}
