package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/ingest"
)

// namedTile is a SourceTile that only has a name: eachTile needs no more.
type namedTile struct {
	ingest.SourceTile
	n string
}

func (t namedTile) Name() string { return t.n }

// TestEachTileInterrupted interrupts a run while its first tile maps, with
// one lane: the tiles not yet begun must not pass for mapped, so eachTile
// returns the context's error (a run that returned nil here committed a
// job with no maps).
func TestEachTileInterrupted(t *testing.T) {
	r := &runner{opt: stage.Options{}}
	tiles := []ingest.SourceTile{namedTile{n: "A"}, namedTile{n: "B"}, namedTile{n: "C"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var began []string
	err := r.eachTile(ctx, tiles, func(ctx context.Context, _ stage.Options, i int) error {
		began = append(began, tiles[i].Name())
		cancel() // the interrupt arrives while the tile maps; it finishes anyway
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("eachTile after an interrupt: %v, want context.Canceled", err)
	}
	if len(began) != 1 {
		t.Errorf("tiles begun after the interrupt: %v", began)
	}
}
