package forest

import (
	"context"
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
				if f, err = Train(context.Background(), xb, y[:n], k, p, 0); err != nil {
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

// BenchmarkModelDecode measures loading a 100-tree, depth-16 model trained
// on 100,000 rows, and reports its size.
func BenchmarkModelDecode(b *testing.B) {
	const nf, k = 16, 10
	x, y := gaussians(100_000, nf, k, 1.0, 0.05, 9)
	p := Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
	bins, _ := QuantileBins(x, nf, p.Bins, 200_000, p.Seed)
	xb, _ := bins.Bin(x, nf)
	f, err := Train(context.Background(), xb, y, k, p, 0)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, nf)
	classes := make([]Class, k)
	for i := range names {
		names[i] = fmt.Sprint("f", i)
	}
	for i := range classes {
		classes[i] = Class{Code: uint8(10 * (i + 1)), Name: fmt.Sprint("c", i), Color: "#000000"}
	}
	m := &Model{Features: names, Bands: names, Classes: classes, Params: p, Bins: bins, Forest: f}
	data, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
	nodes, _ := f.Nodes()
	b.ReportMetric(float64(len(data))/1e6, "MB")
	b.ReportMetric(float64(len(data))/float64(nodes), "bytes/node")
}

// BenchmarkClassify predicts 200,000 rows with a 100-tree, depth-16 forest
// fitted on 100,000 rows of 16 or 56 features (lulc's default set) and 10
// classes, with the scalar walk and, where the CPU has AVX-512, the vector
// walk, side by side.
func BenchmarkClassify(b *testing.B) {
	here := vectorWalk
	b.Cleanup(func() { vectorWalk = here })
	for _, nf := range []int{16, 56} {
		const k = 10
		x, y := gaussians(300_000, nf, k, 1.0, 0.05, 9)
		p := Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
		bins, _ := QuantileBins(x[:100_000*nf], nf, p.Bins, 200_000, p.Seed)
		xb, _ := bins.Bin(x[:100_000*nf], nf)
		f, err := Train(context.Background(), xb, y[:100_000], k, p, 0)
		if err != nil {
			b.Fatal(err)
		}
		xp, _ := bins.Bin(x[100_000*nf:], nf)
		for _, vector := range []bool{false, true} {
			if vector && !here {
				continue
			}
			walk := map[bool]string{false: "scalar", true: "vector"}[vector]
			b.Run(fmt.Sprintf("features=%d/walk=%s", nf, walk), func(b *testing.B) {
				vectorWalk = vector
				c := f.Compile()
				for b.Loop() {
					if _, _, err := c.Classify(xp); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(xp.N)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
			})
		}
	}
}

// BenchmarkBin codes 1,000,000 rows of 16 Gaussian features against 127
// quantile edges each, on every core.
func BenchmarkBin(b *testing.B) { benchBin(b, 16, 1_000_000) }

// benchBin codes n rows of nf Gaussian features against 127 quantile
// edges each, on every core.
func benchBin(b *testing.B, nf, n int) {
	x, _ := gaussians(n, nf, 4, 1.0, 0.05, 3)
	bins, err := QuantileBins(x, nf, 128, 200_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := bins.Bin(x, nf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*nf)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcodes/s")
}

// BenchmarkQuantileBins finds 127 edges for each of 56 features from a
// sample of 200,000 of 800,000 rows, the full tile's training set, on
// every core.
func BenchmarkQuantileBins(b *testing.B) {
	const nf, n = 56, 800_000
	x, _ := gaussians(n, nf, 4, 1.0, 0.05, 3)
	for b.Loop() {
		if _, err := QuantileBins(x, nf, 128, 200_000, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBinTile codes the full tile's training set, 800,000 rows of 56
// features, on every core.
func BenchmarkBinTile(b *testing.B) { benchBin(b, 56, 800_000) }

// BenchmarkCodeAll codes a plane of 1,000,000 Gaussian values against 127
// quantile edges, one value at a time (Code) and by CodeAll, side by
// side.
func BenchmarkCodeAll(b *testing.B) {
	x, _ := gaussians(1_000_000, 1, 4, 1.0, 0.05, 3)
	bins, err := QuantileBins(x, 1, 128, 200_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	keys, out := bins.Keys(0), make([]uint8, len(x))
	b.Run("by=Code", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				out[i] = keys.Code(v)
			}
		}
		b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
	})
	b.Run("by=CodeAll", func(b *testing.B) {
		for b.Loop() {
			keys.CodeAll(x, out)
		}
		b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
	})
}
