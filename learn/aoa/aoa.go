// Package aoa is the area of applicability of a model (Meyer & Pebesma
// 2021, "Predicting into unknown space? Estimating the area of
// applicability of spatial prediction models", Methods in Ecology and
// Evolution 12, doi:10.1111/2041-210X.13650, as the CAST R package's
// trainDI and aoa compute it): how far a pixel's features lie from the
// training data's, and whether that is farther than the training data
// lie from each other under cross-validation.
//
// Build turns a model's training samples into a Reference: features
// standardised by the samples' means and standard deviations and
// weighted by the forest's importance, the samples' mean distance to
// each other, and the threshold: the upper whisker of the training
// samples' own dissimilarity indices, each taken to the nearest training
// sample outside its cross-validation fold. A pixel's dissimilarity index
// (DI) is its distance to the nearest training sample divided by the mean
// distance; it lies inside the area of applicability when its DI is at
// most the threshold.
//
// The arithmetic is defined so that the CPU (here) and the GPU (package
// cuda's aoa_near and aoa_finish kernels) give the same bits: every step in float64, in the
// order of Transform and Reference.Nearest, each multiplication and
// addition rounded on its own (no fused multiply-add), the DI rounded to
// float32 once. Only the nearest distance is kept, never which sample
// it belongs to, so ties need no rule: equal distances are one value.
// On amd64 CPUs with AVX-512 brute force runs eight points at a time in
// assembly (nearest_amd64.s), each point's terms summed in the same order.
package aoa

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// DefaultMaxPoints is the default cap on a Reference's training points.
const DefaultMaxPoints = 20000

// Reference is what the dissimilarity index needs of the training data.
// Points are the training samples, standardised and weighted (Transform),
// N × F row-major; they travel in the model file beside the forest.
type Reference struct {
	// Mean and SD are the training points' per-feature mean and sample
	// standard deviation (n − 1); Weight the importance each feature's
	// standardised value is multiplied by (0 for a feature without
	// variance in the training points).
	Mean   []float64 `json:"mean"`
	SD     []float64 `json:"sd"`
	Weight []float64 `json:"weight"`
	// Scale is Weight / SD (0 where Weight is 0), the factor Transform
	// applies: one multiplication rather than a division and a
	// multiplication.
	Scale []float64 `json:"scale"`
	// MeanDistance is the mean distance between two distinct training
	// points, the DI's unit.
	MeanDistance float64 `json:"mean_distance"`
	// Threshold is the largest DI inside the area of applicability: Q3 +
	// 1.5 × IQR of the training points' cross-validation DIs, at most
	// their maximum.
	Threshold float64 `json:"threshold"`
	// Folds says how the cross-validation folds were made; Training is
	// how many usable training samples there were before the cap.
	Folds    string `json:"folds"`
	Training int    `json:"training_samples"`
	// N is the number of points; Points are not in the JSON.
	N      int       `json:"points"`
	Points []float64 `json:"-"`
}

// Features is the number of features a Reference describes.
func (r *Reference) Features() int { return len(r.Mean) }

// Check verifies a decoded Reference is well formed for nf features.
func (r *Reference) Check(nf int) error {
	switch {
	case len(r.Mean) != nf || len(r.SD) != nf || len(r.Weight) != nf || len(r.Scale) != nf:
		return fmt.Errorf("aoa: %d/%d/%d/%d means, sds, weights and scales for %d features", len(r.Mean), len(r.SD), len(r.Weight), len(r.Scale), nf)
	case r.N < 2 || len(r.Points) != r.N*nf:
		return fmt.Errorf("aoa: %d points with %d values for %d features", r.N, len(r.Points), nf)
	case !(r.MeanDistance > 0) || math.IsInf(r.MeanDistance, 0):
		return fmt.Errorf("aoa: mean distance %g", r.MeanDistance)
	case !(r.Threshold >= 0) || math.IsInf(r.Threshold, 0):
		return fmt.Errorf("aoa: threshold %g", r.Threshold)
	}
	for _, v := range r.Points {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("aoa: a point is not finite")
		}
	}
	return nil
}

// Sample is one training sample for Build: its features, its
// cross-validation fold and the seeded key that orders the cap.
type Sample struct {
	X    []float32
	Fold uint64
	Key  uint64
}

// Build makes the Reference of training samples (at least two, in at
// least two folds) with nf features and the forest's importance per
// feature. Samples with a missing (NaN) feature are left out; of the
// rest, the maxPoints with the smallest keys are kept, in their order.
// folds describes the fold rule for the record. measure measures the
// points among themselves (nil: CPUPairs, on every core; the GPU's twin
// gives the same bits). Once ctx is done (an interrupt) the pairwise
// distances stop at their next row and Build returns ctx's error.
func Build(ctx context.Context, samples []Sample, nf int, importance []float64, maxPoints int, folds string, measure Pairs) (*Reference, error) {
	if measure == nil {
		measure = CPUPairs
	}
	if len(importance) != nf {
		return nil, fmt.Errorf("aoa: %d importances for %d features", len(importance), nf)
	}
	if maxPoints < 2 {
		return nil, fmt.Errorf("aoa: a cap of %d points (at least 2)", maxPoints)
	}
	var use []int
	for i, s := range samples {
		if len(s.X) != nf {
			return nil, fmt.Errorf("aoa: sample %d has %d features, not %d", i, len(s.X), nf)
		}
		if !slices.ContainsFunc(s.X, func(v float32) bool { return v != v }) {
			use = append(use, i)
		}
	}
	training := len(use)
	if len(use) > maxPoints {
		use = smallestKeys(samples, use, maxPoints)
	}
	n := len(use)
	if n < 2 {
		return nil, fmt.Errorf("aoa: %d training samples without missing features (at least 2)", n)
	}
	r := &Reference{Mean: make([]float64, nf), SD: make([]float64, nf), Weight: make([]float64, nf), Scale: make([]float64, nf),
		Folds: folds, Training: training, N: n}
	for f := range nf {
		var sum float64
		for _, i := range use {
			sum += float64(samples[i].X[f])
		}
		mean := sum / float64(n)
		var ss float64
		for _, i := range use {
			d := float64(samples[i].X[f]) - mean
			ss += float64(d * d)
		}
		r.Mean[f], r.SD[f] = mean, math.Sqrt(ss/float64(n-1))
	}
	// Negative importance counts as none (as CAST sets negative weights to
	// 0); a forest with no importance at all weights every feature alike.
	total := 0.0
	for f, w := range importance {
		if w > 0 && !math.IsInf(w, 0) {
			r.Weight[f] = w
			total += w
		}
	}
	for f := range nf {
		if total == 0 {
			r.Weight[f] = 1
		}
		// A feature without variance among the training points tells them
		// nothing apart and cannot be standardised: it is left out.
		if r.SD[f] == 0 {
			r.Weight[f] = 0
		}
		if r.Weight[f] != 0 {
			r.Scale[f] = r.Weight[f] / r.SD[f]
		}
	}
	r.Points = make([]float64, n*nf)
	fold := make([]uint64, n)
	for k, i := range use {
		r.Transform(samples[i].X, r.Points[k*nf:(k+1)*nf])
		fold[k] = samples[i].Fold
	}
	sum, cv, err := measure(ctx, r.Points, nf, fold)
	if err != nil {
		return nil, fmt.Errorf("aoa: %w", err)
	}
	r.MeanDistance = sum / (float64(n) * float64(n-1) / 2)
	if !(r.MeanDistance > 0) {
		return nil, errors.New("aoa: the training samples are all alike in the weighted features: no distance to measure by")
	}
	var di []float64
	for _, d2 := range cv {
		if !math.IsInf(d2, 1) {
			di = append(di, math.Sqrt(d2)/r.MeanDistance)
		}
	}
	if len(di) == 0 {
		return nil, fmt.Errorf("aoa: the %d training samples are all in one cross-validation fold (%s)", n, folds)
	}
	r.Threshold = Threshold(di)
	return r, nil
}

// smallestKeys keeps the k samples of use with the smallest keys (ties:
// the earlier sample), back in the samples' order: the same points
// whatever order the samples came in, as a stable sort by key would keep,
// found with a heap of k (n log k) rather than a sort of all of them.
func smallestKeys(samples []Sample, use []int, k int) []int {
	// after says whether sample a comes after b in (key, index) order.
	after := func(a, b int) bool {
		if c := cmp.Compare(samples[a].Key, samples[b].Key); c != 0 {
			return c > 0
		}
		return a > b
	}
	// h is a max-heap of the k smallest so far: its root the largest.
	h := slices.Clone(use[:k])
	down := func(i int) {
		for {
			l, big := 2*i+1, i
			if l < k && after(h[l], h[big]) {
				big = l
			}
			if r := l + 1; r < k && after(h[r], h[big]) {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, s := range use[k:] {
		if after(h[0], s) {
			h[0] = s
			down(0)
		}
	}
	slices.Sort(h)
	return h
}

// Pairs measures n training points (p: n × nf, row-major, transformed)
// among themselves: the sum of the distances of every pair, and each
// point's squared distance to the nearest point of another fold (fold:
// one per point; +Inf when none). CPUPairs is the specification.
type Pairs func(ctx context.Context, p []float64, nf int, fold []uint64) (sum float64, cv []float64, err error)

// CPUPairs is Pairs on every core (pairs); its error is ctx's.
func CPUPairs(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64, error) {
	sum, cv := pairs(ctx, p, nf, fold)
	return sum, cv, ctx.Err()
}

// SumRows adds the rows' sums of distances in row order, as pairs does:
// a twin that measures the rows elsewhere sums them with it.
func SumRows(rows []float64) float64 {
	var sum float64
	for _, s := range rows {
		sum += s
	}
	return sum
}

// pairs measures every pair of points once, on every core: the sum of
// their distances (rows summed in order, then the rows' sums in order, so
// the sum does not depend on scheduling) and each point's squared
// distance to the nearest point of another fold (+Inf when none).
func pairs(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64) {
	n := len(fold)
	rows := make([]float64, n)
	cv := make([]float64, n)
	for i := range cv {
		cv[i] = math.Inf(1)
	}
	// Each worker keeps its own minima; they are merged after (min does
	// not depend on order).
	workers := runtime.GOMAXPROCS(0)
	mins := make([][]float64, workers)
	var next sync.Mutex
	row := 0
	var wg sync.WaitGroup
	for w := range workers {
		mins[w] = slices.Clone(cv)
		wg.Go(func() {
			m := mins[w]
			for {
				next.Lock()
				i := row
				row++
				next.Unlock()
				if i >= n || ctx.Err() != nil {
					return
				}
				pi := p[i*nf : (i+1)*nf]
				var s float64
				for j := i + 1; j < n; j++ {
					d2 := dist2(pi, p[j*nf:(j+1)*nf])
					s += math.Sqrt(d2)
					if fold[i] != fold[j] {
						m[i] = min(m[i], d2)
						m[j] = min(m[j], d2)
					}
				}
				rows[i] = s
			}
		})
	}
	wg.Wait()
	sum := SumRows(rows)
	for _, m := range mins {
		for i, v := range m {
			cv[i] = min(cv[i], v)
		}
	}
	return sum, cv
}

// Threshold is the upper whisker of the training DIs as CAST's trainDI
// takes it: the third quartile plus 1.5 times the interquartile range,
// the quartiles as R's quantile type 7 (linear between order
// statistics), and at most the largest DI (earlier CAST versions took
// grDevices::boxplot.stats' whisker, the largest DI within that fence).
// di is sorted in place.
func Threshold(di []float64) float64 {
	slices.Sort(di)
	q1, q3 := quantile(di, 0.25), quantile(di, 0.75)
	return min(q3+1.5*(q3-q1), di[len(di)-1])
}

// quantile is R's type-7 quantile of sorted values.
func quantile(s []float64, p float64) float64 {
	h := float64(len(s)-1) * p
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// Transform standardises and weights one pixel's features into z:
// z[f] = (float64(x[f]) − Mean[f]) × Scale[f], each operation rounded to
// float64 on its own.
func (r *Reference) Transform(x []float32, z []float64) {
	for f, v := range x {
		d := float64(v) - r.Mean[f]
		z[f] = float64(d * r.Scale[f])
	}
}

// dist2 is the squared distance of two transformed points: the squares of
// their differences added in feature order from 0, each product and sum
// rounded on its own (the explicit conversions keep Go from fusing them).
func dist2(a, b []float64) float64 {
	var s float64
	for f, v := range a {
		d := v - b[f]
		s = float64(s + float64(d*d))
	}
	return s
}

// DI is the dissimilarity index of a pixel whose nearest training point
// lies at squared distance d2, rounded once to float32.
func (r *Reference) DI(d2 float64) float32 {
	return float32(math.Sqrt(d2) / r.MeanDistance)
}

// Inside says whether a DI lies inside the area of applicability: the
// stored float32 DI, widened back to float64, is at most Threshold.
func (r *Reference) Inside(di float32) bool { return float64(di) <= r.Threshold }
