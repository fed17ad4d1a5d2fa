package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// FuzzParseManifest feeds parseManifest mutated manifests, seeded with a
// real one: it must return an error or a manifest whose grid, bands and
// scaling later stages can use, never panic.
func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(stage.Manifest{Tile: "31TEJ", Bands: []string{"B02", "B04", "B08"}, Scale: stage.StackScale, Offset: stage.StackOffset,
		Grid: stage.ManifestGrid{EPSG: 32631, Transform: [6]float64{499980, 10, 0, 5000040, 0, -10}, Width: 252, Height: 252}})
	if _, err := stage.ParseManifest(good); err != nil {
		f.Fatalf("a good manifest is refused: %v", err)
	}
	f.Add(good)
	f.Add([]byte(`{"tile": "x", "grid": {"width": -1}}`))
	f.Add([]byte(`{"tile": "../x", "grid": {"width": 10, "height": 10, "geotransform": [0, 10, 0, 0, 0, -10]}, "bands": ["B04"], "scale": 1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := stage.ParseManifest(raw)
		if err != nil {
			return
		}
		if m.Grid.Width <= 0 || m.Grid.Height <= 0 || float64(m.Grid.Width)*float64(m.Grid.Height) > stage.MaxGridPixels || len(m.Bands) == 0 || m.Scale == 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzParseConfigs feeds every config parser of the pipeline mutated
// YAML, seeded with the embedded configs: each must return an error or a
// valid config, never panic.
func FuzzParseConfigs(f *testing.F) {
	for _, name := range []string{"ingest-tiny.yaml", "ingest-real-sample.yaml", "ingest-earth-search.yaml", "train-demo.yaml", "train-real.yaml", "run-demo.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "configs", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if c, err := config.ParseIngestConfig(raw); err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed ingest config does not validate: %v", err)
			}
		}
		if c, err := config.ParseTrainConfig(raw); err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed train config does not validate: %v", err)
			}
		}
		ParseRunConfig(raw)
	})
}
