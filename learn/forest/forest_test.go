package forest

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// gaussians makes n rows of nf features from k Gaussian classes with
// centres spread by sep, flipping a fraction noise of the labels.
func gaussians(n, nf, k int, sep, noise float64, seed uint64) ([]float32, []uint8) {
	r := rand.New(rand.NewPCG(seed, 7))
	centres := make([][]float64, k)
	for c := range centres {
		centres[c] = make([]float64, nf)
		for f := range nf {
			centres[c][f] = r.NormFloat64() * sep
		}
	}
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		c := r.IntN(k)
		for f := range nf {
			x[i*nf+f] = float32(centres[c][f] + r.NormFloat64())
		}
		if r.Float64() < noise {
			c = r.IntN(k)
		}
		y[i] = uint8(c)
	}
	return x, y
}

func fit(t *testing.T, x []float32, y []uint8, nf, k int, p Params, workers int) (*Forest, *Bins) {
	t.Helper()
	b, err := QuantileBins(x, nf, p.Bins, 100000, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := b.Bin(x, nf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Train(context.Background(), xb, y, k, p, workers)
	if err != nil {
		t.Fatal(err)
	}
	return f, b
}

func accuracy(t *testing.T, f *Forest, b *Bins, x []float32, y []uint8, nf int) float64 {
	t.Helper()
	xb, _ := b.Bin(x, nf)
	cls, _, err := f.Classify(xb)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i := range y {
		if cls[i] == y[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(y))
}

var defaults = Params{Trees: 20, MaxDepth: 12, MinSamplesLeaf: 1, Bins: 64, Bootstrap: true, Seed: 42}

func TestSeparable(t *testing.T) {
	t.Parallel()
	// Two features; the class is which side of x0 = 0.3 a point lies on.
	r := rand.New(rand.NewPCG(1, 1))
	n := 4000
	x := make([]float32, 2*n)
	y := make([]uint8, n)
	for i := range n {
		x[2*i], x[2*i+1] = r.Float32(), r.Float32()
		if x[2*i] > 0.3 {
			y[i] = 1
		}
	}
	f, b := fit(t, x, y, 2, 2, Params{Trees: 5, MaxDepth: 4, MinSamplesLeaf: 1, MaxFeatures: 2, Bins: 255, Seed: 3}, 2)
	if acc := accuracy(t, f, b, x, y, 2); acc < 0.995 {
		t.Errorf("separable accuracy %.4f", acc)
	}
	if f.Importance[0] < 0.95 {
		t.Errorf("importance %v: feature 0 decides", f.Importance)
	}
}

func TestGaussiansAndDepth(t *testing.T) {
	t.Parallel()
	const nf, k = 8, 5
	x, y := gaussians(20000, nf, k, 1.5, 0.05, 11)
	f, b := fit(t, x[:16000*nf], y[:16000], nf, k, defaults, 0)
	acc := accuracy(t, f, b, x[16000*nf:], y[16000:], nf)
	// Noisy, overlapping classes: well above chance, below perfect.
	if acc < 0.6 || acc > 0.97 {
		t.Errorf("validation accuracy %.3f", acc)
	}
	full, depth := f.Nodes()
	if depth > defaults.MaxDepth {
		t.Errorf("depth %d exceeds max_depth %d", depth, defaults.MaxDepth)
	}
	shallow := defaults
	shallow.MaxDepth = 3
	fs, _ := fit(t, x, y, nf, k, shallow, 0)
	if nodes, d := fs.Nodes(); d > 3 || nodes > shallow.Trees*15 {
		t.Errorf("max_depth 3: depth %d, %d nodes", d, nodes)
	}
	big := defaults
	big.MinSamplesLeaf = 500
	fb, _ := fit(t, x[:16000*nf], y[:16000], nf, k, big, 0)
	// Leaves of at least 500 of 16000 weighted rows: at most 32 per tree.
	if nodes, _ := fb.Nodes(); nodes > big.Trees*63 || nodes >= full {
		t.Errorf("min_samples_leaf 500: %d nodes (unconstrained: %d)", nodes, full)
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	t.Parallel()
	const nf, k = 6, 4
	x, y := gaussians(6000, nf, k, 1.0, 0.1, 5)
	f1, _ := fit(t, x, y, nf, k, defaults, 1)
	f8, _ := fit(t, x, y, nf, k, defaults, 8)
	if !reflect.DeepEqual(f1, f8) {
		t.Fatal("forests differ between 1 and 8 workers")
	}
	other := defaults
	other.Seed++
	f2, _ := fit(t, x, y, nf, k, other, 2)
	if reflect.DeepEqual(f1.Trees, f2.Trees) {
		t.Fatal("a different seed gave the same trees")
	}
}

func TestNaNGoesLeft(t *testing.T) {
	t.Parallel()
	b := &Bins{Edges: [][]float32{{0.1, 0.5}}}
	for v, want := range map[float32]uint8{float32(math.NaN()): 0, -1: 1, 0.1: 1, 0.3: 2, 0.5: 2, 0.9: 3} {
		if got := b.Code(0, v); got != want {
			t.Errorf("code(%v) = %d, want %d", v, got, want)
		}
	}
}

// TestEdgeKeysCode: the branch-free search gives every value the code of
// a plain binary search over the edges (the GPU's bin kernel's), signed
// zeros, infinities, NaN and the edges themselves included, for edge
// lists of every length up to 130.
func TestEdgeKeysCode(t *testing.T) {
	search := func(e []float32, v float32) uint8 {
		if v != v {
			return 0
		}
		lo, hi := 0, len(e)
		for lo < hi {
			mid := (lo + hi) / 2
			if e[mid] < v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return uint8(lo + 1)
	}
	r := rand.New(rand.NewPCG(5, 6))
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	for n := 0; n <= 130; n++ {
		edges := make([]float32, 0, n)
		for len(edges) < n {
			v := float32(r.NormFloat64())
			if len(edges) > 0 {
				v = edges[len(edges)-1] + float32(r.ExpFloat64())*0.1 + 1e-6
			}
			edges = append(edges, v)
		}
		if n > 2 {
			edges[0], edges[1] = -inf, negZero // −∞ and −0 as edges
			for i := 2; i < n; i++ {
				edges[i] = float32(i)
			}
		}
		vals := []float32{0, negZero, inf, -inf, float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
		vals = append(vals, edges...)
		for range 2000 {
			vals = append(vals, float32(r.NormFloat64()*float64(n)))
		}
		b := &Bins{Edges: [][]float32{edges}}
		keys := b.Keys(0)
		for _, v := range vals {
			want := search(edges, v)
			if got := keys.Code(v); got != want {
				t.Fatalf("%d edges, value %v: code %d, want %d", n, v, got, want)
			}
			if got := b.Code(0, v); got != want {
				t.Fatalf("%d edges, value %v: Bins.Code %d, want %d", n, v, got, want)
			}
		}
	}
}

// TestSortFloats: the radix sort gives the order slices.Sort gives, for
// signed zeros, infinities and sizes around its digit counts, with −0
// before +0.
func TestSortFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	negZero := float32(math.Copysign(0, -1))
	for _, n := range []int{0, 1, 2, 3, 2047, 2049, 200_000} {
		v := make([]float32, n)
		for i := range v {
			switch r.IntN(6) {
			case 0:
				v[i] = 0
			case 1:
				v[i] = negZero
			case 2:
				v[i] = float32(math.Inf(1 - 2*r.IntN(2)))
			case 3:
				v[i] = float32(r.NormFloat64() * 1e-40) // subnormal
			default:
				v[i] = float32(r.NormFloat64() * 1e3)
			}
		}
		want := slices.Clone(v)
		slices.Sort(want)
		sortFloats(v)
		for i := range v {
			if v[i] != want[i] {
				t.Fatalf("%d values: [%d] = %v, want %v", n, i, v[i], want[i])
			}
			if i > 0 && v[i] == 0 && v[i-1] == 0 && math.Signbit(float64(v[i-1])) == false && math.Signbit(float64(v[i])) {
				t.Fatalf("%d values: −0 after +0 at %d", n, i)
			}
		}
	}
}

// TestBinMatchesCode: Bin, which codes blocks of rows, gives every value
// the code Bins.Code gives it, for a row count that leaves the last block
// short, with NaNs.
func TestBinMatchesCode(t *testing.T) {
	const nf, n = 5, 5000
	x, _ := gaussians(n, nf, 3, 1.0, 0, 9)
	for i := 0; i < len(x); i += 17 {
		x[i] = float32(math.NaN())
	}
	b, err := QuantileBins(x, nf, 64, 1000, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Bin(x, nf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for f := range nf {
			if c, want := got.Codes[f*n+i], b.Code(f, x[i*nf+f]); c != want {
				t.Fatalf("row %d feature %d: code %d, want %d", i, f, c, want)
			}
		}
	}
}

// TestProbaMatchesTrees: both compiled walks (the scalar one, a tree's
// depth of lockstep steps with leaves stepping onto themselves, and the
// vector one where the CPU has AVX-512) give every row the sums a walk of
// the trees themselves gives, node by node from the root, in tree order,
// bit for bit: for shallow and deep trees, every code from 0 (NaN) to
// 255, row counts that leave the last group or chunk short, tree counts
// across the vector walk's batches, and forests the vector walk's words
// cannot hold (17 classes, 300 features), which walk the scalar way.
func TestProbaMatchesTrees(t *testing.T) {
	here := vectorWalk
	t.Cleanup(func() { vectorWalk = here })
	cases := []struct{ depth, nf, k, trees, n int }{
		{3, 6, 5, 9, 1003}, {9, 6, 5, 9, 1003}, {16, 6, 5, 9, 1003},
		{12, 6, 2, 17, 4096 + 70}, {16, 6, 16, 3, 63}, {8, 6, 17, 4, 200},
		{10, 300, 4, 3, 130}, {1, 6, 3, 2, 65}, {5, 6, 3, 2, 1}, {5, 6, 3, 2, 0},
	}
	for _, tc := range cases {
		x, y := gaussians(4000, tc.nf, tc.k, 0.7, 0.1, uint64(tc.depth+tc.k))
		p := Params{Trees: tc.trees, MaxDepth: tc.depth, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 2}
		bins, _ := QuantileBins(x, tc.nf, p.Bins, 4000, p.Seed)
		xb, _ := bins.Bin(x, tc.nf)
		f, err := Train(context.Background(), xb, y, tc.k, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(tc.depth), 3))
		n, nf, k := tc.n, tc.nf, tc.k
		codes := &Binned{N: n, F: nf, Codes: make([]uint8, n*nf)}
		for i := range codes.Codes {
			codes.Codes[i] = uint8(r.IntN(256))
		}
		inv := 1 / float32(len(f.Trees))
		for _, vector := range []bool{false, true} {
			if vector && !here {
				continue
			}
			vectorWalk = vector
			c := f.Compile()
			if fits := nf <= 256 && k <= 16; vector && fits != (c.words != nil) {
				t.Fatalf("%+v: words packed %v, want %v", tc, c.words != nil, fits)
			}
			got := make([]float32, n*k)
			if err := c.Proba(codes, got); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				want := make([]float32, k)
				for _, tr := range f.Trees {
					at := int32(0)
					for tr.Feature[at] >= 0 {
						if codes.Codes[int(tr.Feature[at])*n+i] > tr.Bin[at] {
							at = tr.Right[at]
						} else {
							at = tr.Left[at]
						}
					}
					for c := range k {
						want[c] += tr.Probs[int(tr.Leaf[at])*k+c]
					}
				}
				for c := range k {
					if w := want[c] * inv; math.Float32bits(w) != math.Float32bits(got[i*k+c]) {
						t.Fatalf("%+v vector %v: row %d, class %d: %v, the trees give %v", tc, vector, i, c, got[i*k+c], w)
					}
				}
			}
		}
	}
}

// TestCodeAllMatchesCode: CodeAll (with AVX-512, sixteen values a vector
// by gathers) codes every value as Code does, for edge counts from 0 to
// 254, at and beside every edge, NaN, ±0, ±Inf and random values, and
// lengths that leave the last vector short.
func TestCodeAllMatchesCode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for _, ne := range []int{0, 1, 2, 3, 7, 16, 127, 254} {
		edges := make([]float32, 0, ne)
		for v := float32(-3); len(edges) < ne; v += 0.01 + r.Float32() {
			edges = append(edges, v)
		}
		keys := (&Bins{Edges: [][]float32{edges}}).Keys(0)
		vals := []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)),
			float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32}
		for _, e := range edges {
			vals = append(vals, e, math.Nextafter32(e, -1e30), math.Nextafter32(e, 1e30))
		}
		for len(vals) < 1000 {
			vals = append(vals, float32(r.NormFloat64()*float64(ne+1)/4))
		}
		for _, n := range []int{0, 1, 15, 16, 17, len(vals)} {
			out := make([]uint8, n+1)
			out[n] = 77
			keys.CodeAll(vals[:n], out)
			for i, v := range vals[:n] {
				if want := keys.Code(v); out[i] != want {
					t.Fatalf("%d edges, %d values: value %d (%v) coded %d, Code gives %d", ne, n, i, v, out[i], want)
				}
			}
			if out[n] != 77 {
				t.Fatalf("%d edges, %d values: CodeAll wrote past the values", ne, n)
			}
		}
	}
}
