package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/stage/config"
)

// TestConfigCommand checks lulc config: list names every embedded config
// with its first line, show prints one byte for byte (with or without
// .yaml), and an unknown name, or a name given without show, is a usage
// error that says where the names are.
func TestConfigCommand(t *testing.T) {
	code, out, _ := lulc(t, "config", "list")
	if code != 0 || !strings.Contains(out, "run-demo.yaml") || !strings.Contains(out, configs.Summary("run-demo.yaml")) {
		t.Errorf("config list: exit %d, %q", code, out)
	}
	if n := strings.Count(out, "\n"); n != len(configs.Names()) {
		t.Errorf("config list: %d lines for %d configs", n, len(configs.Names()))
	}
	want, _ := configs.Read("run-demo.yaml")
	for _, name := range []string{"run-demo.yaml", "run-demo"} {
		if code, out, _ := lulc(t, "config", "show", name); code != 0 || out != string(want) {
			t.Errorf("config show %s: exit %d, %d bytes, want %d", name, code, len(out), len(want))
		}
	}
	if code, _, errs := lulc(t, "config", "show", "nope"); code != 2 || !strings.Contains(errs, "config list") {
		t.Errorf("config show nope: exit %d, %q", code, errs)
	}
	// A config's name where the subcommand goes is a usage error naming
	// it and the command meant, not the help with exit 0.
	if code, _, errs := lulc(t, "config", "train-real.yaml"); code != exitUsage || !strings.Contains(errs, `unknown subcommand "train-real.yaml"`) || !strings.Contains(errs, "lulc config show train-real.yaml") {
		t.Errorf("config train-real.yaml: exit %d, %q", code, errs)
	}
	if code, out, _ := lulc(t, "config"); code != 0 || !strings.Contains(out, "show") {
		t.Errorf("config alone: exit %d, %q", code, out)
	}
}

// TestConfigShowDefaults checks lulc config show --defaults: an empty
// train config prints the defaults, which read back as the same config;
// an embedded config prints as lulc reads it, with the same hash; a
// one-line train config and a run config that names only its ingest
// config are whole configs; something that is no config is a usage
// error.
func TestConfigShowDefaults(t *testing.T) {
	code, out, errs := lulc(t, "config", "show", "--defaults", "train")
	if code != 0 {
		t.Fatalf("show --defaults train: exit %d: %s", code, errs)
	}
	back, err := config.ParseTrainConfig([]byte(out))
	if err != nil || back.Hash() != config.DefaultTrainConfig().Hash() {
		t.Errorf("the printed defaults read back as another config (%v):\n%s", err, out)
	}
	for _, w := range []string{"scheme: auto", "trees: 100", "max_per_class: 2000", "block_size: 32", "bootstrap: true", "- range(ndbi,15)"} {
		if !strings.Contains(out, w) {
			t.Errorf("defaults lack %q", w)
		}
	}
	raw, _ := configs.Read("train-real-sample.yaml")
	orig, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errs = lulc(t, "config", "show", "--defaults", "train-real-sample.yaml"); code != 0 {
		t.Fatalf("show --defaults train-real-sample.yaml: exit %d: %s", code, errs)
	}
	if back, err := config.ParseTrainConfig([]byte(out)); err != nil || back.Hash() != orig.Hash() {
		t.Errorf("train-real-sample.yaml as printed reads back as another config: %v", err)
	}

	dir := t.TempDir()
	one := filepath.Join(dir, "one.yaml")
	os.WriteFile(one, []byte("features: per-pixel\n"), 0o644)
	if code, out, errs = lulc(t, "config", "show", "--defaults", one); code != 0 || strings.Count(out, "\n    - ") != 0 && !strings.Contains(out, "- ndre1") || strings.Contains(out, "mean(") {
		t.Errorf("one-line train config: exit %d, %s\n%s", code, errs, out)
	}
	run := filepath.Join(dir, "run.yaml")
	os.WriteFile(run, []byte("ingest: ingest-tiny.yaml\n"), 0o644)
	if code, out, errs = lulc(t, "config", "show", "--defaults", run); code != 0 || !strings.Contains(out, "window: 1024") || !strings.Contains(out, "memory_gb: 4") {
		t.Errorf("run config: exit %d, %s\n%s", code, errs, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("colour: blue\n"), 0o644)
	if code, _, errs = lulc(t, "config", "show", "--defaults", bad); code != 2 || !strings.Contains(errs, "not an ingest (source:), run (ingest:) or train") {
		t.Errorf("no config: exit %d, %s", code, errs)
	}
}
