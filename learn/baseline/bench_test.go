package baseline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/learn/forest"
)

// gaussians: n rows × nf features of k Gaussian classes with 5 % label
// noise, the data of docs/anchors.md, seeded.
func gaussians(n, nf, k int, seed uint64) ([]float32, []uint8) {
	r := rand.New(rand.NewPCG(seed, 7))
	centres := make([][]float64, k)
	for c := range centres {
		centres[c] = make([]float64, nf)
		for f := range nf {
			centres[c][f] = r.NormFloat64()
		}
	}
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		c := r.IntN(k)
		for f := range nf {
			x[i*nf+f] = float32(centres[c][f] + r.NormFloat64())
		}
		if r.Float64() < 0.05 {
			c = r.IntN(k)
		}
		y[i] = uint8(c)
	}
	return x, y
}

// BenchmarkVsGolearn trains golearn's forest and lulc's on the same rows
// (16 Gaussian features, 10 classes, 5 % label noise; 100 trees; golearn
// with 4 features per tree, lulc with sqrt = 4 per node, max_depth 16, 128
// bins) and reports validation accuracy on 20 % more rows.
func BenchmarkVsGolearn(b *testing.B) {
	const nf, k = 16, 10
	for _, n := range []int{10_000, 50_000} {
		x, y := gaussians(n+n/4, nf, k, 3)
		xt, yt, xv, yv := x[:n*nf], y[:n], x[n*nf:], y[n:]
		acc := func(pred []uint8) float64 {
			ok := 0
			for i, p := range pred {
				if p == yv[i] {
					ok++
				}
			}
			return float64(ok) / float64(len(yv))
		}
		b.Run(fmt.Sprintf("rows=%d/engine=golearn", n), func(b *testing.B) {
			var f *Forest
			for b.Loop() {
				var err error
				if f, err = Train(xt, nf, yt, k, 100, 4, 1); err != nil {
					b.Fatal(err)
				}
			}
			pred, err := f.Predict(xv, nf)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(acc(pred), "val-acc")
		})
		b.Run(fmt.Sprintf("rows=%d/engine=lulc", n), func(b *testing.B) {
			p := forest.Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
			var f *forest.Forest
			var bins *forest.Bins
			for b.Loop() {
				bins, _ = forest.QuantileBins(xt, nf, p.Bins, 200_000, p.Seed)
				xb, _ := bins.Bin(xt, nf)
				var err error
				if f, err = forest.Train(context.Background(), xb, yt, k, p, 0); err != nil {
					b.Fatal(err)
				}
			}
			vb, _ := bins.Bin(xv, nf)
			pred, _, _ := f.Classify(vb)
			b.ReportMetric(acc(pred), "val-acc")
		})
	}
}
