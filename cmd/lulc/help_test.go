package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// allCommands lists c and every command below it.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// TestHelpExamples: every command a user runs has an Examples section,
// and every example line names a command that exists with flags it
// takes, so the examples stay true as flags change.
func TestHelpExamples(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	seen := 0
	for _, c := range allCommands(root) {
		if !c.Runnable() || c.Hidden || c.Name() == "help" || strings.HasPrefix(c.CommandPath(), "lulc completion") || c == root {
			continue
		}
		if c.Example == "" {
			t.Errorf("%s has no examples", c.CommandPath())
			continue
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			args := strings.Fields(line)
			if len(args) == 0 || args[0] != "lulc" {
				t.Errorf("%s: example %q is not a lulc command line", c.CommandPath(), line)
				continue
			}
			seen++
			found, rest, err := root.Find(args[1:])
			// A group's example may run one of its subcommands.
			if err != nil || !strings.HasPrefix(found.CommandPath()+" ", c.CommandPath()+" ") {
				t.Errorf("%s: example %q runs %s (%v)", c.CommandPath(), line, found.CommandPath(), err)
				continue
			}
			if err := found.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d example lines checked", seen)
	}
}

// TestHelpEnvironment: lulc --help names the environment variables lulc
// reads: flags' twins, array jobs' indices, object storage's
// credentials, the comparison switches.
func TestHelpEnvironment(t *testing.T) {
	code, out, _ := lulc(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, v := range []string{"LULC_<FLAG>", "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ARRAY_INDEX",
		"LULC_SHARD_COUNT", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "LULC_DEVICE_DECODE", "LULC_PTX", "LULC_CPUPROFILE"} {
		if !strings.Contains(out, v) {
			t.Errorf("--help does not name %s", v)
		}
	}
}

// TestCompletesDeviceAndConfig: shells complete --device with its forms
// and --config with the embedded configs of the command's kind.
func TestCompletesDeviceAndConfig(t *testing.T) {
	_, out, _ := lulc(t, "__complete", "run", "--device", "")
	for _, v := range []string{"auto", "cpu", "gpu:all"} {
		if !strings.Contains(out, v+"\t") {
			t.Errorf("--device completes to\n%s\nwithout %s", out, v)
		}
	}
	_, out, _ = lulc(t, "__complete", "ingest", "--config", "")
	if !strings.Contains(out, "ingest-tiny.yaml") || strings.Contains(out, "train-demo.yaml") {
		t.Errorf("ingest --config completes to\n%s", out)
	}
	_, out, _ = lulc(t, "__complete", "bench", "--config", "")
	if !strings.Contains(out, "bench-demo.yaml") || strings.Contains(out, "bench-forest-demo.yaml") {
		t.Errorf("bench --config completes to\n%s", out)
	}
	_, out, _ = lulc(t, "__complete", "bench", "forest", "--config", "")
	if !strings.Contains(out, "bench-forest-demo.yaml") {
		t.Errorf("bench forest --config completes to\n%s", out)
	}
}

// TestValidateCommand: lulc validate passes a synthetic scene's catalog
// offline, fails (exit 1) on an item the schema refuses, naming it, and
// refuses (exit 2) a directory with no STAC document.
func TestValidateCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", dir); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	code, out, stderr := lulc(t, "validate", dir)
	if code != 0 || !strings.Contains(out, "valid: ") {
		t.Fatalf("validate: exit %d: %s%s", code, out, stderr)
	}
	items, _ := filepath.Glob(filepath.Join(dir, "sentinel-2-l2a", "*", "*.json"))
	if len(items) == 0 {
		t.Fatal("no items in the scene")
	}
	body, _ := os.ReadFile(items[0])
	bad := strings.Replace(string(body), `"datetime"`, `"no_datetime"`, 1)
	if err := os.WriteFile(items[0], []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = lulc(t, "validate", filepath.Join(dir, "catalog.json"))
	if code != 1 || !strings.Contains(stderr, filepath.Base(items[0])) {
		t.Errorf("a broken item: exit %d: %s", code, stderr)
	}
	if code, _, _ := lulc(t, "validate", t.TempDir()); code != 2 {
		t.Errorf("a directory without STAC: exit %d", code)
	}
}
