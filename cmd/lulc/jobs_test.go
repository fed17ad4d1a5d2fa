package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/stage"
)

// TestJobTaskKilledAndTampered kills a map task after its first tile,
// reruns it, and expects collect's report to keep every tile's metrics,
// area of applicability and device. It then edits a tile's metrics.json
// (overall accuracy 0.9999): collect refuses it, naming the task and the
// file, and a rerun of the task maps it again to the original bytes.
func TestJobTaskKilledAndTampered(t *testing.T) {
	catalog, runCfg := twoTiles(t)
	dir := t.TempDir()
	base := []string{"run", "-q", "-c", runCfg, "--catalog", catalog, "--device", "cpu"}
	must(t, append(base, "--out", filepath.Join(dir, "full"))...)
	model := filepath.Join(dir, "full", "model", "model.lulcrf")
	job := filepath.Join(dir, "job")
	task := filepath.Join(job, "shards", "0-of-1")
	args := append(base, "--model", model, "--shard", "0/1", "--out", job)

	// Killed once the first tile is recorded, before the second is.
	staged := filepath.Join(job, "shards", ".0-of-1.partial")
	killWhen(t, filepath.Join(staged, "31TEJ", pipeline.TileRecordFile), 0, args...)
	if fileExists(task) || fileExists(filepath.Join(staged, "31TFJ", pipeline.TileRecordFile)) {
		t.Fatal("the task finished before it was killed: nothing to resume")
	}
	must(t, args...)
	must(t, "collect", "-q", "--out", job)
	var rep struct {
		Tiles []pipeline.CollectTile `json:"tiles"`
	}
	body, err := os.ReadFile(filepath.Join(job, stage.CollectDir, "report.json"))
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	if err != nil || len(rep.Tiles) != 2 {
		t.Fatalf("collect's report: %v, %d tiles", err, len(rep.Tiles))
	}
	for _, tl := range rep.Tiles {
		if tl.Metrics == nil || tl.AOAOutside == nil || tl.Device != "cpu" {
			t.Errorf("tile %s lost what its task knew: metrics %v, outside AOA %v, device %q", tl.Tile, tl.Metrics, tl.AOAOutside, tl.Device)
		}
	}
	md, _ := os.ReadFile(filepath.Join(job, stage.CollectDir, "report.md"))
	if strings.Contains(string(md), "–") {
		t.Errorf("report.md leaves a tile's accuracy or AOA out:\n%s", md)
	}

	// An edited metrics.json is refused by collect and mapped again by
	// the task's rerun.
	metrics := filepath.Join(task, "31TEJ", stage.RunMetricsFile)
	orig, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(orig, &m)
	m["overall_accuracy"] = 0.9999
	edited, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(metrics, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := lulc(t, "collect", "-q", "--out", job)
	if code != exitFailure || !strings.Contains(stderr, "task 0 of 1") || !strings.Contains(stderr, "31TEJ/metrics.json") {
		t.Errorf("collect over an edited metrics.json: exit %d, %q", code, stderr)
	}
	// The rerun says which file made it map the task again.
	loud := append([]string{"run"}, args[2:]...)
	if code, _, stderr := lulc(t, loud...); code != 0 || !strings.Contains(stderr, "31TEJ/metrics.json") {
		t.Errorf("rerun over an edited metrics.json: exit %d, does not name the file: %q", code, stderr)
	}
	if again, _ := os.ReadFile(metrics); string(again) != string(orig) {
		t.Errorf("the rerun kept the edited metrics.json:\n%s", again)
	}
	must(t, "collect", "-q", "--out", job)
}
