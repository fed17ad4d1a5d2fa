package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notebook builds a notebook from cells given as JSON.
func notebook(t *testing.T, cells ...string) *Notebook {
	t.Helper()
	var nb Notebook
	if err := json.Unmarshal([]byte(`{"cells": [`+strings.Join(cells, ",")+`]}`), &nb); err != nil {
		t.Fatal(err)
	}
	return &nb
}

const (
	scene = `{"cell_type": "code", "id": "a", "execution_count": 1, "metadata": {}, "source": ["%%\n", "fmt.Println(1)"],
		"outputs": [{"output_type": "stream", "name": "stdout", "text": ["tile 31TEJ: 3 dates\n", "took 1.25 s, then 310ms\n"]},
		{"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}]}`
	// The same outputs in another order, split differently, other image
	// bytes and other durations.
	sceneAgain = `{"cell_type": "code", "id": "a", "execution_count": 1, "metadata": {}, "source": "%%\nfmt.Println(1)",
		"outputs": [{"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}},
		{"output_type": "stream", "name": "stdout", "text": "tile 31TEJ: 3 dates\ntook 0.9 s, "},
		{"output_type": "stream", "name": "stdout", "text": "then 2.5ms   \n"}]}`
	markdown = `{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# title"}`
)

func TestCompareIgnoresOrderImagesAndDurations(t *testing.T) {
	a, b := notebook(t, markdown, scene), notebook(t, markdown, sceneAgain)
	diffs, err := Compare(a, b, Options{})
	if err != nil || len(diffs) > 0 {
		t.Fatalf("diffs %q, err %v", diffs, err)
	}
	if got := Normalise(a.Cells[1], Options{}); got != "[stdout]\ntile 31TEJ: 3 dates\ntook (duration), then (duration)\n[image/png] × 1\n" {
		t.Errorf("normalised %q", got)
	}
}

func TestCompareFindsChangedText(t *testing.T) {
	changed := strings.Replace(sceneAgain, "3 dates", "4 dates", 1)
	diffs, err := Compare(notebook(t, scene), notebook(t, changed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 1 || !strings.Contains(diffs[0], "- tile 31TEJ: 3 dates\n+ tile 31TEJ: 4 dates") {
		t.Fatalf("diffs %q", diffs)
	}
	// A missing image is a difference too.
	noImage := strings.Replace(sceneAgain, `{"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}},`, "", 1)
	if diffs, _ := Compare(notebook(t, scene), notebook(t, noImage), Options{}); len(diffs) != 1 {
		t.Errorf("missing image: diffs %q", diffs)
	}
}

func TestTags(t *testing.T) {
	tagged := func(cell, tag string) string {
		return strings.Replace(cell, `"metadata": {}, "source"`, `"metadata": {"tags": ["`+tag+`"]}, "source"`, 1)
	}
	other := strings.Replace(sceneAgain, "tile 31TEJ: 3 dates", "tile 31TEJ: 4 dates on AMD EPYC", 1)
	for _, c := range []struct {
		tag    string
		opt    Options
		differ bool
	}{
		{"host", Options{}, false},
		{"mask-numbers", Options{}, true}, // "on AMD EPYC" is not a number
		{"shared-data", Options{SharedData: true}, true},
		{"shared-data", Options{SharedData: false}, false},
	} {
		diffs, err := Compare(notebook(t, tagged(scene, c.tag)), notebook(t, tagged(other, c.tag)), c.opt)
		if err != nil {
			t.Fatal(err)
		}
		if (len(diffs) > 0) != c.differ {
			t.Errorf("tag %s, %+v: diffs %q", c.tag, c.opt, diffs)
		}
	}
	numbers := strings.Replace(sceneAgain, "3 dates", "4 dates", 1)
	if diffs, _ := Compare(notebook(t, tagged(scene, "mask-numbers")), notebook(t, tagged(numbers, "mask-numbers")), Options{}); len(diffs) > 0 {
		t.Errorf("mask-numbers: diffs %q", diffs)
	}
	// A host cell still has to show its image.
	noImage := strings.Replace(sceneAgain, `{"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}},`, "", 1)
	if diffs, _ := Compare(notebook(t, tagged(scene, "host")), notebook(t, tagged(noImage, "host")), Options{}); len(diffs) != 1 {
		t.Errorf("host cell without its image: diffs %q", diffs)
	}
}

func TestRootIsMasked(t *testing.T) {
	a := notebook(t, strings.Replace(scene, "tile 31TEJ", "/home/ci/lulc/runs", 1))
	b := notebook(t, strings.Replace(scene, "tile 31TEJ", "/tmp/clone/runs", 1))
	if diffs, _ := Compare(a, b, Options{Root: "/tmp/clone"}); len(diffs) != 1 {
		t.Errorf("other root unmasked: diffs %q", diffs)
	}
	if diffs, _ := Compare(b, b, Options{Root: "/tmp/clone"}); len(diffs) != 0 {
		t.Errorf("diffs %q", diffs)
	}
	if got := Normalise(b.Cells[0], Options{Root: "/tmp/clone"}); !strings.Contains(got, "$LULC_ROOT/runs") {
		t.Errorf("normalised %q", got)
	}
}

func TestCompareRejectsOtherSources(t *testing.T) {
	other := strings.Replace(sceneAgain, "fmt.Println(1)", "fmt.Println(2)", 1)
	if _, err := Compare(notebook(t, scene), notebook(t, other), Options{}); err == nil {
		t.Error("no error for a changed source")
	}
	if _, err := Compare(notebook(t, scene), notebook(t, scene, markdown), Options{}); err == nil {
		t.Error("no error for a different cell count")
	}
}

func TestFailures(t *testing.T) {
	failed := `{"cell_type": "code", "id": "b", "execution_count": 2, "metadata": {}, "source": "must.M(err)",
		"outputs": [{"output_type": "error", "ename": "ERROR", "evalue": "exit status 2", "traceback": ["\u001b[31mpanic: boom\u001b[0m"]}]}`
	shell := `{"cell_type": "code", "id": "c", "execution_count": 3, "metadata": {}, "source": "!*./gonb-setup",
		"outputs": [{"output_type": "stream", "name": "stderr", "text": "gonb-setup: no network\nexit status 1\n"}]}`
	skipped := `{"cell_type": "code", "id": "d", "execution_count": null, "metadata": {}, "source": "%%", "outputs": []}`
	compile := `{"cell_type": "code", "id": "e", "execution_count": 4, "metadata": {}, "source": "%%\nfmt.Println(x)",
		"outputs": [{"output_type": "display_data", "metadata": {}, "data": {"text/html": ["<style>\n.gonb-err {\n}\n</style>\n",
			"<div><span>Cell[1]: Line 2</span> <span>./main.go:11:13: </span></span>undefined: x &amp; y</div>\n"]}},
		{"output_type": "error", "ename": "ERROR", "evalue": "failed to run go build: exit status 1", "traceback": []}]}`
	got := Failures(notebook(t, markdown, scene, failed, shell, skipped, compile))
	if len(got) != 4 {
		t.Fatalf("failures %q", got)
	}
	for i, want := range []string{"error: ERROR: exit status 2\npanic: boom", "stderr: gonb-setup: no network", "did not run",
		"Cell[1]: Line 2 ./main.go:11:13: undefined: x & y\nerror: ERROR: failed to run go build"} {
		if !strings.Contains(got[i], want) {
			t.Errorf("failure %d: %q lacks %q", i, got[i], want)
		}
	}
}

func TestDiff(t *testing.T) {
	if got := Diff("a\nb\nc\n", "a\nx\nc\n"); got != "  a\n- b\n+ x\n  c" {
		t.Errorf("diff %q", got)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, cells ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(`{"cells": [`+strings.Join(cells, ",")+`], "nbformat": 4}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	committed := write("committed.ipynb", markdown, scene)
	fresh := write("fresh.ipynb", markdown, sceneAgain)
	stale := write("stale.ipynb", markdown, strings.Replace(sceneAgain, "3 dates", "4 dates", 1))
	var out bytes.Buffer
	if err := run(&out, []string{fresh, committed}, Options{}); err != nil {
		t.Errorf("fresh run: %v\n%s", err, out.String())
	}
	out.Reset()
	err := run(&out, []string{stale, committed}, Options{})
	if !errors.Is(err, errStale) || !strings.Contains(out.String(), "+ tile 31TEJ: 4 dates") {
		t.Errorf("stale: %v\n%s", err, out.String())
	}
	if err := run(&out, []string{filepath.Join(dir, "missing.ipynb")}, Options{}); err == nil {
		t.Error("missing notebook: no error")
	}
}
