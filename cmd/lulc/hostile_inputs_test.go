package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/learn/forest"
)

// damage is a change to the case's scene copy: the file (a glob under the
// scene) and what it becomes.
type damage struct {
	name, file string
	change     func(c *hcase, path string)
	code       int
	want       []string
	loud       bool
}

func zeroBytes(c *hcase, p string) { os.WriteFile(p, nil, 0o644) }
func truncate(n int) func(*hcase, string) {
	return func(c *hcase, p string) {
		b, _ := os.ReadFile(p)
		os.WriteFile(p, b[:min(n, len(b))], 0o644)
	}
}
func truncateHalf(c *hcase, p string) {
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)/2], 0o644)
}
func content(body string) func(*hcase, string) {
	return func(c *hcase, p string) { os.WriteFile(p, []byte(body), 0o644) }
}
func replaceIn(old, new string) func(*hcase, string) {
	return func(c *hcase, p string) {
		b, _ := os.ReadFile(p)
		if !bytes.Contains(b, []byte(old)) {
			c.t.Fatalf("%s has no %q", p, old)
		}
		os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
	}
}
func remove(c *hcase, p string) { os.RemoveAll(p) }

// rewrite replaces a raster by one of another size, type or CRS.
func rewrite(g func(geo.Grid) geo.Grid, asByte bool) func(*hcase, string) {
	return func(c *hcase, p string) {
		src, _, err := raster.ReadBand[uint16](p, 1)
		if err != nil {
			c.t.Fatal(err)
		}
		s, err := raster.Open(p)
		if err != nil {
			c.t.Fatal(err)
		}
		ng := g(s.Grid)
		s.Close()
		os.Remove(p)
		nd := 0.0
		if asByte {
			px := make([]uint8, ng.Width*ng.Height)
			for i := range px {
				px[i] = uint8(src[i%len(src)] / 64)
			}
			err = raster.WriteCOG(p, ng, px, raster.COGOptions{NoData: &nd})
		} else {
			px := make([]uint16, ng.Width*ng.Height)
			for i := range px {
				px[i] = src[i%len(src)]
			}
			err = raster.WriteCOG(p, ng, px, raster.COGOptions{NoData: &nd})
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

const (
	b04   = "sentinel-2-l2a/S2A_31TEJ_20240418_0_L2A/B04.tif"
	b05   = "sentinel-2-l2a/S2A_31TEJ_20240418_0_L2A/B05.tif"
	scl   = "sentinel-2-l2a/S2A_31TEJ_20240418_0_L2A/SCL.tif"
	item  = "sentinel-2-l2a/S2A_31TEJ_20240418_0_L2A/S2A_31TEJ_20240418_0_L2A.json"
	label = "esa-worldcover/*/*_Map.tif"
	litem = "esa-worldcover/*/ESA_WorldCover_10m_2021_v200_N45E002.json"
	coll  = "sentinel-2-l2a/collection.json"
)

func TestHostileScenes(t *testing.T) {
	fail := exitFailure
	damages := []damage{
		{"cog-zero-bytes", b04, zeroBytes, fail, []string{"B04.tif"}, false},
		{"cog-header-only", b04, truncate(1000), fail, []string{"B04.tif"}, false},
		{"cog-truncated-half", b04, truncateHalf, fail, []string{"B04.tif"}, false},
		{"cog-text", b04, content("this is not a GeoTIFF\n"), fail, []string{"B04.tif"}, false},
		{"cog-png", b04, content("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), fail, []string{"B04.tif"}, false},
		{"cog-fake-tiff-header", b04, content("II*\x00\x08\x00\x00\x00\x00\x00"), fail, []string{"B04.tif"}, false},
		{"cog-bigendian-garbage", b04, content("MM\x00*\xff\xff\xff\xff"), fail, []string{"B04.tif"}, false},
		{"cog-missing", b04, remove, fail, []string{"B04.tif"}, false},
		{"cog-20m-zero-bytes", b05, zeroBytes, fail, []string{"B05.tif"}, false},
		{"cog-20m-truncated", b05, truncateHalf, fail, []string{"B05.tif"}, false},
		{"cog-smaller", b04, rewrite(func(g geo.Grid) geo.Grid { g.Width, g.Height = 100, 100; return g }, false), 0, []string{"B04 covers 15.7 %"}, true},
		{"cog-wrong-crs", b05, rewrite(func(g geo.Grid) geo.Grid {
			g.EPSG = 32632 // the next UTM zone: the same numbers lie 600 km east
			return g
		}, false), 0, []string{"B05 covers 0.0 %"}, true},
		{"cog-byte-type", b04, rewrite(func(g geo.Grid) geo.Grid { return g }, true), 0, nil, false},
		{"scl-zero-bytes", scl, zeroBytes, fail, []string{"SCL.tif"}, false},
		{"scl-truncated", scl, truncateHalf, fail, []string{"SCL.tif"}, false},
		{"scl-missing", scl, remove, fail, []string{"SCL.tif"}, false},
		{"labels-zero-bytes", label, zeroBytes, fail, []string{"_Map.tif"}, false},
		{"labels-truncated", label, truncateHalf, fail, []string{"_Map.tif"}, false},
		{"labels-text", label, content("labels"), fail, []string{"_Map.tif"}, false},
		{"labels-far-away", label, func(c *hcase, p string) {
			os.Remove(p)
			g := geo.Grid{EPSG: 4326, Width: 50, Height: 50, Transform: [6]float64{100, 1.0 / 12000, 0, -10, 0, -1.0 / 12000}}
			raster.WriteCOG(p, g, make([]uint8, 2500), raster.COGOptions{})
		}, fail, []string{"labels do not overlap"}, false},
		{"item-not-json", item, content("{not json"), fail, []string{"S2A_31TEJ_20240418_0_L2A.json"}, false},
		{"item-empty", item, zeroBytes, fail, []string{"S2A_31TEJ_20240418_0_L2A.json"}, false},
		{"item-no-assets", item, replaceIn(`"assets"`, `"assetz"`), fail, []string{"S2A_31TEJ_20240418_0_L2A"}, false},
		{"item-bad-datetime", item, replaceIn(`"datetime": "2024-04-18T10:56:29.000000Z"`, `"datetime": "soon"`), fail, []string{"soon"}, false},
		{"item-href-escapes", item, replaceIn(`"href": "./B04.tif"`, `"href": "../../../../../../etc/passwd"`), fail, []string{"/etc/passwd"}, false},
		{"item-href-missing", item, replaceIn(`"href": "./B04.tif"`, `"href": "./B04-gone.tif"`), fail, []string{"B04-gone.tif"}, false},
		{"item-href-scheme", item, replaceIn(`"href": "./B04.tif"`, `"href": "ftp://example.com/B04.tif"`), fail, []string{"ftp://example.com/B04.tif"}, false},
		{"item-bbox-short", item, replaceIn(`"bbox": [`, `"bbox": [1, `), fail, []string{"bbox"}, false},
		{"item-id-empty", item, replaceIn(`"id": "S2A_31TEJ_20240418_0_L2A"`, `"id": ""`), fail, []string{"not a STAC item"}, false},
		{"label-item-not-json", litem, content("]"), fail, []string{"N45E002.json"}, false},
		{"label-item-no-map", litem, replaceIn(`"map"`, `"mop"`), fail, []string{"map"}, false},
		{"collection-not-json", coll, content("nope"), fail, []string{"collection.json"}, false},
		{"collection-missing", coll, remove, fail, []string{"collection.json"}, false},
		{"catalog-not-json", "catalog.json", content("<html>"), fail, []string{"catalog.json"}, false},
		{"catalog-empty", "catalog.json", zeroBytes, fail, []string{"catalog.json"}, false},
		{"catalog-link-outside", "catalog.json", replaceIn(`"./sentinel-2-l2a/collection.json"`, `"../../../outside/collection.json"`), fail, []string{"outside"}, false},
		{"catalog-no-links", "catalog.json", replaceIn(`"links"`, `"lonks"`), fail, []string{"no"}, false},
	}
	var cases []hostile
	for _, d := range damages {
		cases = append(cases, hostile{name: d.name, code: d.code, want: d.want, loud: d.loud, setup: func(c *hcase) []string {
			cat := c.scene()
			d.change(c, c.sceneFile(d.file))
			return []string{"ingest", "--catalog", cat, "--out", c.out()}
		}})
	}
	// A run given a model predicts a tile beside its composite: a file
	// that fails while the tile is composited fails the windows waiting
	// for its rows with its own error, and nothing is committed.
	for _, name := range []string{"cog-truncated-half", "cog-20m-truncated", "scl-truncated", "labels-truncated"} {
		i := slices.IndexFunc(damages, func(d damage) bool { return d.name == name })
		d := damages[i]
		cases = append(cases, hostile{name: "run-model-" + d.name, code: d.code, want: d.want, loud: d.loud, setup: func(c *hcase) []string {
			cat := c.scene()
			d.change(c, c.sceneFile(d.file))
			return []string{"run", "--catalog", cat, "--model", c.w.model, "--out", c.out()}
		}})
	}
	runHostile(t, cases)
}

func TestHostileModelsAndStacks(t *testing.T) {
	fail := exitFailure
	model := func(change func(c *hcase, p string), want ...string) hostile {
		return hostile{code: fail, want: want, setup: func(c *hcase) []string {
			b, _ := os.ReadFile(c.w.model)
			p := c.file("model.lulcrf", b)
			change(c, p)
			return []string{"predict", "--model", p, "--input", c.w.stack, "--out", c.out()}
		}}
	}
	flip := func(at float64) func(*hcase, string) {
		return func(c *hcase, p string) {
			b, _ := os.ReadFile(p)
			b[int(float64(len(b))*at)] ^= 0x55
			os.WriteFile(p, b, 0o644)
		}
	}
	cases := []hostile{}
	add := func(name string, h hostile) { h.name = name; cases = append(cases, h) }
	add("model-zero-bytes", model(zeroBytes, "model.lulcrf"))
	add("model-truncated", model(truncateHalf, "model.lulcrf"))
	add("model-header-only", model(truncate(12), "model.lulcrf"))
	add("model-text", model(content("a forest\n"), "model.lulcrf"))
	add("model-flipped-byte", model(flip(0.6), "model.lulcrf"))
	add("model-flipped-header", model(flip(0.01), "model.lulcrf"))
	add("model-missing", model(remove, "model.lulcrf"))
	add("model-is-dir", model(func(c *hcase, p string) { os.Remove(p); os.Mkdir(p, 0o755) }, "model.lulcrf"))
	add("model-edges-unsorted", model(func(c *hcase, p string) {
		// A well-formed file (its checksum holds) whose bin edges are out
		// of order: binning searches them, so reading refuses it.
		b, _ := os.ReadFile(p)
		m, err := forest.Decode(b)
		if err != nil {
			c.t.Fatal(err)
		}
		e := m.Bins.Edges[1]
		e[0], e[1] = e[1], e[0]
		out, err := m.Encode()
		if err != nil {
			c.t.Fatal(err)
		}
		os.WriteFile(p, out, 0o644)
	}, "bin edges are not increasing"))
	add("model-is-stack", model(func(c *hcase, p string) {
		b, _ := os.ReadFile(filepath.Join(c.w.stack, "31TEJ", "stack.tif"))
		os.WriteFile(p, b, 0o644)
	}, "model.lulcrf"))

	stack := func(cmd string, change func(c *hcase, dir string), want ...string) hostile {
		return hostile{code: fail, want: want, setup: func(c *hcase) []string {
			dir := c.stackCopy()
			change(c, dir)
			if cmd == "train" {
				return []string{"train", "--stack", dir, "--out", c.out()}
			}
			return []string{"predict", "--model", c.w.model, "--input", dir, "--out", c.out()}
		}}
	}
	tile := func(name string) func(*hcase, string) string {
		return func(c *hcase, dir string) string { return filepath.Join(dir, "31TEJ", name) }
	}
	on := func(name string, f func(*hcase, string)) func(*hcase, string) {
		return func(c *hcase, dir string) { f(c, tile(name)(c, dir)) }
	}
	for _, cmd := range []string{"train", "predict"} {
		add(cmd+"-stack-empty", stack(cmd, func(c *hcase, dir string) { os.RemoveAll(filepath.Join(dir, "31TEJ")) }, "manifest"))
		add(cmd+"-manifest-not-json", stack(cmd, on("manifest.json", content("{")), "manifest.json"))
		add(cmd+"-manifest-empty", stack(cmd, on("manifest.json", zeroBytes), "manifest.json"))
		add(cmd+"-manifest-tile-escapes", stack(cmd, on("manifest.json", replaceIn(`"tile": "31TEJ"`, `"tile": "../../x"`)), "tile"))
		add(cmd+"-manifest-no-bands", stack(cmd, on("manifest.json", replaceIn(`"bands"`, `"bandz"`)), "bands"))
		add(cmd+"-stack-zero-bytes", stack(cmd, on("stack.tif", zeroBytes), "stack.tif"))
		add(cmd+"-stack-truncated", stack(cmd, on("stack.tif", truncateHalf), "stack.tif"))
		add(cmd+"-stack-text", stack(cmd, on("stack.tif", content("stack")), "stack.tif"))
		add(cmd+"-stack-missing", stack(cmd, on("stack.tif", remove), "stack.tif"))
	}
	add("train-labels-missing", stack("train", on("labels.tif", remove), "labels.tif"))
	add("train-labels-truncated", stack("train", on("labels.tif", truncateHalf), "labels.tif"))
	add("train-labels-text", stack("train", on("labels.tif", content("labels")), "labels.tif"))
	add("train-stack-is-file", hostile{code: fail, want: []string{"input.stack"}, setup: func(c *hcase) []string {
		return []string{"train", "--stack", c.file("stack", []byte("x")), "--out", c.out()}
	}})
	add("evaluate-prediction-text", hostile{code: fail, want: []string{"class.tif"}, setup: func(c *hcase) []string {
		return []string{"evaluate", "--prediction", c.file("class.tif", []byte("x")), "--labels", filepath.Join(c.w.stack, "31TEJ", "labels.tif"), "--out", c.out()}
	}})
	add("evaluate-labels-missing", hostile{code: fail, want: []string{"nolabels.tif"}, setup: func(c *hcase) []string {
		return []string{"evaluate", "--prediction", filepath.Join(c.w.stack, "31TEJ", "labels.tif"), "--labels", c.path("nolabels.tif"), "--out", c.out()}
	}})
	runHostile(t, cases)
}

func TestHostileOutputsAndCLI(t *testing.T) {
	fail, usage := exitFailure, exitUsage
	cases := []hostile{
		{name: "out-is-input-stack", code: fail, want: []string{"stack"}, setup: func(c *hcase) []string {
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.w.stack}
		}},
		{name: "out-inside-input-stack", code: fail, want: []string{"inside"}, setup: func(c *hcase) []string {
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", filepath.Join(c.w.stack, "pred")}
		}},
		{name: "out-contains-model", code: fail, want: []string{"model.lulcrf"}, setup: func(c *hcase) []string {
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", filepath.Dir(filepath.Dir(c.w.model)), "--force"}
		}},
		{name: "out-is-catalog-dir", code: fail, want: []string{"scene"}, setup: func(c *hcase) []string {
			return []string{"ingest", "--catalog", c.w.catalog, "--out", filepath.Dir(c.w.catalog), "--force"}
		}},
		{name: "out-exists", code: fail, want: []string{"already exists", "--force"}, setup: func(c *hcase) []string {
			os.Mkdir(c.out(), 0o755)
			c.file("out/keep.txt", []byte("keep"))
			return []string{"synth", "--out", c.out()}
		}},
		{name: "out-parent-is-file", code: fail, want: []string{"not writable"}, setup: func(c *hcase) []string {
			c.file("parent", []byte("a file"))
			return []string{"synth", "--out", filepath.Join(c.path("parent"), "out")}
		}},
		{name: "out-locked", code: fail, want: []string{"held by", "--break-lock"}, setup: func(c *hcase) []string {
			host, _ := os.Hostname()
			c.file(".out.lock", []byte(`{"host":"`+host+`","pid":1,"command":"init"}`))
			return []string{"synth", "--out", c.out()}
		}},
		{name: "validate-missing", code: usage, want: []string{"no such file"}, setup: func(c *hcase) []string {
			return []string{"validate", c.path("nothing.json")}
		}},
		{name: "validate-no-stac-in-dir", code: usage, want: []string{"no collection.json or catalog.json"}, setup: func(c *hcase) []string {
			return []string{"validate", c.dir}
		}},
		{name: "validate-not-stac", code: fail, want: []string{"not a STAC document"}, setup: func(c *hcase) []string {
			return []string{"validate", c.file("other.json", []byte(`{"type": "FeatureCollection", "features": []}`))}
		}},
		{name: "validate-not-json", code: fail, want: []string{"not JSON"}, setup: func(c *hcase) []string {
			return []string{"validate", c.file("catalog.json", []byte("{ not json"))}
		}},
		{name: "validate-tampered-asset", code: fail, want: []string{"labels.tif", "file:"}, setup: func(c *hcase) []string {
			stack := c.stackCopy()
			labels, _ := filepath.Glob(filepath.Join(stack, "*", "labels.tif"))
			if len(labels) == 0 {
				c.t.Fatal("no labels.tif in the stack")
			}
			f, err := os.OpenFile(labels[0], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				c.t.Fatal(err)
			}
			f.Write([]byte("x"))
			f.Close()
			return []string{"validate", stack}
		}},
		{name: "out-read-only", code: fail, want: []string{"not writable"}, setup: func(c *hcase) []string {
			if os.Geteuid() == 0 {
				c.t.Skip("running as root, which writes into read-only directories")
			}
			ro := c.path("ro")
			os.Mkdir(ro, 0o555)
			return []string{"synth", "--out", filepath.Join(ro, "out")}
		}},
		{name: "out-disk-full", code: fail, want: []string{"no space left"}, setup: func(c *hcase) []string {
			small := c.path("small")
			os.Mkdir(small, 0o755)
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", small).CombinedOutput(); err != nil {
				c.t.Skipf("cannot mount a small tmpfs here (%v: %s); TestPredictDiskFull covers a full disk with RLIMIT_FSIZE", err, bytes.TrimSpace(out))
			}
			c.t.Cleanup(func() { exec.Command("umount", small).Run() })
			return []string{"synth", "--out", filepath.Join(small, "out")}
		}},
		{name: "config-is-dir", code: fail, want: []string{"cfgdir"}, setup: func(c *hcase) []string {
			os.Mkdir(c.path("cfgdir"), 0o755)
			return []string{"synth", "-c", c.path("cfgdir"), "--out", c.out()}
		}},
		{name: "config-missing", code: fail, want: []string{"nothere.yaml"}, setup: func(c *hcase) []string {
			return []string{"synth", "-c", c.path("nothere.yaml"), "--out", c.out()}
		}},
		{name: "config-empty", code: fail, want: []string{"empty"}, setup: func(c *hcase) []string {
			return []string{"synth", "-c", c.file("e.yaml", nil), "--out", c.out()}
		}},
		{name: "config-binary", code: fail, want: []string{"b.yaml"}, setup: func(c *hcase) []string {
			return []string{"synth", "-c", c.file("b.yaml", []byte{0xff, 0xfe, 0x00, 0x01}), "--out", c.out()}
		}},
	}
	for _, cmd := range [][]string{{"synth"}, {"ingest"}, {"train"}, {"predict"}, {"evaluate"}, {"run"}, {"bench"}} {
		cases = append(cases,
			hostile{name: cmd[0] + "-unknown-flag", code: usage, want: []string{"--nope"}, setup: func(c *hcase) []string { return append(cmd, "--nope") }},
			hostile{name: cmd[0] + "-stray-argument", code: usage, want: []string{"stray"}, setup: func(c *hcase) []string { return append(cmd, "stray", "--out", c.out()) }},
		)
	}
	cases = append(cases,
		hostile{name: "no-out-synth", code: usage, want: []string{"--out"}, setup: func(c *hcase) []string { return []string{"synth"} }},
		hostile{name: "no-out-run", code: usage, want: []string{"--out"}, setup: func(c *hcase) []string { return []string{"run"} }},
		hostile{name: "device-bogus", code: usage, want: []string{"tpu"}, setup: func(c *hcase) []string {
			return []string{"ingest", "--device", "tpu", "--catalog", c.w.catalog, "--out", c.out()}
		}},
		hostile{name: "device-gpu-index", code: usage, want: []string{"gpu:x"}, setup: func(c *hcase) []string {
			return []string{"run", "--device", "gpu:x", "--out", c.out()}
		}},
		hostile{name: "unknown-command", code: usage, want: []string{"frob"}, setup: func(c *hcase) []string { return []string{"frob"} }},
		hostile{name: "quiet-and-verbose", code: usage, want: []string{"quiet"}, setup: func(c *hcase) []string { return []string{"-v", "version"} }},
	)
	runHostile(t, cases)
}

var _ = strings.Contains
