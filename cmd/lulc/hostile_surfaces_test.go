package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/internal/npy"
)

// temporalSection is a valid temporal section for the tiny ingest config,
// which the cases below damage one key at a time.
const temporalSection = `
temporal:
  of: [ndvi, B08]
  percentiles: [10, 90]
  seasons:
    - {name: spring, from: 03-01, to: 05-31}
    - {name: summer, from: 06-01, to: 08-31}
`

// TestHostileSurfaces runs hostile cases on the surfaces added since the
// first rounds: temporal and context feature configs, the evaluator's and
// the exporter's inputs, the environment's flags and the config command.
func TestHostileSurfaces(t *testing.T) {
	const fail, usage = exitFailure, exitUsage
	temporal := func(old, new string) func(c *hcase) []string {
		return func(c *hcase) []string {
			raw, err := readConfig("ingest-tiny.yaml")
			if err != nil {
				c.t.Fatal(err)
			}
			section := temporalSection
			if old != "" {
				if !strings.Contains(section, old) {
					c.t.Fatalf("the temporal section has no %q", old)
				}
				section = strings.Replace(section, old, new, 1)
			}
			cfg := c.file("ingest.yaml", append(raw, section...))
			return []string{"ingest", "-c", cfg, "--catalog", c.w.catalog, "--out", c.out()}
		}
	}
	feature := func(f string) func(c *hcase) []string {
		return func(c *hcase) []string {
			cfg := c.config("train-demo.yaml", "range(ndbi, 15)]", "range(ndbi, 15), "+f+"]")
			return []string{"train", "-c", cfg, "--stack", c.w.stack, "--out", c.out()}
		}
	}
	env := func(name, value string, args ...string) func(c *hcase) []string {
		return func(c *hcase) []string {
			c.t.Setenv(name, value)
			return args
		}
	}
	cases := []hostile{
		// Temporal planes: every key of the section, damaged.
		{name: "temporal-of-unknown", code: fail, want: []string{"evi9"}, setup: temporal("of: [ndvi, B08]", "of: [ndvi, evi9]")},
		{name: "temporal-of-empty", code: fail, want: []string{"temporal"}, setup: temporal("of: [ndvi, B08]", "of: []")},
		{name: "temporal-percentile-above-100", code: fail, want: []string{"150"}, setup: temporal("percentiles: [10, 90]", "percentiles: [10, 150]")},
		{name: "temporal-percentile-negative", code: fail, want: []string{"-5"}, setup: temporal("percentiles: [10, 90]", "percentiles: [-5, 90]")},
		{name: "temporal-percentile-repeated", code: fail, want: []string{"10"}, setup: temporal("percentiles: [10, 90]", "percentiles: [10, 10]")},
		{name: "temporal-season-month-13", code: fail, want: []string{"13-01"}, setup: temporal("from: 03-01", "from: 13-01")},
		{name: "temporal-season-day-32", code: fail, want: []string{"05-32"}, setup: temporal("to: 05-31", "to: 05-32")},
		{name: "temporal-season-no-name", code: fail, want: []string{"name"}, setup: temporal("name: spring, ", "")},
		{name: "temporal-season-twice", code: fail, want: []string{"summer"}, setup: temporal("name: spring", "name: summer")},
		{name: "temporal-season-name-path", code: fail, want: []string{"../x"}, setup: temporal("name: spring", "name: ../x")},
		{name: "temporal-unknown-key", code: fail, want: []string{"medians"}, setup: temporal("  percentiles:", "  medians: [1]\n  percentiles:")},
		// Context and temporal features in a train config.
		{name: "context-window-zero", code: fail, want: []string{"mean(B08,0)", "window size"}, setup: feature("mean(B08, 0)")},
		{name: "context-window-even", code: fail, want: []string{"mean(B08,4)", "odd"}, setup: feature("mean(B08, 4)")},
		{name: "context-window-huge", code: fail, want: []string{"std(B08,999)", "3 to 31"}, setup: feature("std(B08, 999)")},
		{name: "context-unknown-band", code: fail, want: []string{"B99"}, setup: feature("range(B99, 7)")},
		{name: "context-no-window", code: fail, want: []string{"mean(B08)"}, setup: feature("mean(B08)")},
		{name: "context-unknown-function", code: fail, want: []string{"median(B08,7)"}, setup: feature("median(B08, 7)")},
		{name: "temporal-feature-missing-plane", code: fail, want: []string{"p10(ndvi)"}, setup: feature("p10(ndvi)")},
		{name: "feature-repeated", code: fail, want: []string{"ndvi"}, setup: feature("ndvi, ndvi")},
		// The evaluator's inputs.
		{name: "evaluate-prediction-text", code: fail, want: []string{"class.tif"}, setup: func(c *hcase) []string {
			p := c.file("class.tif", []byte("not a raster\n"))
			return []string{"evaluate", "--prediction", p, "--labels", c.w.stack + "/31TEJ/labels.tif", "--out", c.out()}
		}},
		{name: "evaluate-labels-missing", code: fail, want: []string{"nolabels.tif"}, setup: func(c *hcase) []string {
			return []string{"evaluate", "--prediction", c.w.stack + "/31TEJ/labels.tif", "--labels", c.path("nolabels.tif"), "--out", c.out()}
		}},
		{name: "evaluate-resampling-bogus", code: usage, want: []string{"cubic"}, setup: func(c *hcase) []string {
			return []string{"evaluate", "--prediction", c.w.stack + "/31TEJ/labels.tif", "--labels", c.w.stack + "/31TEJ/labels.tif", "--resampling", "cubic", "--out", c.out()}
		}},
		{name: "evaluate-sample-negative", code: usage, want: []string{"sample-per-class"}, setup: func(c *hcase) []string {
			return []string{"evaluate", "--prediction", c.w.stack + "/31TEJ/labels.tif", "--labels", c.w.stack + "/31TEJ/labels.tif", "--sample-per-class", "-5", "--out", c.out()}
		}},
		{name: "evaluate-stack-as-prediction", code: fail, want: []string{"stack.tif"}, setup: func(c *hcase) []string {
			return []string{"evaluate", "--prediction", c.w.stack + "/31TEJ/stack.tif", "--labels", c.w.stack + "/31TEJ/labels.tif", "--out", c.out()}
		}},
		// The exporter's inputs.
		{name: "export-model-truncated", code: fail, want: []string{"model.lulcrf"}, setup: func(c *hcase) []string {
			body, err := os.ReadFile(c.w.model)
			if err != nil {
				c.t.Fatal(err)
			}
			m := c.file("model.lulcrf", body[:len(body)/2])
			return []string{"export", "model", "--model", m, "--out", c.path("model.onnx")}
		}},
		{name: "export-samples-are-a-model", code: fail, want: []string{"model.lulcrf"}, setup: func(c *hcase) []string {
			return []string{"export", "samples", "--samples", c.w.model, "--out", c.path("samples.npz")}
		}},
		// Chips for deep learning and the maps that come back.
		{name: "export-chips-stride-zero", code: usage, want: []string{"--stride 0"}, setup: func(c *hcase) []string {
			return []string{"export", "chips", "--stack", c.w.stack, "--size", "64", "--stride", "0", "--out", c.out()}
		}},
		{name: "export-chips-larger-than-tile", code: fail, want: []string{"size 4096", "larger than tile 31TEJ"}, setup: func(c *hcase) []string {
			return []string{"export", "chips", "--stack", c.w.stack, "--size", "4096", "--out", c.out()}
		}},
		{name: "import-classes-unknown-tile", code: fail, want: []string{"--tile T9", "not a tile of the chips"}, setup: func(c *hcase) []string {
			chips := hostileChips(c)
			return []string{"import", "classes", "--chips", chips, "--tile", "T9", "--array", c.file("pred.npy", npyBytes(2, 2, 1)), "--out", c.path("out.tif")}
		}},
		{name: "import-classes-wrong-shape", code: fail, want: []string{"pred.npy is 2×2", "tile 31TEJ"}, setup: func(c *hcase) []string {
			chips := hostileChips(c)
			return []string{"import", "classes", "--chips", chips, "--tile", "31TEJ", "--array", c.file("pred.npy", npyBytes(2, 2, 1)), "--out", c.path("out.tif")}
		}},
		{name: "import-classes-not-npy", code: fail, want: []string{"pred.npy", "not a .npy file"}, setup: func(c *hcase) []string {
			chips := hostileChips(c)
			return []string{"import", "classes", "--chips", chips, "--tile", "31TEJ", "--array", c.file("pred.npy", []byte("1,2,3\n")), "--out", c.path("out.tif")}
		}},
		{name: "import-classes-over-a-file", code: fail, want: []string{"exists.tif", "--force"}, setup: func(c *hcase) []string {
			chips := hostileChips(c)
			return []string{"import", "classes", "--chips", chips, "--tile", "31TEJ", "--array", c.file("pred.npy", npyBytes(2, 2, 1)), "--out", c.file("exists.tif", []byte("mine\n"))}
		}},
		{name: "evaluate-split-wrong-shape", code: fail, want: []string{"--split", "2×3"}, setup: func(c *hcase) []string {
			l := c.w.stack + "/31TEJ/labels.tif"
			return []string{"evaluate", "--prediction", l, "--labels", l, "--split", c.file("split.npy", npyBytes(2, 3, 2)), "--out", c.out()}
		}},

		// Flags from the environment.
		// Loud: the runner's own -q would hide the environment's quiet flag.
		{name: "env-device-bogus", code: usage, want: []string{"tpu"}, loud: true, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_DEVICE", "tpu")
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.out()}
		}},
		{name: "env-quiet-not-bool", code: usage, want: []string{"LULC_QUIET", "maybe"}, loud: true, setup: env("LULC_QUIET", "maybe", "version")},
		{name: "env-window-not-number", code: usage, want: []string{"LULC_WINDOW", "wide"}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_WINDOW", "wide")
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.out()}
		}},
		// The comparison switches, read by the command line only: a value
		// a switch does not take, and a kernels file that is not there,
		// stop the command before it writes anything.
		{name: "env-switch-bogus", code: usage, want: []string{`LULC_DEVICE_DECODE="maybe"`, `"off"`}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_DEVICE_DECODE", "maybe")
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.out()}
		}},
		// The maps' switch is read by the command line too, before
		// anything is written.
		{name: "env-early-maps-bogus", code: usage, want: []string{`LULC_EARLY_MAPS="on"`, `"off"`}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_EARLY_MAPS", "on")
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.out()}
		}},
		// The CPU's remote read-ahead switch, on the command that ingests.
		{name: "env-remote-ahead-bogus", code: usage, want: []string{`LULC_REMOTE_AHEAD="no"`, `"off"`}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_REMOTE_AHEAD", "no")
			return []string{"ingest", "-c", "ingest-tiny.yaml", "--catalog", c.w.catalog, "--out", c.out()}
		}},
		{name: "env-map-mirror-bogus", code: usage, want: []string{`LULC_MAP_MIRROR="host"`, `"off"`}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_MAP_MIRROR", "host")
			return []string{"run", "-c", "run-demo.yaml", "--catalog", c.w.catalog, "--out", c.out()}
		}},
		// The device's switch for where a window's output pages are faulted in,
		// on a run that composites.
		{name: "env-touch-outputs-bogus", code: usage, want: []string{`LULC_TOUCH_OUTPUTS="on"`, `"off"`}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_TOUCH_OUTPUTS", "on")
			return []string{"run", "-c", "run-demo.yaml", "--catalog", c.w.catalog, "--out", c.out()}
		}},
		{name: "env-ptx-missing", code: usage, want: []string{"LULC_PTX", "no-such.ptx"}, setup: func(c *hcase) []string {
			c.t.Setenv("LULC_PTX", c.path("no-such.ptx"))
			return []string{"predict", "--model", c.w.model, "--input", c.w.stack, "--out", c.out()}
		}},
		// More dates than a composite's byte-wide valid count holds:
		// refused before a pixel is read, naming the limit.
		{name: "dates-over-255", code: exitFailure, want: []string{"31TEJ", "259 dates", "the 255 a composite takes", "narrow dates"}, setup: func(c *hcase) []string {
			cat := c.scene()
			itemPath := c.sceneFile("sentinel-2-l2a/*/S2*.json")
			body, err := os.ReadFile(itemPath)
			if err != nil {
				c.t.Fatal(err)
			}
			collPath := filepath.Join(filepath.Dir(cat), "sentinel-2-l2a", "collection.json")
			var coll map[string]any
			raw, _ := os.ReadFile(collPath)
			if err := json.Unmarshal(raw, &coll); err != nil {
				c.t.Fatal(err)
			}
			links := coll["links"].([]any)
			for d := range 256 {
				var it map[string]any
				json.Unmarshal(body, &it)
				it["id"] = fmt.Sprintf("copy-%03d", d)
				it["properties"].(map[string]any)["datetime"] = time.Date(2023, 1, 1, 10, 0, 0, 0, time.UTC).AddDate(0, 0, d).Format(time.RFC3339)
				out, _ := json.Marshal(it)
				name := fmt.Sprintf("copy-%03d.json", d)
				if err := os.WriteFile(filepath.Join(filepath.Dir(itemPath), name), out, 0o644); err != nil {
					c.t.Fatal(err)
				}
				rel, _ := filepath.Rel(filepath.Dir(collPath), filepath.Join(filepath.Dir(itemPath), name))
				links = append(links, map[string]any{"rel": "item", "href": "./" + rel, "type": "application/geo+json"})
			}
			coll["links"] = links
			out, _ := json.Marshal(coll)
			if err := os.WriteFile(collPath, out, 0o644); err != nil {
				c.t.Fatal(err)
			}
			cfg := c.config("ingest-tiny.yaml", "start: 2024-04-01", "start: 2023-01-01")
			return []string{"ingest", "-c", cfg, "--catalog", cat, "--out", c.out()}
		}},
		// The config command.
		{name: "config-show-unknown", code: usage, want: []string{"nosuch.yaml"}, setup: func(c *hcase) []string {
			return []string{"config", "show", "nosuch.yaml"}
		}},
	}
	runHostile(t, cases)
}

// TestHostileStaticCatalogOverHTTP reads a static catalog from servers
// that never send a document, or send one of its items byte by byte:
// go-stac's crawler has no timeout of its own, so these hung before
// source.request_timeout bounded every document.
func TestHostileStaticCatalogOverHTTP(t *testing.T) {
	ingest := func(c *hcase, catalog string) []string {
		cfg := netIngestConfig(c, "  limit: 100", "  limit: 100\n  request_timeout: 1s")
		return []string{"ingest", "--stall-timeout", netStall, "-c", cfg, "--catalog", catalog, "--out", c.out()}
	}
	// served serves the case's scene copy, the documents matching
	// pattern (relative to the scene) through b and the rest as they are.
	served := func(c *hcase, pattern string, b netBehaviour) string {
		dir := filepath.Dir(c.scene())
		return netServer(c.t, func(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
			rel := strings.TrimPrefix(r.URL.Path, "/")
			if ok, _ := filepath.Match(pattern, rel); ok {
				body, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
				b(w, r, body, stop)
				return
			}
			http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(rel)))
		}) + "/catalog.json"
	}
	item := "sentinel-2-l2a/*/S2*.json"
	cases := []hostile{
		{name: "catalog-silent", code: exitFailure, want: []string{"catalog.json", "did not arrive within 1s", "source.request_timeout"}, setup: func(c *hcase) []string {
			return ingest(c, "http://"+netSilent(c.t)+"/catalog.json")
		}},
		{name: "catalog-item-silent", code: exitFailure, want: []string{".json", "did not arrive within 1s"}, setup: func(c *hcase) []string {
			return ingest(c, served(c, item, netHeadersThenStall))
		}},
		{name: "catalog-item-trickle", code: exitFailure, want: []string{".json", "did not arrive within 1s"}, setup: func(c *hcase) []string {
			return ingest(c, served(c, item, netTrickle))
		}},
		{name: "catalog-collection-silent", code: exitFailure, want: []string{"collection.json", "did not arrive within 1s"}, setup: func(c *hcase) []string {
			return ingest(c, served(c, "*/collection.json", netHeadersThenStall))
		}},
		{name: "catalog-html", code: exitFailure, want: []string{"catalog.json"}, setup: func(c *hcase) []string {
			return ingest(c, served(c, "catalog.json", netHTML))
		}},
	}
	runHostile(t, cases)
}

// hostileChips exports chips of the hostile world's stack into the case's
// folder (64² chips of the per-pixel set), for the import cases.
func hostileChips(c *hcase) string {
	cfg := c.file("chips.yaml", []byte("features: per-pixel\n"))
	chips := c.path("chips")
	if code, _, stderr := lulc(c.t, "export", "chips", "-q", "-c", cfg, "--stack", c.w.stack, "--size", "64", "--out", chips); code != 0 {
		c.t.Fatalf("export chips: %s", stderr)
	}
	return chips
}

// npyBytes is a .npy file of a rows × cols uint8 array filled with v.
func npyBytes(rows, cols int, v byte) []byte {
	return append(npy.Header("|u1", []int{rows, cols}), bytes.Repeat([]byte{v}, rows*cols)...)
}
