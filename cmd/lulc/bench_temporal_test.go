package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTemporalRealCommand runs lulc bench temporal-real on the
// Slovenian patch (lulc's forest, one seed) and checks its report and
// summary, then the usage errors.
func TestBenchTemporalRealCommand(t *testing.T) {
	dir := "../../../shared/data/eolearn-slovenia-testpatch"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "temporal")
	code, stdout, stderr := lulc(t, "bench", "temporal-real", "--data", dir, "--out", out, "--engines", "lulc", "--seeds", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Forest struct {
			Trees int `json:"trees"`
		} `json:"forest"`
		Folds []struct {
			Seed uint64 `json:"seed"`
		} `json:"folds"`
		Sets []struct {
			Name string `json:"name"`
		} `json:"feature_sets"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	// train-real.yaml's forest; the seed given.
	if rep.Forest.Trees != 100 || len(rep.Folds) != 1 || rep.Folds[0].Seed != 5 || len(rep.Sets) != 5 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stdout, "rasterisation: 0 of 10100 pixels differ") || !strings.Contains(stdout, "percentiles+seasons        lulc") {
		t.Errorf("stdout: %s", stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out + "2"}, "--data"},
		{[]string{"--data", dir}, "--out"},
		{[]string{"--data", dir, "--out", out + "2", "--seeds", "1,x"}, "--seeds"},
		{[]string{"--data", dir, "--out", out + "2", "--engines", "lulc,golearn"}, "engines"},
		{[]string{"--data", dir, "--out", out + "2", "--folds", "1"}, "folds"},
	} {
		code, _, stderr := lulc(t, append([]string{"bench", "temporal-real"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
	if code, _, stderr := lulc(t, "bench", "temporal-real", "--data", t.TempDir(), "--out", out+"3", "--engines", "lulc"); code == 0 || !strings.Contains(stderr, "timestamps.json") {
		t.Errorf("an empty folder: exit %d, %s", code, stderr)
	}
}
