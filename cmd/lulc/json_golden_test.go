package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/npy"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/lulc/testdata/json/*.golden from the commands' output")

// jsonSchema lists a JSON document's paths with their types, one per
// line, sorted: objects' keys as .key, arrays' elements as [] (the union
// of every element's paths), types joined with | where elements differ.
// Values vary from run to run (timings, paths); the schema does not.
func jsonSchema(doc any) string {
	types := map[string]map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		kind := "null"
		switch x := v.(type) {
		case map[string]any:
			kind = "object"
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			kind = "array"
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			kind = "string"
		case float64:
			kind = "number"
		case bool:
			kind = "bool"
		}
		if types[path] == nil {
			types[path] = map[string]bool{}
		}
		types[path][kind] = true
	}
	walk("", doc)
	var lines []string
	for p, ks := range types {
		var kinds []string
		for k := range ks {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		if p == "" {
			p = "."
		}
		lines = append(lines, p+" "+strings.Join(kinds, "|"))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestJSONGolden runs every command that finishes on its own with --json
// (all but lulc view, which serves until stopped) on the demo scene and compares the schema of what it prints with its
// golden file (testdata/json/NAME.golden; go test -run TestJSONGolden
// -update rewrites them): one JSON document on stdout, keys in
// snake_case, durations in seconds (docs/json.md).
func TestJSONGolden(t *testing.T) {
	t.Setenv("LULC_JSON", "")
	dir := t.TempDir()
	p := func(elem ...string) string { return filepath.Join(append([]string{dir}, elem...)...) }
	// The class indices another model would give the demo tile (all the
	// first class), for lulc import classes.
	writePred := func() {
		_, g, err := raster.ReadBand[uint8](p("predict", "31TEJ", "class.tif"), 1)
		if err != nil {
			t.Fatal(err)
		}
		body := append(npy.Header("|u1", []int{g.Height, g.Width}), bytes.Repeat([]byte{1}, g.Width*g.Height)...)
		if err := os.WriteFile(p("pred.npy"), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		args   []string
		before func()
	}{
		{"version", []string{"version"}, nil},
		{"doctor", []string{"doctor"}, nil},
		{"config-list", []string{"config", "list"}, nil},
		{"config-show", []string{"config", "show", "run-demo.yaml"}, nil},
		{"synth", []string{"synth", "--out", p("scene")}, nil},
		{"ingest", []string{"ingest", "--catalog", p("scene", "catalog.json"), "--out", p("stack")}, nil},
		{"train", []string{"train", "--stack", p("stack"), "--out", p("train")}, nil},
		{"predict", []string{"predict", "--confidence", "--model", p("train", "model.lulcrf"), "--input", p("stack"), "--out", p("predict")}, nil},
		{"evaluate", []string{"evaluate", "--prediction", p("predict", "31TEJ", "class.tif"), "--labels", p("stack", "31TEJ", "labels.tif"), "--out", p("evaluate")}, nil},
		{"plan", []string{"plan", "-c", "run-demo.yaml", "--catalog", p("scene", "catalog.json"), "--out", p("plan.json")}, nil},
		{"run", []string{"run", "-c", "run-demo.yaml", "--catalog", p("scene", "catalog.json"), "--out", p("run")}, nil},
		{"validate", []string{"validate", p("run")}, nil},
		{"run-shard", []string{"run", "-c", "run-demo.yaml", "--catalog", p("scene", "catalog.json"), "--model", p("train", "model.lulcrf"), "--shard", "0/1", "--out", p("job")}, nil},
		{"collect", []string{"collect", "--out", p("job")}, nil},
		{"bench", []string{"bench", "--out", p("bench")}, nil},
		{"export-model", []string{"export", "model", "--model", p("train", "model.lulcrf"), "--out", p("model.onnx")}, nil},
		{"export-samples", []string{"export", "samples", "--samples", p("train", "samples.lulcs"), "--model", p("train", "model.lulcrf"), "--out", p("samples.npz")}, nil},
		{"export-chips", []string{"export", "chips", "-c", "train-demo.yaml", "--size", "128", "--stack", p("stack"), "--out", p("chips")}, nil},
		{"import-classes", []string{"import", "classes", "--chips", p("chips"), "--tile", "31TEJ", "--array", p("pred.npy"), "--out", p("imported.tif")}, writePred},
	}
	for _, c := range cases {
		if c.before != nil {
			c.before()
		}
		code, stdout, stderr := lulc(t, append(c.args, "--json", "-q")...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		var doc any
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(&doc); err != nil || dec.More() {
			t.Fatalf("%s: stdout is not one JSON document (%v):\n%s", c.name, err, stdout)
		}
		got := jsonSchema(doc)
		golden := filepath.Join("testdata", "json", c.name+".golden")
		if *updateGolden {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%s: %v (go test ./cmd/lulc -run TestJSONGolden -update writes it)", c.name, err)
		}
		if got != string(want) {
			t.Errorf("%s --json changed its schema (go test ./cmd/lulc -run TestJSONGolden -update, once the change is meant):\n%s", c.name, lineDiff(string(want), got))
		}
	}
}

// lineDiff lists the lines only one side has.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// TestJSONView: the one schema's rules on a value of each kind.
func TestJSONView(t *testing.T) {
	type inner struct {
		PeakRSS int64
		Tagged  string `json:"tagged_name,omitempty"`
	}
	type result struct {
		inner
		Dir        string
		ItemIDs    []string
		Elapsed    time.Duration
		FitSeconds time.Duration
		BLAKE3     string
		GPUMemory  int
		NoValid    float64
		Bad        float64
		Tiles      map[string]time.Duration
		Hidden     string `json:"-"`
		unexported int
	}
	v := result{inner: inner{PeakRSS: 7}, Dir: "d", ItemIDs: []string{"a"}, Elapsed: 1500 * time.Millisecond, FitSeconds: time.Second,
		BLAKE3: "x", GPUMemory: 3, NoValid: 0.5, Bad: nanValue(), Tiles: map[string]time.Duration{"31TEJ": 2 * time.Second}, Hidden: "h", unexported: 1}
	b, err := json.Marshal(jsonView(v))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bad":null,"blake3":"x","dir":"d","elapsed_seconds":1.5,"fit_seconds":1,"gpu_memory":3,"item_ids":["a"],"no_valid":0.5,"peak_rss":7,"tiles":{"31TEJ":2}}`
	if string(b) != want {
		t.Errorf("jsonView:\n%s\nwant\n%s", b, want)
	}
	for name, want := range map[string]string{"PeakRSS": "peak_rss", "ItemIDs": "item_ids", "GPUMemory": "gpu_memory", "B8A": "b8a", "NoValidFrac": "no_valid_frac", "P10Value": "p10_value", "DeviceBusy": "device_busy"} {
		if got := snakeCase(name); got != want {
			t.Errorf("snakeCase(%s) = %s, want %s", name, got, want)
		}
	}
}

func nanValue() float64 {
	var zero float64
	return zero / zero
}

// TestViewJSON: lulc view --json prints where it serves as one JSON object
// (url, host, port, dir, tiles) once it listens, then serves until
// interrupted.
func TestViewJSON(t *testing.T) {
	dir := demoDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"view", "--json", "--no-browser", "--port", "0", filepath.Join(dir, "predict")}, pw, &errb)
		pw.Close()
	}()
	var got map[string]any
	err := json.NewDecoder(pr).Decode(&got)
	go io.Copy(io.Discard, pr)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("lulc view --json: exit %d after the interrupt: %s", code, errb.String())
	}
	if err != nil {
		t.Fatalf("lulc view --json printed no JSON object: %v (stderr %s)", err, errb.String())
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "dir,host,port,tiles,url" || !strings.HasPrefix(fmt.Sprint(got["url"]), "http://127.0.0.1:") {
		t.Errorf("lulc view --json: %v", got)
	}
}
