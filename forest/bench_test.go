package forest

import (
	"fmt"
	"testing"
)

// BenchmarkTrain fits the reference forest (100 trees, max_depth
// 16, sqrt features, bootstrap, 128 bins) on n rows × 16 Gaussian features
// of 10 classes with 5 % label noise, and reports validation accuracy on
// 20 % held out. Sizes: set with -bench 'Train/rows=1000000'.
func BenchmarkTrain(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			const nf, k = 16, 10
			x, y := gaussians(n+n/4, nf, k, 1.0, 0.05, 9)
			p := Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
			bins, _ := QuantileBins(x[:n*nf], nf, p.Bins, 200_000, p.Seed)
			xb, _ := bins.Bin(x[:n*nf], nf)
			xv, _ := bins.Bin(x[n*nf:], nf)
			var f *Forest
			for b.Loop() {
				var err error
				if f, err = Train(xb, y[:n], k, p, 0); err != nil {
					b.Fatal(err)
				}
			}
			cls, _, _ := f.Classify(xv)
			ok := 0
			for i, c := range cls {
				if c == y[n+i] {
					ok++
				}
			}
			nodes, _ := f.Nodes()
			b.ReportMetric(float64(ok)/float64(len(cls)), "val-acc")
			b.ReportMetric(float64(nodes)/float64(p.Trees), "nodes/tree")
		})
	}
}
