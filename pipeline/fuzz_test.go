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
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed train config does not validate: %v", err)
			}
		}
		ParseRunConfig(raw)
	})
}
