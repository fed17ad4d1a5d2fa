package main

import (
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
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
