package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportCommands exports a trained model as ONNX and its samples as
// .npz through the command line, into folders that do not exist yet, and
// checks the usage errors: missing flags, an output that is the input, a
// file that is not a samples file.
func TestExportCommands(t *testing.T) {
	dir := t.TempDir()
	_, model := demoRun(t, dir)
	run := filepath.Dir(model)
	onnx := filepath.Join(dir, "onnx", "new", "model.onnx")
	code, stdout, stderr := lulc(t, "export", "model", "--model", model, "--out", onnx)
	if code != 0 || !strings.Contains(stdout, "trees over 56 features") {
		t.Fatalf("export model: exit %d: %s%s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(onnx); err != nil || !strings.Contains(string(b), "TreeEnsembleClassifier") || !strings.Contains(string(b), "ai.onnx.ml") {
		t.Errorf("model.onnx: %v", err)
	}
	npz := filepath.Join(dir, "npz", "samples.npz")
	code, _, stderr = lulc(t, "export", "samples", "-q", "--samples", filepath.Join(run, "samples.lulcs"), "--model", model, "--out", npz)
	if code != 0 {
		t.Fatalf("export samples: exit %d: %s", code, stderr)
	}
	z, err := zip.OpenReader(npz)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	z.Close()
	if got := strings.Join(names, " "); !strings.Contains(got, "features.npy") || !strings.Contains(got, "lulc_probability.npy") {
		t.Errorf("samples.npz holds %s", got)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", "model", "--out", onnx}, exitUsage, "--model and --out"},
		{[]string{"export", "model", "--model", model, "--out", model}, 1, "input"},
		{[]string{"export", "samples", "--samples", model, "--out", filepath.Join(dir, "x.npz")}, 1, "samples file"},
	} {
		code, _, stderr := lulc(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %d with %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
