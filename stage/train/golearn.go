package train

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// fitGolearn trains golearn's forest (train config engine: golearn, the
// CPU baseline the workflow compares with) on at most golearn.max_samples
// of the training rows, and classifies the validation rows. golearn's
// forests are not lulc models: nothing is saved.
func fitGolearn(ctx context.Context, cfg config.TrainConfig, classes, nf int, sp split, fit stage.Golearn, res *Result) ([]uint8, error) {
	if fit == nil {
		return nil, fmt.Errorf("engine: golearn is not linked into this program (stage.Options.Golearn)")
	}
	t0 := time.Now()
	xt, yt, xv := sp.xt, sp.yt, sp.xv
	g := cfg.Golearn
	xs, ys := subsample(xt, yt, nf, g.MaxSamples, cfg.Sampling.Seed)
	if len(ys) < len(yt) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("golearn trained on a seeded subset of %d of %d training samples (golearn.max_samples)", len(ys), len(yt)))
	}
	f, err := interruptible(ctx, func() (stage.GolearnForest, error) {
		return fit(xs, nf, ys, classes, g.Trees, g.FeaturesPerTree, int64(cfg.Sampling.Seed))
	})
	if err != nil {
		return nil, err
	}
	res.Fit = time.Since(t0)
	return f.Predict(xv, nf)
}

// subsample returns at most n rows, chosen by seeded hash, in their order.
func subsample(x []float32, y []uint8, nf, n int, seed uint64) ([]float32, []uint8) {
	if len(y) <= n {
		return x, y
	}
	// The n rows with the smallest seeded hashes: hashed once each.
	keys := make([]uint64, len(y))
	idx := make([]int, len(y))
	for i := range idx {
		idx[i], keys[i] = i, rng.Hash(seed, 0x601e, uint64(i))
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	idx = idx[:n]
	slices.Sort(idx)
	xs := make([]float32, 0, n*nf)
	ys := make([]uint8, 0, n)
	for _, i := range idx {
		xs = append(xs, x[i*nf:(i+1)*nf]...)
		ys = append(ys, y[i])
	}
	return xs, ys
}

// interruptible runs f, which cannot be stopped (golearn's fit takes no
// context), and returns its result, or ctx's error at once when ctx is
// done first. f then runs on unobserved until the process, which is
// exiting on the interrupt, ends.
func interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
