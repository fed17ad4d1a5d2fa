package stage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// Example maps land cover from a STAC catalog the way lulc's staged
// commands do, from Go: ingest the catalog into an analysis-ready stack,
// train a forest on the stack, map the tile with the model, then read
// the model and the stack's manifest back. The catalog is a tiny
// synthetic scene (configs/synth-tiny.yaml); the configs are the embedded
// ones `lulc ingest`, `lulc train` and `lulc predict` start from.
func Example() {
	dir, err := os.MkdirTemp("", "lulc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	// The scene: Sentinel-2 L2A COGs, ESA WorldCover labels, a STAC catalog.
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		log.Fatal(err)
	}
	scfg, err := synth.ParseConfig(raw)
	if err != nil {
		log.Fatal(err)
	}
	scene := filepath.Join(dir, "scene")
	if _, err := synth.Run(ctx, scfg, synth.Options{Out: scene, Log: quiet}); err != nil {
		log.Fatal(err)
	}

	// Ingest: find the scenes, read and align the bands, mask clouds,
	// composite, write the stack with its labels.
	raw, err = configs.Read("ingest-tiny.yaml")
	if err != nil {
		log.Fatal(err)
	}
	icfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		log.Fatal(err)
	}
	icfg.Source.Catalog = filepath.Join(scene, "catalog.json")
	stack := filepath.Join(dir, "stack")
	ing, err := ingest.Ingest(ctx, icfg, stage.Options{Out: stack, Log: quiet, Version: "example"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tiles:", len(ing.Tiles), ing.Tiles[0].Tile)

	// Train from the stack.
	raw, err = configs.Read("train-demo.yaml")
	if err != nil {
		log.Fatal(err)
	}
	tcfg, err := config.ParseTrainConfig(raw)
	if err != nil {
		log.Fatal(err)
	}
	tcfg.Input.Stack = stack
	model := filepath.Join(dir, "model")
	tr, err := train.Train(ctx, tcfg, stage.Options{Out: model, Log: quiet, Version: "example"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("trained on", tr.Engine, "with validation rows:", tr.Validation > 0)

	// Map the tile.
	mapped := filepath.Join(dir, "map")
	pr, err := predict.Predict(ctx, predict.Config{Model: filepath.Join(model, stage.ModelFile), Input: stack, Window: 1024, Compress: "DEFLATE"},
		stage.Options{Out: mapped, Log: quiet, Version: "example"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("mapped:", filepath.Base(pr.Tiles[0].Class), pr.Tiles[0].Pixels, "pixels")

	// Read the model back: its features and classes.
	m, _, err := predict.LoadModel(filepath.Join(model, stage.ModelFile))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("model:", len(m.Features), "features,", len(m.Forest.Trees), "trees")

	// Read the stack's manifest: a JSON file beside stack.tif.
	b, err := os.ReadFile(filepath.Join(stack, ing.Tiles[0].Tile, "manifest.json"))
	if err != nil {
		log.Fatal(err)
	}
	var manifest struct {
		Tile  string   `json:"tile"`
		Bands []string `json:"bands"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		log.Fatal(err)
	}
	fmt.Println("manifest:", manifest.Tile, manifest.Bands)
	// Output:
	// tiles: 1 31TEJ
	// trained on lulc with validation rows: true
	// mapped: class.tif 63504 pixels
	// model: 56 features, 100 trees
	// manifest: 31TEJ [B02 B03 B04 B08 B05 B06 B07 B8A B11 B12]
}
