package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOwnDataOneLine maps a user's own data with the shortest configs:
// a raster pair with text classes in a GeoPackage, and a run config of
// one line (no train config: the defaults train, with the scheme the
// text classes give).
func TestRunOwnDataOneLine(t *testing.T) {
	dir := t.TempDir()
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "-c", "synth-your-data.yaml", "--out", scene); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	data := filepath.Join(scene, "your-data")
	ingest := filepath.Join(dir, "ingest.yaml")
	os.WriteFile(ingest, []byte(`source:
  rasters:
    - {image: `+filepath.Join(data, "images", "31tej_west.tif")+`, labels: `+filepath.Join(data, "fields.gpkg")+`}
  bands: [B02, B03, B04, B05, B06, B07, B08, B8A, B11, B12, elevation]
  scale: 0.0001
  label_field: landcover
`), 0o644)
	run := filepath.Join(dir, "run.yaml")
	os.WriteFile(run, []byte("ingest: "+ingest+"\n"), 0o644)
	out := filepath.Join(dir, "job")
	code, stdout, stderr := lulc(t, "run", "-c", run, "--out", out)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "31tej_west") || strings.Contains(stderr, "better than the chosen") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	var metrics struct {
		Names []string `json:"class_names"`
	}
	body, _ := os.ReadFile(filepath.Join(out, "model", "metrics.json"))
	if err := json.Unmarshal(body, &metrics); err != nil {
		t.Fatal(err)
	}
	if strings.Join(metrics.Names, ",") != "crops,forest,grass,urban,water,wetland" {
		t.Errorf("the model's classes are %v, not the text classes'", metrics.Names)
	}
}
