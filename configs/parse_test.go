package configs_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/bench"
	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage/config"
)

// TestEmbeddedConfigsParse parses every checked-in config with its
// command's parser (predict configs are read by cmd/lulc and tested
// there), and every config a bench config names. It is an external test
// so that it can reach the parsers, whose packages import configs.
func TestEmbeddedConfigsParse(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 10 {
		t.Fatalf("found %d configs", len(files))
	}
	for _, name := range files {
		raw, err := configs.Read(name)
		if err != nil {
			t.Errorf("%s is not embedded: %v", name, err)
			continue
		}
		switch {
		case strings.HasPrefix(name, "synth-"):
			_, err = synth.ParseConfig(raw)
		case strings.HasPrefix(name, "ingest-"):
			_, err = config.ParseIngestConfig(raw)
		case strings.HasPrefix(name, "train-"):
			_, err = config.ParseTrainConfig(raw)
		case strings.HasPrefix(name, "bench-forest-"):
			_, err = bench.ParseForestConfig(raw)
		case strings.HasPrefix(name, "bench-"):
			var bc bench.Config
			if bc, err = bench.ParseConfig(raw); err == nil {
				err = namedConfigsParse(bc)
			}
		case strings.HasPrefix(name, "run-"):
			var rc pipeline.RunConfig
			if rc, err = pipeline.ParseRunConfig(raw); err == nil {
				err = runConfigsParse(rc)
			}
		case strings.HasPrefix(name, "predict-"):
			continue
		default:
			t.Errorf("%s: no parser for this kind of config", name)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// namedConfigsParse parses the synth, ingest and train configs a bench
// config names.
func namedConfigsParse(bc bench.Config) error {
	for _, c := range []struct {
		name  string
		parse func([]byte) error
	}{
		{bc.Synth, func(b []byte) error { _, err := synth.ParseConfig(b); return err }},
		{bc.Ingest, func(b []byte) error { _, err := config.ParseIngestConfig(b); return err }},
		{bc.Train, func(b []byte) error { _, err := config.ParseTrainConfig(b); return err }},
	} {
		if c.name == "" {
			continue
		}
		raw, err := configs.Read(c.name)
		if err == nil {
			err = c.parse(raw)
		}
		if err != nil {
			return errors.Join(errors.New(c.name), err)
		}
	}
	return nil
}

// runConfigsParse parses the ingest and train configs a run config names.
func runConfigsParse(rc pipeline.RunConfig) error {
	raw, err := configs.Find(rc.Ingest)
	if err == nil {
		_, err = config.ParseIngestConfig(raw)
	}
	if err != nil {
		return err
	}
	if raw, err = configs.Find(rc.Train); err == nil {
		_, err = config.ParseTrainConfig(raw)
	}
	return err
}
