package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/pipeline"
)

// The hostile cases of names from data (tile ids in catalogs, plans and
// raster pairs), of outputs that are inputs, existing files or not files
// at all, of vector label codes that burn nothing, and of the season,
// resolution and environment messages.

// namesItemTile rewrites the scene copy's first item so that its tile id
// (s2:mgrs_tile, JSON-encoded from tile) is the attacker's, and returns
// the copy's catalog.
func namesItemTile(c *hcase, tile string) string {
	cat := c.scene()
	v, _ := json.Marshal(tile)
	replaceIn(`"s2:mgrs_tile": "31TEJ"`, `"s2:mgrs_tile": `+string(v))(c, c.sceneFile(item))
	return cat
}

// namesVictim plants c.dir/victim/stack.tif, where a tile named
// "../victim" would write from the output's staging directory, and checks
// after the run that nothing was added beside it.
func namesVictim(c *hcase) {
	c.file("victim/stack.tif", []byte("precious"))
	c.t.Cleanup(func() {
		entries, _ := os.ReadDir(c.path("victim"))
		if len(entries) != 1 {
			c.t.Errorf("the run wrote into %s: %d entries", c.path("victim"), len(entries))
		}
	})
}

// namesPlan makes a plan of the world's scene, gives its tiles the names
// given (the digest made again, as an attacker who writes plans can) and
// returns its path.
func namesPlan(c *hcase, tiles ...string) string {
	c.t.Helper()
	p := c.path("plan.json")
	if code, _, stderr := lulc(c.t, "plan", "-q", "--catalog", c.w.catalog, "--out", p); code != 0 {
		c.t.Fatalf("plan: %s", stderr)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		c.t.Fatal(err)
	}
	var plan pipeline.JobPlan
	if err := json.Unmarshal(raw, &plan); err != nil {
		c.t.Fatal(err)
	}
	first := plan.Tiles[0]
	plan.Tiles = nil
	for _, t := range tiles {
		pt := first
		pt.Tile = t
		plan.Tiles = append(plan.Tiles, pt)
	}
	plan.Digest = ""
	body, _ := json.Marshal(plan)
	sum := sha256.Sum256(body)
	plan.Digest = hex.EncodeToString(sum[:])
	return c.file("plan.json", plan.Encode())
}

// namesRunPlan is a run from a plan with tiles named so.
func namesRunPlan(tiles ...string) func(c *hcase) []string {
	return func(c *hcase) []string {
		return []string{"run", "--catalog", c.w.catalog, "--model", c.w.model, "--plan", namesPlan(c, tiles...), "--out", c.out()}
	}
}

// namesSpecial makes a special file (a FIFO, a null device node) outside
// the case directory, where the runner's hashing would block on or read
// it, and checks after the run that it is still what it was.
func namesSpecial(c *hcase, kind string) string {
	c.t.Helper()
	dir, err := os.MkdirTemp("", "lulc-special-")
	if err != nil {
		c.t.Fatal(err)
	}
	p := filepath.Join(dir, kind)
	var mode os.FileMode
	switch kind {
	case "fifo":
		mode = os.ModeNamedPipe
		err = syscall.Mkfifo(p, 0o644)
	case "device":
		mode = os.ModeCharDevice
		// A node of /dev/null's numbers (1, 3): reading it ends at once.
		if err = syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			p, err = "/dev/null", nil // without CAP_MKNOD: the real one
		}
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&mode == 0 {
			c.t.Errorf("%s is no longer a %s: %v", p, kind, err)
		}
		if p != "/dev/null" {
			os.RemoveAll(dir)
		}
	})
	return p
}

// namesRunConfig is the embedded run config copied into the case.
func namesRunConfig(c *hcase) string {
	raw, err := configs.Read("run-demo.yaml")
	if err != nil {
		c.t.Fatal(err)
	}
	return c.file("run.yaml", raw)
}

// namesPlanCmd is lulc plan over the world's scene into out.
func namesPlanCmd(c *hcase, out string, extra ...string) []string {
	return append([]string{"plan", "--catalog", c.w.catalog, "--out", out}, extra...)
}

// namesSamples is the samples file lulc train wrote beside the model.
func namesSamples(c *hcase) string { return filepath.Join(filepath.Dir(c.w.model), "samples.lulcs") }

func TestHostileNames(t *testing.T) {
	fail := exitFailure
	var cases []hostile
	// Tile ids from a catalog's items, for ingest and run: refused, naming
	// the item and the id, before anything is written.
	for _, tc := range []struct{ name, tile, why string }{
		{"dotdot-victim", "../../victim", "separator"},
		{"dot", ".", "directory itself"},
		{"dotdot", "..", "directory itself"},
		{"slash", "a/b", "separator"},
		{"backslash", `a\b`, "separator"},
		{"nul", "31T\x00EJ", "U+0000"},
		{"newline", "31TEJ\nlulc: all good", "U+000A"},
		{"escape", "\x1b[2J31TEJ", "U+001B"},
		{"long", strings.Repeat("31TEJ", 60), "300 bytes"},
		{"rtl-override", "31TEJ\u202efit.exe", "U+202E"},
		{"hidden", ".spill", "starts with a dot"},
		{"reserved-model", "model", "lulc writes its own model"},
		{"reserved-collection", "collection.json", "its own collection.json"},
	} {
		cases = append(cases, hostile{name: "item-tile-ingest-" + tc.name, code: fail, want: []string{"S2A_31TEJ_20240418_0_L2A", "tile id", tc.why},
			setup: func(c *hcase) []string {
				return []string{"ingest", "--catalog", namesItemTile(c, tc.tile), "--out", c.out()}
			}})
	}
	cases = append(cases,
		hostile{name: "item-tile-ingest-overwrites-victim", code: fail, want: []string{"../victim", "separator"}, setup: func(c *hcase) []string {
			namesVictim(c)
			return []string{"ingest", "--catalog", namesItemTile(c, "../victim"), "--out", c.out()}
		}},
		hostile{name: "item-tile-run-overwrites-victim", code: fail, want: []string{"../victim", "S2A_31TEJ_20240418_0_L2A"}, setup: func(c *hcase) []string {
			namesVictim(c)
			return []string{"run", "--catalog", namesItemTile(c, "../victim"), "--model", c.w.model, "--out", c.out()}
		}},
		hostile{name: "item-tile-run-dot", code: fail, want: []string{`"."`}, setup: func(c *hcase) []string {
			return []string{"run", "--catalog", namesItemTile(c, "."), "--model", c.w.model, "--out", c.out()}
		}},
		hostile{name: "item-tile-run-shards", code: fail, want: []string{"shards"}, setup: func(c *hcase) []string {
			return []string{"run", "--catalog", namesItemTile(c, "shards"), "--model", c.w.model, "--out", c.out()}
		}},
		hostile{name: "item-grid-code-escapes", code: fail, want: []string{"../../victim", "separator"}, setup: func(c *hcase) []string {
			cat := namesItemTile(c, "")
			replaceIn(`"grid:code": "MGRS-31TEJ"`, `"grid:code": "MGRS-../../victim"`)(c, c.sceneFile(item))
			return []string{"ingest", "--catalog", cat, "--out", c.out()}
		}},
		hostile{name: "item-id-as-tile-escapes", code: fail, want: []string{"../../evil", "separator"}, setup: func(c *hcase) []string {
			// Without a tile the item's id names the directory.
			cat := namesItemTile(c, "")
			p := c.sceneFile(item)
			replaceIn(`"grid:code": "MGRS-31TEJ"`, `"grid:code": ""`)(c, p)
			replaceIn(`"id": "S2A_31TEJ_20240418_0_L2A"`, `"id": "../../evil"`)(c, p)
			return []string{"ingest", "--catalog", cat, "--out", c.out()}
		}},
	)
	// A plan's tiles: the digest proves the file whole, not honest.
	for _, tc := range []struct {
		name  string
		tiles []string
		want  string
	}{
		{"dotdot-victim", []string{"../../victim"}, "separator"},
		{"dot", []string{"."}, "directory itself"},
		{"empty", []string{""}, "empty"},
		{"slash", []string{"a/b"}, "separator"},
		{"newline", []string{"31TEJ\n"}, "U+000A"},
		{"rtl-override", []string{"\u202e31TEJ"}, "U+202E"},
		{"duplicate", []string{"31TEJ", "31TEJ"}, "two tiles would write one directory"},
		{"reserved-model", []string{"model"}, "its own model"},
	} {
		cases = append(cases, hostile{name: "plan-tile-" + tc.name, code: fail, want: []string{"plan", "tiles[", tc.want}, setup: namesRunPlan(tc.tiles...)})
	}
	// Raster pairs' tiles, checked when the config is read.
	for _, tc := range []struct{ name, yaml, why string }{
		{"escape", `"a\e[31mb"`, "U+001B"},
		{"tab", `"a\tb"`, "U+0009"},
		{"nul", `"a\0b"`, "U+0000"},
		{"del", `"a\x7fb"`, "U+007F"},
		{"zero-width", `"a\u200bb"`, "U+200B"},
		{"reserved", "report.json", "report.json"},
	} {
		cases = append(cases, hostile{name: "pair-tile-" + tc.name, code: fail, want: []string{"source.rasters[0].tile", tc.why}, setup: func(c *hcase) []string {
			return []string{"ingest", "-c", c.config("ingest-real-sample.yaml", "tile: 282D_485L_3_3", "tile: "+tc.yaml), "--out", c.out()}
		}})
	}
	runHostile(t, cases)
}

// TestHostileNamesOutputs: plan and export follow the rule of every
// writer: never an input, never over an existing file without --force,
// never over what is not a regular file (directory outputs: a directory).
func TestHostileNamesOutputs(t *testing.T) {
	fail := exitFailure
	cases := []hostile{
		{name: "plan-out-is-catalog", code: fail, want: []string{"catalog.json", "inside the input"}, setup: func(c *hcase) []string {
			return namesPlanCmd(c, c.w.catalog, "--force")
		}},
		{name: "plan-out-is-catalog-unforced", code: fail, want: []string{"inside the input"}, setup: func(c *hcase) []string {
			// The input comes first: no --force would make it right.
			cat := c.scene()
			return []string{"plan", "--catalog", cat, "--out", cat}
		}},
		{name: "plan-out-is-run-config", code: fail, want: []string{"run.yaml", "is the input"}, setup: func(c *hcase) []string {
			cfg := namesRunConfig(c)
			return []string{"plan", "-c", cfg, "--catalog", c.w.catalog, "--out", cfg, "--force"}
		}},
		{name: "plan-out-is-cog", code: fail, want: []string{"B04.tif", "inside the input"}, setup: func(c *hcase) []string {
			c.scene()
			return []string{"plan", "--catalog", c.path("scene/catalog.json"), "--out", c.sceneFile(b04), "--force"}
		}},
		{name: "plan-out-exists", code: fail, want: []string{"already exists", "--force"}, setup: func(c *hcase) []string {
			return namesPlanCmd(c, c.file("plan.json", []byte(`{"mine": true}`)))
		}},
		{name: "plan-out-device", code: fail, want: []string{"character device", "never replaces"}, setup: func(c *hcase) []string {
			return namesPlanCmd(c, namesSpecial(c, "device"), "--force")
		}},
		{name: "plan-out-fifo", code: fail, want: []string{"FIFO"}, setup: func(c *hcase) []string {
			return namesPlanCmd(c, namesSpecial(c, "fifo"), "--force")
		}},
		{name: "plan-out-symlink-to-config", code: fail, want: []string{"is the input"}, setup: func(c *hcase) []string {
			cfg := namesRunConfig(c)
			os.Symlink(cfg, c.path("link.json"))
			return []string{"plan", "-c", cfg, "--catalog", c.w.catalog, "--out", c.path("link.json"), "--force"}
		}},
		{name: "plan-out-symlink-elsewhere", code: fail, want: []string{"symbolic link", "other.json"}, setup: func(c *hcase) []string {
			os.Symlink(c.file("other.json", []byte("theirs")), c.path("link.json"))
			return namesPlanCmd(c, c.path("link.json"), "--force")
		}},
		{name: "plan-out-directory", code: fail, want: []string{"is a directory, not a regular file"}, setup: func(c *hcase) []string {
			c.file("plans/keep.txt", []byte("keep"))
			return namesPlanCmd(c, c.path("plans"), "--force")
		}},
		{name: "export-model-out-is-model", code: fail, want: []string{"model.lulcrf", "is the input"}, setup: func(c *hcase) []string {
			return []string{"export", "model", "--model", c.w.model, "--out", c.w.model, "--force"}
		}},
		{name: "export-model-out-exists", code: fail, want: []string{"already exists", "--force"}, setup: func(c *hcase) []string {
			return []string{"export", "model", "--model", c.w.model, "--out", c.file("model.onnx", []byte("an older export"))}
		}},
		{name: "export-model-out-device", code: fail, want: []string{"character device"}, setup: func(c *hcase) []string {
			return []string{"export", "model", "--model", c.w.model, "--out", namesSpecial(c, "device"), "--force"}
		}},
		{name: "export-model-out-fifo", code: fail, want: []string{"FIFO"}, setup: func(c *hcase) []string {
			return []string{"export", "model", "--model", c.w.model, "--out", namesSpecial(c, "fifo"), "--force"}
		}},
		{name: "export-model-out-symlink-to-model", code: fail, want: []string{"is the input"}, setup: func(c *hcase) []string {
			os.Symlink(c.w.model, c.path("model.onnx"))
			return []string{"export", "model", "--model", c.w.model, "--out", c.path("model.onnx"), "--force"}
		}},
		{name: "export-samples-out-is-samples", code: fail, want: []string{"samples.lulcs", "is the input"}, setup: func(c *hcase) []string {
			return []string{"export", "samples", "--samples", namesSamples(c), "--out", namesSamples(c), "--force"}
		}},
		{name: "export-samples-out-is-model", code: fail, want: []string{"model.lulcrf", "is the input"}, setup: func(c *hcase) []string {
			return []string{"export", "samples", "--samples", namesSamples(c), "--model", c.w.model, "--out", c.w.model, "--force"}
		}},
		{name: "export-samples-out-exists", code: fail, want: []string{"already exists", "--force"}, setup: func(c *hcase) []string {
			return []string{"export", "samples", "--samples", namesSamples(c), "--out", c.file("s.npz", []byte("older"))}
		}},
		{name: "ingest-out-fifo-forced", code: fail, want: []string{"FIFO", "not a directory"}, setup: func(c *hcase) []string {
			return []string{"ingest", "--catalog", c.w.catalog, "--out", namesSpecial(c, "fifo"), "--force"}
		}},
		{name: "train-out-device-forced", code: fail, want: []string{"character device"}, setup: func(c *hcase) []string {
			return []string{"train", "--stack", c.w.stack, "--out", namesSpecial(c, "device"), "--force"}
		}},
		{name: "synth-out-symlink-forced", code: fail, want: []string{"symbolic link"}, setup: func(c *hcase) []string {
			c.file("theirs/keep.txt", []byte("keep"))
			os.Symlink(c.path("theirs"), c.path("link"))
			return []string{"synth", "--out", c.path("link"), "--force"}
		}},
		{name: "predict-out-file-forced", code: fail, want: []string{"is a regular file, not a directory"}, setup: func(c *hcase) []string {
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.file("maps", []byte("a file")), "--force"}
		}},
	}
	runHostile(t, cases)
}

// namesVectorConfig is ingest-tiny.yaml over the world's scene with a
// GeoJSON layer of the case, whose features' class property holds values
// (raw JSON), as source.labels.
func namesVectorConfig(c *hcase, field string, values ...string) string {
	var feats []string
	for i, v := range values {
		// Squares inside the tiny scene's area, side by side.
		x := 3.0 + float64(i)*0.002
		feats = append(feats, fmt.Sprintf(`{"type":"Feature","properties":{"class":%s},"geometry":{"type":"Polygon","coordinates":[[[%g,45.13],[%g,45.13],[%g,45.132],[%g,45.132],[%g,45.13]]]}}`,
			v, x, x+0.0015, x+0.0015, x, x))
	}
	layer := c.file("labels.geojson", []byte(`{"type":"FeatureCollection","features":[`+strings.Join(feats, ",")+`]}`))
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		c.t.Fatal(err)
	}
	s := string(raw)
	for _, r := range [][2]string{
		{"  label_collection: esa-worldcover\n", "  labels: " + layer + "\n  label_field: " + field + "\n"},
		{"  labels: mode\n", ""},
	} {
		if !strings.Contains(s, r[0]) {
			c.t.Fatalf("ingest-tiny.yaml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return c.file("ingest.yaml", []byte(s))
}

func namesVector(field string, values ...string) func(c *hcase) []string {
	return func(c *hcase) []string {
		return []string{"ingest", "-c", namesVectorConfig(c, field, values...), "--catalog", c.w.catalog, "--out", c.out()}
	}
}

// TestHostileNamesLabelsAndMessages: vector label codes that burn
// nothing, and the season, resolution and environment messages.
func TestHostileNamesLabelsAndMessages(t *testing.T) {
	fail, usage := exitFailure, exitUsage
	cases := []hostile{
		{name: "vector-all-null", code: fail, want: []string{"yields no labels", "field class", "NULL ×3"}, setup: namesVector("class", "null", "null", "null")},
		{name: "vector-all-zero", code: fail, want: []string{"yields no labels", "0 ×2 (0 means no label)"}, setup: namesVector("class", "0", "0")},
		{name: "vector-all-negative", code: fail, want: []string{"yields no labels", "-1 ×1 (negative)", "-7 ×1"}, setup: namesVector("class", "-1", "-7")},
		{name: "vector-all-huge", code: fail, want: []string{"yields no labels", "4294967296 ×1 (above 255)"}, setup: namesVector("class", "4294967296")},
		{name: "vector-all-null", code: fail, want: []string{"yields no labels", "NULL ×2 (no value)", "0 ×1 (0 means no label)"}, setup: namesVector("class", "null", "0", "null")},
		{name: "vector-all-text", code: 0, loud: true, want: []string{"text classes coded from the values of field class, numbered 1–2 in sorted order: forest=1, water=2"}, setup: namesVector("class", `"forest"`, `" Forest"`, `"water"`)},
		{name: "vector-all-fractional", code: fail, want: []string{"yields no labels", "not a whole number"}, setup: namesVector("class", "10.5")},
		{name: "vector-empty-layer", code: fail, want: []string{"labels.geojson", "no features"}, setup: namesVector("class")},
		{name: "vector-missing-field", code: fail, want: []string{`no class field "code"`, "fields: class"}, setup: namesVector("code", "10", "20")},
		{name: "vector-some-unusable", code: 0, loud: true, want: []string{"4 of 6 feature(s)", "burn no label", "field class", "NULL ×2", "0 ×1", "-3 ×1"},
			setup: namesVector("class", "10", "null", "0", "-3", "null", "20")},
		{name: "season-without-dates", code: 0, loud: true, want: []string{"season winter (12-01 to 02-28)", "2024-04-18", "nodata"}, setup: func(c *hcase) []string {
			cfg := c.config("ingest-tiny.yaml", "window: 1024", "window: 1024\ntemporal:\n  of: [ndvi]\n  seasons:\n    - {name: winter, from: 12-01, to: 02-28}\n    - {name: summer, from: 06-01, to: 08-31}")
			return []string{"ingest", "-c", cfg, "--catalog", c.w.catalog, "--out", c.out()}
		}},
		{name: "resolution-too-coarse", code: fail, want: []string{"grid.resolution: 100000", "too coarse", "sensible resolutions"}, setup: func(c *hcase) []string {
			return []string{"ingest", "-c", c.config("ingest-tiny.yaml", "resolution: 10", "resolution: 100000"), "--catalog", c.w.catalog, "--out", c.out()}
		}},
		{name: "stack-format-unknown", code: fail, want: []string{"stack format", `"parquet": not cog or zarr`}, setup: func(c *hcase) []string {
			return []string{"ingest", "-c", c.config("ingest-tiny.yaml", "blocksize: 512", "blocksize: 512\n  stack: parquet"), "--catalog", c.w.catalog, "--out", c.out()}
		}},
		{name: "base-url-with-query", code: usage, want: []string{"--base-url", "query"}, setup: func(c *hcase) []string {
			return []string{"ingest", "--catalog", c.w.catalog, "--out", c.out(), "--base-url", "https://data.example.org/maps?sig=secret"}
		}},
		{name: "train-on-zarr-only-stack", code: fail, want: []string{"Zarr store only", "output.stack: [cog, zarr]"}, setup: func(c *hcase) []string {
			stack := filepath.Join(c.dir, "zarr-stack")
			cfg := c.config("ingest-tiny.yaml", "blocksize: 512", "blocksize: 512\n  stack: zarr")
			if code, _, stderr := lulc(c.t, "ingest", "-q", "-c", cfg, "--catalog", c.w.catalog, "--out", stack); code != 0 {
				c.t.Fatalf("zarr ingest: %s", stderr)
			}
			return []string{"train", "--stack", stack, "--out", c.out()}
		}},
		{name: "env-quiet-and-verbose", code: usage, loud: true, want: []string{"LULC_QUIET", "LULC_VERBOSE"}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_QUIET", "1")
			c.t.Setenv("LULC_VERBOSE", "1")
			return []string{"synth", "--out", c.out()}
		}},
		{name: "flag-quiet-env-verbose", code: usage, want: []string{"--quiet", "LULC_VERBOSE"}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_VERBOSE", "true")
			return []string{"synth", "--out", c.out()}
		}},
	}
	runHostile(t, cases)
}
