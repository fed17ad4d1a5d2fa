package aoa

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomSamples makes n samples of nf features in folds folds, clustered
// so that distances vary.
func randomSamples(n, nf, folds int, seed uint64) []Sample {
	r := rand.New(rand.NewPCG(seed, 1))
	s := make([]Sample, n)
	for i := range s {
		x := make([]float32, nf)
		c := float32(r.IntN(4))
		for f := range x {
			x[f] = c*float32(f+1) + float32(r.NormFloat64())*0.3
		}
		s[i] = Sample{X: x, Fold: uint64(r.IntN(folds)), Key: r.Uint64()}
	}
	return s
}

// naive is the reference computed the way CAST's trainDI writes it out:
// every distance in both directions, the mean of each point's mean
// distance, the minimum outside the fold.
func naive(t *testing.T, r *Reference, fold []uint64) (meanDist float64, di []float64) {
	n, nf := r.N, r.Features()
	var avg []float64
	for i := range n {
		var s float64
		best := math.Inf(1)
		for j := range n {
			if j == i {
				continue
			}
			d := 0.0
			for f := range nf {
				e := r.Points[i*nf+f] - r.Points[j*nf+f]
				d += e * e
			}
			d = math.Sqrt(d)
			s += d
			if fold[i] != fold[j] {
				best = min(best, d)
			}
		}
		avg = append(avg, s/float64(n-1))
		di = append(di, best)
	}
	for _, a := range avg {
		meanDist += a / float64(n)
	}
	for i := range di {
		di[i] /= meanDist
	}
	return meanDist, di
}

func TestBuildMatchesDefinition(t *testing.T) {
	t.Parallel()
	s := randomSamples(300, 5, 6, 1)
	imp := []float64{0.4, 0.1, 0.3, -0.2, 0.2}
	r, err := Build(context.Background(), s, 5, imp, 1000, "test folds", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 300 || r.Training != 300 || r.Weight[3] != 0 {
		t.Fatalf("N %d, training %d, weights %v", r.N, r.Training, r.Weight)
	}
	// Standardisation: the points' weighted features have mean 0 and
	// standard deviation equal to their weight.
	for f := range 5 {
		var m, ss float64
		for i := range r.N {
			m += r.Points[i*5+f]
		}
		m /= float64(r.N)
		for i := range r.N {
			ss += (r.Points[i*5+f] - m) * (r.Points[i*5+f] - m)
		}
		if sd := math.Sqrt(ss / float64(r.N-1)); math.Abs(m) > 1e-9 || math.Abs(sd-r.Weight[f]) > 1e-9 {
			t.Errorf("feature %d: mean %g, sd %g, weight %g", f, m, sd, r.Weight[f])
		}
	}
	folds := make([]uint64, len(s))
	for i := range s {
		folds[i] = s[i].Fold
	}
	md, di := naive(t, r, folds)
	if math.Abs(md-r.MeanDistance) > 1e-12*md {
		t.Errorf("mean distance %g, by definition %g", r.MeanDistance, md)
	}
	if th := Threshold(di); math.Abs(th-r.Threshold) > 1e-12 {
		t.Errorf("threshold %g, by definition %g", r.Threshold, th)
	}
}

func TestThresholdIsRType7Whisker(t *testing.T) {
	t.Parallel()
	// R: quantile(c(1:9, 100), c(.25, .75)) is 3.25, 7.75: the fence is
	// 7.75 + 1.5 × 4.5 = 14.5.
	v := []float64{100, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if got := Threshold(v); got != 14.5 {
		t.Errorf("threshold %g, want 14.5", got)
	}
	// Without an outlier the fence passes the maximum, which caps it.
	if got := Threshold([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); got != 10 {
		t.Errorf("threshold %g, want 10", got)
	}
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	s := randomSamples(50, 3, 1, 2)
	if _, err := Build(context.Background(), s, 3, []float64{1, 1, 1}, 100, "one fold", nil); err == nil {
		t.Error("one fold: no error")
	}
	same := make([]Sample, 10)
	for i := range same {
		same[i] = Sample{X: []float32{1, 2}, Fold: uint64(i)}
	}
	if _, err := Build(context.Background(), same, 2, []float64{1, 1}, 100, "alike", nil); err == nil {
		t.Error("identical samples: no error")
	}
	if _, err := Build(context.Background(), s, 3, []float64{1, 1}, 100, "x", nil); err == nil {
		t.Error("wrong importance length: no error")
	}
}

func TestCapKeepsSmallestKeysWhateverTheOrder(t *testing.T) {
	t.Parallel()
	s := randomSamples(500, 4, 5, 3)
	s[7].X[2] = float32(math.NaN()) // left out before the cap
	a, err := Build(context.Background(), s, 4, []float64{1, 2, 3, 4}, 100, "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.N != 100 || a.Training != 499 {
		t.Fatalf("N %d, training %d", a.N, a.Training)
	}
	// The same samples in reverse: the same points (kept in the input's
	// order, so compared as sets of rows).
	rev := slices.Clone(s)
	slices.Reverse(rev)
	b, err := Build(context.Background(), rev, 4, []float64{1, 2, 3, 4}, 100, "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(r *Reference) [][]float64 {
		var out [][]float64
		for i := range r.N {
			out = append(out, r.Points[i*4:(i+1)*4])
		}
		slices.SortFunc(out, slices.Compare)
		return out
	}
	ra, rb := rows(a), rows(b)
	for i := range ra {
		if !slices.Equal(ra[i], rb[i]) {
			t.Fatalf("row %d differs with the samples reversed", i)
		}
	}
	// Reruns give the same bits.
	c, _ := Build(context.Background(), s, 4, []float64{1, 2, 3, 4}, 100, "f", nil)
	if !slices.Equal(a.Points, c.Points) || a.MeanDistance != c.MeanDistance || a.Threshold != c.Threshold {
		t.Error("rerun differs")
	}
}

func TestKDTreeEqualsBruteForce(t *testing.T) {
	t.Parallel()
	for _, nf := range []int{1, 2, 3, 6, 8} {
		s := randomSamples(2000, nf, 7, uint64(nf))
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = float64(f + 1)
		}
		if nf > 2 {
			imp[1] = 0 // a dimension the tree leaves out
		}
		r, err := Build(context.Background(), s, nf, imp, 20000, "f", nil)
		if err != nil {
			t.Fatal(err)
		}
		tree, brute := NewIndex(r), BruteForce(r)
		if tree.tree == nil {
			t.Fatalf("%d features: no tree", nf)
		}
		q := randomSamples(3000, nf, 1, 99+uint64(nf))
		z := make([]float64, nf)
		for i, p := range q {
			if i%3 == 0 {
				p.X = s[i%len(s)].X // exact hits: distance 0
			}
			r.Transform(p.X, z)
			a, b := tree.Nearest(z), brute.Nearest(z)
			if math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%d features, query %d: tree %v, brute force %v", nf, i, a, b)
			}
			// Brute force's early exit changes nothing either.
			full := math.Inf(1)
			for j := range r.N {
				full = min(full, dist2(z, r.Points[j*nf:(j+1)*nf]))
			}
			if math.Float64bits(full) != math.Float64bits(b) {
				t.Fatalf("%d features, query %d: early exit %v, full %v", nf, i, b, full)
			}
		}
	}
}

func TestNaNFeatureHasNoDI(t *testing.T) {
	t.Parallel()
	s := randomSamples(100, 3, 4, 5)
	r, err := Build(context.Background(), s, 3, []float64{1, 1, 1}, 100, "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMap(Grid{Width: 2, Height: 1, Step: 1})
	m.Features(NewIndex(r), r, 0, 0, 2, 1, [][]float32{{1, float32(math.NaN())}, {1, 1}, {1, 1}})
	if m.DI[0] != m.DI[0] || math.Float32bits(m.DI[1]) != 0x7fc00000 {
		t.Errorf("DI %v", m.DI)
	}
}

func TestGridCellsOnceAcrossWindows(t *testing.T) {
	t.Parallel()
	for _, g := range []Grid{{Width: 1000, Height: 700, Step: 10}, {Width: 1030, Height: 517, Step: 7}, {Width: 60, Height: 50, Step: 1}, {Width: 5, Height: 3, Step: 8}} {
		cw, ch := g.Cells()
		seen := make([]int, cw*ch)
		for y := 0; y < g.Height; y += 256 {
			for x := 0; x < g.Width; x += 256 {
				w, h := min(256, g.Width-x), min(256, g.Height-y)
				cells, pixels := g.In(x, y, w, h)
				for k, c := range cells {
					seen[c]++
					cx, cy := g.Centre(c%cw, c/cw)
					if px := (cy-y)*w + cx - x; px != pixels[k] {
						t.Fatalf("%v: cell %d at pixel %d, want %d", g, c, pixels[k], px)
					}
				}
			}
		}
		for c, n := range seen {
			if n != 1 {
				t.Fatalf("%v: cell %d filled %d times", g, c, n)
			}
		}
	}
	// Centres: a full cell of 10 at column 4 (upper left of the middle),
	// the last cell of 3 pixels (1000..1002) at its middle.
	g := Grid{Width: 1003, Height: 10, Step: 10}
	if x, y := g.Centre(0, 0); x != 4 || y != 4 {
		t.Errorf("centre %d, %d", x, y)
	}
	if x, _ := g.Centre(100, 0); x != 1001 {
		t.Errorf("last centre %d", x)
	}
}

// BenchmarkNearest measures a query against 20,000 points by dimension,
// brute force and k-d tree (where the tree stops paying sets
// KDTreeMaxDims), and above it the vector search where the CPU has
// AVX-512.
func BenchmarkNearest(b *testing.B) {
	for _, nf := range []int{2, 4, 6, 8, 10, 12, 16, 56} {
		s := randomSamples(20000, nf, 10, 7)
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = 1
		}
		r, err := Build(context.Background(), s, nf, imp, 20000, "f", nil)
		if err != nil {
			b.Fatal(err)
		}
		q := randomSamples(1000, nf, 1, 8)
		zs := make([][]float64, len(q))
		for i, p := range q {
			zs[i] = make([]float64, nf)
			r.Transform(p.X, zs[i])
		}
		for _, x := range []struct {
			name string
			idx  *Index
		}{{"brute", BruteForce(r)}, {"kdtree", &Index{ref: r, tree: newTree(r, seq(nf)), dims: seq(nf)}}, {"vector", NewIndex(r)}} {
			if x.name == "vector" && x.idx.blocks == nil {
				continue
			}
			b.Run(x.name+"/"+itoa(nf), func(b *testing.B) {
				i := 0
				for b.Loop() {
					x.idx.Nearest(zs[i%len(zs)])
					i++
				}
			})
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func itoa(n int) string { return string(rune('0'+n/10)) + string(rune('0'+n%10)) + "d" }

// BenchmarkBuild20k prepares a Reference at the default cap: 20,000
// points of 20 features, every pair measured once.
func BenchmarkBuild20k(b *testing.B) {
	s := randomSamples(25000, 20, 50, 11)
	imp := make([]float64, 20)
	for f := range imp {
		imp[f] = float64(1 + f%5)
	}
	for b.Loop() {
		if _, err := Build(context.Background(), s, 20, imp, DefaultMaxPoints, "f", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMapWindow fills a 1024 × 1024 window on the CPU's default
// grid (every 10th pixel: 10,404 cells) against 20,000 points, with 20
// features and with 40 (the default set with its context features); a
// full tile is 115 such windows.
func BenchmarkMapWindow(b *testing.B) {
	for _, nf := range []int{20, 40} {
		s := randomSamples(20000, nf, 50, 12)
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = float64(1 + f%5)
		}
		r, err := Build(context.Background(), s, nf, imp, DefaultMaxPoints, "f", nil)
		if err != nil {
			b.Fatal(err)
		}
		q := randomSamples(1024*1024, nf, 1, 13)
		feats := make([][]float32, nf)
		for f := range feats {
			feats[f] = make([]float32, len(q))
			for i := range q {
				feats[f][i] = q[i].X[f]
			}
		}
		idx := NewIndex(r)
		b.Run(itoa(nf), func(b *testing.B) {
			for b.Loop() {
				m := NewMap(Grid{Width: 1024, Height: 1024, Step: 10})
				m.Features(idx, r, 0, 0, 1024, 1024, feats)
			}
		})
	}
}

// TestSmallestKeys: the heap keeps the same points, in the same order, as
// a stable sort by key would (ties: the earlier sample), with many ties.
func TestSmallestKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ n, k, keys int }{{10, 3, 4}, {1000, 800, 50}, {5000, 700, 1 << 30}, {300, 1, 2}} {
		s := make([]Sample, c.n)
		var use []int
		for i := range s {
			s[i].Key = uint64(r.IntN(c.keys))
			if i%7 != 3 {
				use = append(use, i)
			}
		}
		want := slices.Clone(use)
		slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(s[a].Key, s[b].Key) })
		want = want[:c.k]
		slices.Sort(want)
		if got := smallestKeys(s, use, c.k); !slices.Equal(got, want) {
			t.Errorf("n %d k %d: %v, want %v", c.n, c.k, got[:min(8, len(got))], want[:min(8, len(want))])
		}
	}
}

// TestVectorEqualsBruteForce: the vector search (eight points at a time
// with AVX-512, where the CPU has it) gives brute force's bits for 9 to
// 56 weighted features, point counts that leave the last block short,
// and queries that hit a training point exactly.
func TestVectorEqualsBruteForce(t *testing.T) {
	if !vectorNearest {
		t.Skip("no AVX-512 here")
	}
	for _, tc := range []struct{ n, nf int }{{2, 10}, {7, 10}, {2001, 12}, {999, 56}} {
		s := randomSamples(tc.n, tc.nf, 7, uint64(tc.nf))
		imp := make([]float64, tc.nf)
		for f := range imp {
			imp[f] = float64(f%5 + 1)
		}
		imp[2] = 0
		r, err := Build(context.Background(), s, tc.nf, imp, 20000, "f", nil)
		if err != nil {
			t.Fatal(err)
		}
		vec, brute := NewIndex(r), BruteForce(r)
		if vec.blocks == nil {
			t.Fatalf("%+v: no blocks", tc)
		}
		q := randomSamples(2000, tc.nf, 1, 99+uint64(tc.nf))
		z := make([]float64, tc.nf)
		for i, p := range q {
			if i%3 == 0 {
				p.X = s[i%len(s)].X
			}
			r.Transform(p.X, z)
			a, b := vec.Nearest(z), brute.Nearest(z)
			if math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%+v, query %d: vector %v, brute force %v", tc, i, a, b)
			}
		}
	}
}
