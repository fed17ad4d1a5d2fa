package forest

import (
	"context"
	"errors"
	"testing"
)

// countingEngine wraps the CPU grower and cancels a context once it has
// been asked for a number of levels' splits.
type countingEngine struct {
	Grower
	levels, cancelAt int
	cancel           func()
}

func (e *countingEngine) Splits(tasks []Task) ([]Split, error) {
	e.levels++
	if e.levels == e.cancelAt {
		e.cancel()
	}
	return e.Grower.Splits(tasks)
}

// TestGrowStopsWithinALevel interrupts a fit after its second level: Grow
// returns the context's error before asking the grower for a third.
func TestGrowStopsWithinALevel(t *testing.T) {
	t.Parallel()
	x, y := gaussians(3000, 6, 4, 2, 0.2, 3)
	p := Params{Trees: 4, MaxDepth: 12, MinSamplesLeaf: 1, Bins: 32, Bootstrap: true, Seed: 1}
	b, err := QuantileBins(x, 6, p.Bins, 100000, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	xb, _ := b.Bin(x, 6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &countingEngine{Grower: newGrower(xb, y, 4, p), cancelAt: 2, cancel: cancel}
	_, _, err = Grow(ctx, e, []uint64{0}, 4, 6, p)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("grow after an interrupt: %v, want context.Canceled", err)
	}
	if e.levels != 2 {
		t.Errorf("the engine was asked for %d levels; the interrupt came after 2", e.levels)
	}
	// Uninterrupted, the same tree grows past two levels: the test above
	// stopped something.
	full := &countingEngine{Grower: newGrower(xb, y, 4, p), cancel: func() {}}
	if _, _, err := Grow(context.Background(), full, []uint64{0}, 4, 6, p); err != nil || full.levels <= 2 {
		t.Fatalf("uninterrupted grow: %v after %d levels", err, full.levels)
	}
}

// TestTrainInterrupted: an interrupted Train returns the context's error,
// never a forest of the trees grown so far.
func TestTrainInterrupted(t *testing.T) {
	t.Parallel()
	x, y := gaussians(2000, 5, 3, 2, 0.1, 5)
	p := Params{Trees: 50, MaxDepth: 10, MinSamplesLeaf: 1, Bins: 32, Bootstrap: true, Seed: 2}
	b, _ := QuantileBins(x, 5, p.Bins, 100000, p.Seed)
	xb, _ := b.Bin(x, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := Train(ctx, xb, y, 3, p, 2)
	if !errors.Is(err, context.Canceled) || f != nil {
		t.Fatalf("interrupted train: %v (forest %v), want context.Canceled and no forest", err, f != nil)
	}
}
