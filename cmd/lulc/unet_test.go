package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// python is the interpreter the U-Net runs with: Debian's, whose
// python3-torch CI installs.
const python = "/usr/bin/python3"

// TestUNetRoute takes the demo stack through the deep-learning route and
// back: lulc export chips with a train config, a few steps of the U-Net
// in unet/ on the CPU, its map imported as a class COG, and both that map
// and the forest's scored by lulc evaluate --split on the same validation
// pixels of the forest's split.
func TestUNetRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a U-Net")
	}
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s has no torch and numpy (Debian: apt-get install python3-torch python3-numpy): %v", python, err)
	}
	w := hostileWorld(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "train.yaml")
	os.WriteFile(cfg, []byte("features: per-pixel\nsampling: {block_size: 32, seed: 7}\n"), 0o644)
	chips, forest := filepath.Join(dir, "chips"), filepath.Join(dir, "forest")
	for _, args := range [][]string{
		{"train", "-q", "-c", cfg, "--stack", w.stack, "--out", forest},
		{"export", "chips", "-q", "-c", cfg, "--stack", w.stack, "--size", "64", "--stride", "48", "--out", chips},
		{"predict", "-q", "--model", filepath.Join(forest, "model.lulcrf"), "--input", w.stack, "--out", filepath.Join(dir, "forest-map")},
	} {
		if code, _, stderr := lulc(t, args...); code != 0 {
			t.Fatalf("lulc %v: exit %d: %s", args, code, stderr)
		}
	}
	for _, args := range [][]string{
		{"unet/train.py", "--chips", chips, "--out", filepath.Join(dir, "unet"), "--max-steps", "12", "--base", "8", "--batch", "4", "--device", "cpu", "--seed", "7"},
		{"unet/predict.py", "--model", filepath.Join(dir, "unet"), "--chips", chips, "--tile", "31TEJ", "--out", filepath.Join(dir, "pred", "31TEJ.npy"), "--window", "64", "--overlap", "16", "--device", "cpu"},
	} {
		cmd := exec.Command(python, args...)
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", python, args, err, out)
		}
	}
	unetMap := filepath.Join(dir, "unet-map", "31TEJ", "class.tif")
	if code, _, stderr := lulc(t, "import", "classes", "--chips", chips, "--tile", "31TEJ", "--array", filepath.Join(dir, "pred", "31TEJ.npy"), "--out", unetMap); code != 0 {
		t.Fatalf("import classes: exit %d: %s", code, stderr)
	}
	pixels := map[string]float64{}
	for name, m := range map[string]string{"forest": filepath.Join(dir, "forest-map", "31TEJ", "class.tif"), "unet": unetMap} {
		out := filepath.Join(dir, "ev-"+name)
		code, _, stderr := lulc(t, "evaluate", "-q", "--prediction", m, "--labels", filepath.Join(w.stack, "31TEJ", "labels.tif"),
			"--split", filepath.Join(chips, "tiles", "31TEJ_split.npy"), "--sample-per-class", "0", "--out", out)
		if code != 0 {
			t.Fatalf("evaluate %s: exit %d: %s", name, code, stderr)
		}
		var metrics struct {
			Support []float64 `json:"support"`
		}
		body, _ := os.ReadFile(filepath.Join(out, "metrics.json"))
		if err := json.Unmarshal(body, &metrics); err != nil {
			t.Fatal(err)
		}
		for _, s := range metrics.Support {
			pixels[name] += s
		}
	}
	if pixels["forest"] == 0 || pixels["forest"] != pixels["unet"] {
		t.Errorf("the two maps were scored on %v validation pixels: not the same pixels", pixels)
	}
	// A model that does not match the chips is refused by name.
	other := filepath.Join(dir, "other")
	os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("features: [B02, B03, B04, B08]\nsampling: {block_size: 32, seed: 7}\n"), 0o644)
	if code, _, stderr := lulc(t, "export", "chips", "-q", "-c", filepath.Join(dir, "other.yaml"), "--stack", w.stack, "--size", "64", "--stride", "48", "--out", other); code != 0 {
		t.Fatalf("export chips: %s", stderr)
	}
	cmd := exec.Command(python, "unet/predict.py", "--model", filepath.Join(dir, "unet"), "--chips", other, "--tile", "31TEJ", "--out", filepath.Join(dir, "x.npy"), "--device", "cpu")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "planes") {
		t.Errorf("a model of other planes: %v\n%s", err, out)
	}
}

// TestExportChipsDefaultStride checks that chips overlap by a quarter of
// their side when --stride is not given, and that a stride beyond the
// size is a usage error naming both.
func TestExportChipsDefaultStride(t *testing.T) {
	w := hostileWorld(t)
	out := filepath.Join(t.TempDir(), "chips")
	if code, _, stderr := lulc(t, "export", "chips", "-q", "--stack", w.stack, "--size", "64", "--out", out); code != 0 {
		t.Fatalf("export chips --size 64: exit %d: %s", code, stderr)
	}
	var idx struct{ Size, Stride int }
	body, _ := os.ReadFile(filepath.Join(out, "chips.json"))
	if err := json.Unmarshal(body, &idx); err != nil || idx.Size != 64 || idx.Stride != 48 {
		t.Errorf("size %d stride %d (%v), want 64 and 48", idx.Size, idx.Stride, err)
	}
	if code, _, stderr := lulc(t, "export", "chips", "--stack", w.stack, "--size", "64", "--stride", "65", "--out", out+"2"); code != 2 || !strings.Contains(stderr, "--stride 65") {
		t.Errorf("stride 65: exit %d: %s", code, stderr)
	}
}
