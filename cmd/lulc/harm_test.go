package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
)

// treeHashes maps every file under root (relative path) to its SHA-256, and
// every directory to "dir", so that a deleted, replaced, changed or added
// entry shows as a difference.
func treeHashes(t *testing.T, root string) map[string]string {
	t.Helper()
	h := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			h[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h[rel] = "link " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			h[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// assertUnchanged fails on any file under root that differs from before.
func assertUnchanged(t *testing.T, root string, before map[string]string) {
	t.Helper()
	after := treeHashes(t, root)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed (before %.12s, after %.12s)", p, h, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// refused runs a command line that must fail with a message containing
// every string of want, leaving every file under root as it was.
func refused(t *testing.T, root string, want []string, args ...string) {
	t.Helper()
	before := treeHashes(t, root)
	code, _, stderr := lulc(t, args...)
	if code == 0 {
		t.Errorf("%v: exit 0, want a failure", args)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%v: message %q does not name %q", args, stderr, w)
		}
	}
	assertUnchanged(t, root, before)
}

// TestInputsAreNeverTouched runs every command with an --out that is, lies
// inside or contains one of its inputs, with --force: each is refused before
// any work, naming both paths, and no file changes.
func TestInputsAreNeverTouched(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	scene := filepath.Join(dir, "scene")
	catalog := filepath.Join(scene, "catalog.json")
	labels := filepath.Join(stack, "31TEJ", "labels.tif")
	cfgDir := filepath.Join(dir, "configs")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"synth-tiny.yaml", "train-demo.yaml", "bench-demo.yaml"} {
		raw, err := configs.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trainCfg := filepath.Join(cfgDir, "train-demo.yaml")
	link := filepath.Join(dir, "stack-link")
	if err := os.Symlink(stack, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want []string
		args []string
	}{
		{"predict into its stack", []string{"--out " + stack, "is the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", stack}},
		{"predict inside its stack", []string{"lies inside the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", filepath.Join(stack, "maps")}},
		{"predict over the directory holding its inputs", []string{"--out " + dir, "contains the input"},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", dir}},
		{"predict onto its model", []string{"is the input " + model},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", model}},
		{"predict through a link to its stack", []string{"--out " + link, "is the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", link}},
		{"predict from STAC into the scene", []string{"--out " + scene, "is the input " + scene},
			[]string{"predict", "-q", "--force", "--model", model, "--catalog", catalog, "--out", scene}},
		{"predict from STAC whose stack would land in the scene", []string{"lies inside the input " + scene},
			[]string{"predict", "-q", "--force", "--model", model, "--catalog", catalog, "--out", filepath.Join(scene, "maps")}},
		{"ingest into its catalog's directory", []string{"--out " + scene, "is the input " + scene},
			[]string{"ingest", "-q", "--force", "--catalog", catalog, "--out", scene}},
		{"ingest inside its catalog's directory", []string{"lies inside the input " + scene},
			[]string{"ingest", "-q", "--force", "--catalog", catalog, "--out", filepath.Join(scene, "stack")}},
		{"train into its stack", []string{"--out " + stack, "is the input " + stack},
			[]string{"train", "-q", "--force", "--stack", stack, "--out", stack}},
		{"train over its config's directory", []string{"--out " + cfgDir, "contains the input " + trainCfg},
			[]string{"train", "-q", "--force", "-c", trainCfg, "--stack", stack, "--out", cfgDir}},
		{"evaluate over its labels' directory", []string{"contains the input " + labels},
			[]string{"evaluate", "-q", "--force", "--prediction", labels, "--labels", labels, "--out", filepath.Dir(labels)}},
		{"synth over its config's directory", []string{"--out " + cfgDir, "contains the input"},
			[]string{"synth", "-q", "--force", "-c", filepath.Join(cfgDir, "synth-tiny.yaml"), "--out", cfgDir}},
		{"bench over its config's directory", []string{"--out " + cfgDir, "contains the input"},
			[]string{"bench", "-q", "--force", "-c", filepath.Join(cfgDir, "bench-demo.yaml"), "--out", cfgDir}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { refused(t, dir, c.want, c.args...) })
	}
}
