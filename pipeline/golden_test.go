package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from this run's outputs (after a deliberate change: review the diff)")

// TestGoldenFormats pins the files lulc writes about a tile: the stack's
// manifest, STAC item and collection, the model's metrics, and the map's
// STAC item and collection, for the tiny synthetic scene through ingest,
// train and predict. Each must match testdata/golden byte for byte once
// what depends on where the run's temporary folders lie is masked
// (normalizeGolden). A change of format, or of the bytes of a raster (the
// items carry its checksum), fails here; `go test ./pipeline -run TestGoldenFormats -update` rewrites the
// files, and the diff is the change to review.
func TestGoldenFormats(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	out := t.TempDir()
	ctx := context.Background()
	opt := func(dir string) stage.Options {
		return stage.Options{Out: filepath.Join(out, dir), Version: "golden", Charts: drawer}
	}
	if _, err := ingest.Ingest(ctx, ingestConfig(t, filepath.Join(scene, "catalog.json")), opt("stack")); err != nil {
		t.Fatal(err)
	}
	tc := trainConfig(t, "train-demo.yaml", filepath.Join(out, "stack"))
	if _, err := train.Train(ctx, tc, opt("model")); err != nil {
		t.Fatal(err)
	}
	pc := predict.Config{Model: filepath.Join(out, "model", stage.ModelFile), Input: filepath.Join(out, "stack"), Window: 1024, Compress: "DEFLATE", Confidence: true}
	if _, err := predict.Predict(ctx, pc, opt("map")); err != nil {
		t.Fatal(err)
	}
	files := []string{
		"stack/31TEJ/manifest.json", "stack/31TEJ/stack-item.json", "stack/collection.json",
		"model/metrics.json",
		"map/31TEJ/item.json", "map/collection.json", "map/31TEJ/class.qml",
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") {
			// Paths and hashes of this run are masked; other formats
			// hold none.
			if got, err = normalizeGolden(got, scene, out); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		golden := filepath.Join("testdata", "golden", strings.ReplaceAll(f, "/", "_"))
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./pipeline -run TestGoldenFormats -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: a format or an output changed; if deliberately, rerun with -update and review the diff", f, golden)
		}
	}
}

// lulcID is a collection id lulc derives from a config's hash.
var lulcID = regexp.MustCompile(`^lulc-(stack-)?[0-9a-f]{12}$`)

// normalizeGolden masks what depends on where a run's temporary folders
// lie: the folders themselves (in paths and relative hrefs), the configs'
// hashes (their paths are in them), the collection ids made from those,
// and the checksums and sizes of JSON assets (which hold paths); the
// rasters' stay. It re-encodes the JSON with two-space indents.
func normalizeGolden(raw []byte, scene, out string) ([]byte, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	sceneDir := filepath.Base(filepath.Dir(scene))
	var walk func(v any, key string) any
	walk = func(v any, key string) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e, k)
			}
			if href, ok := x["href"].(string); ok && strings.HasSuffix(href, ".json") {
				if _, ok := x["file:checksum"]; ok {
					x["file:checksum"], x["file:size"] = "$JSON", "$JSON"
				}
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e, key)
			}
			return x
		case string:
			if key == "config_sha256" {
				return "$HASH"
			}
			if m := lulcID.FindStringSubmatch(x); m != nil {
				return "lulc-" + m[1] + "$ID"
			}
			x = strings.ReplaceAll(x, scene, "$SCENE")
			x = strings.ReplaceAll(x, out, "$OUT")
			return strings.ReplaceAll(x, sceneDir, "$SCENEDIR")
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	err := enc.Encode(walk(v, ""))
	return b.Bytes(), err
}
