package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/stage/config"
)

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
			// A config without input (features: default; or a document
			// that sets nothing, such as a bare tag) is for lulc run or
			// lulc train --stack, which give it one: its training part
			// must validate, and the whole once it names an input.
			if err := c.ValidateTraining(); err != nil {
				t.Fatalf("parsed train config does not validate: %v", err)
			}
			if in := c.Input; in.Stack != "" || len(in.Rasters) > 0 || len(in.Samples) > 0 {
				if err := c.Validate(); err != nil {
					t.Fatalf("parsed train config with an input does not validate: %v", err)
				}
			}
		}
		ParseRunConfig(raw)
	})
}
