// Package forest trains and runs random forests on binned pixel features:
// quantile binning, a histogram forest grown level by level with integer
// class counts (Grow decides, a Grower does the row work: the CPU's here,
// the GPU's in package cuda), prediction (a scalar walk, and on amd64
// CPUs with AVX-512 a vector walk in assembly that sums bit for bit the
// same), the model file and accuracy metrics. The golearn baseline lives
// in package baseline.
//
// It has no cgo, so its test binaries run on GPU hosts without GDAL.
package forest

import (
	"fmt"
	"math"
	"slices"

	"github.com/lulc/lulc/internal/rng"
)

// MaxBins is the most bins a feature can have: codes 1…255 hold values,
// code 0 holds NaN.
const MaxBins = 255

// Bins holds each feature's bin edges. A value v gets code 0 when NaN, else
// 1 + the index of the first edge e with v <= e (len(edges)+1 above all).
// A split "code <= t" is therefore "v <= edges[t-1]" for t >= 1, and NaN
// always goes left: the forest treats missing values as smaller than any.
type Bins struct {
	Edges [][]float32
}

// Code bins one value of feature f (Keys(f).Code, for one value).
func (b *Bins) Code(f int, v float32) uint8 {
	return b.Keys(f).Code(v)
}

// EdgeKeys are one feature's bin edges as ordered integers (orderKey):
// Code compares integers, which the compiler turns into arithmetic
// rather than a branch a random value mispredicts half the time.
type EdgeKeys []int32

// Keys returns feature f's edges as EdgeKeys, for binning many values.
func (b *Bins) Keys(f int) EdgeKeys {
	e := b.Edges[f]
	k := make(EdgeKeys, len(e))
	for i, x := range e {
		k[i] = orderKey(x)
	}
	return k
}

// Code bins a value: 0 when NaN, else 1 + the number of edges below it,
// the index of the first edge e with v <= e, found by a binary search
// without branches (Khuong and Morin's: the same steps for every value).
func (k EdgeKeys) Code(v float32) uint8 {
	if v != v {
		return 0
	}
	if len(k) == 0 {
		return 1
	}
	kv := int64(orderKey(v))
	base, n := 0, len(k)
	for n > 1 {
		half := n / 2
		// All ones when k[base+half] < kv, else zero.
		base += half & int((int64(k[base+half])-kv)>>63)
		n -= half
	}
	base -= int((int64(k[base]) - kv) >> 63)
	return uint8(base + 1)
}

// CodeAll codes every value of vals into out (at least as long), as
// Code does one: with AVX-512 sixteen at a time.
func (k EdgeKeys) CodeAll(vals []float32, out []uint8) {
	out = out[:len(vals)]
	if codeVector(k, vals, out) {
		return
	}
	for i, v := range vals {
		out[i] = k.Code(v)
	}
}

// orderKey maps a float32 other than NaN to an int32 that orders as the
// floats do: a negative float's magnitude bits are reversed, and −0
// becomes +0 first (−0 + 0 is +0), since the two compare equal.
func orderKey(x float32) int32 {
	b := int32(math.Float32bits(x + 0))
	return b ^ (b >> 31 & 0x7fffffff)
}

// QuantileBins computes up to nbins bins per feature from the quantiles of
// a sample of the rows (every row when rows <= sample), taken
// deterministically from seed. x is row-major: x[i*nf+f].
func QuantileBins(x []float32, nf, nbins, sample int, seed uint64) (*Bins, error) {
	if nbins < 2 || nbins > MaxBins {
		return nil, fmt.Errorf("bins: %d is outside 2–%d", nbins, MaxBins)
	}
	if nf <= 0 || len(x)%nf != 0 {
		return nil, fmt.Errorf("bins: %d values for %d features", len(x), nf)
	}
	n := len(x) / nf
	rows := make([]int, 0, min(n, sample))
	if n <= sample {
		for i := range n {
			rows = append(rows, i)
		}
	} else {
		// A seeded choice of rows, sorted so the gather is cache-friendly.
		seen := map[int]bool{}
		for k := 0; len(rows) < sample; k++ {
			i := int(rng.Hash(seed, 0x62696e73, uint64(k)) % uint64(n))
			if !seen[i] {
				seen[i] = true
				rows = append(rows, i)
			}
		}
		slices.Sort(rows)
	}
	// Features are independent: each is sorted on its own core.
	b := &Bins{Edges: make([][]float32, nf)}
	parallel(nf, func(f int) {
		vals := make([]float32, 0, len(rows))
		for _, i := range rows {
			if v := x[i*nf+f]; v == v {
				vals = append(vals, v)
			}
		}
		sortFloats(vals)
		var edges []float32
		for j := 1; j < nbins && len(vals) > 0; j++ {
			e := vals[min(len(vals)-1, int(math.Floor(float64(j)*float64(len(vals))/float64(nbins))))]
			if len(edges) == 0 || e > edges[len(edges)-1] {
				edges = append(edges, e)
			}
		}
		// The top edge would put nothing above it: drop it so the last
		// code is not empty.
		if len(edges) > 0 && len(vals) > 0 && edges[len(edges)-1] >= vals[len(vals)-1] {
			edges = edges[:len(edges)-1]
		}
		b.Edges[f] = edges
	})
	return b, nil
}

// sortFloats sorts values without NaN in increasing order, −0 before +0,
// by a radix sort of their bits: three passes over the values, where a
// comparison sort of the 200,000 a feature has took most of the fit's
// binning.
func sortFloats(v []float32) {
	// Unsigned keys that order as the floats do: a negative float's bits
	// all flipped, a positive one's sign bit set.
	key := func(x float32) uint32 {
		b := math.Float32bits(x)
		return b ^ (uint32(int32(b)>>31) | 0x80000000)
	}
	a, tmp := make([]uint32, len(v)), make([]uint32, len(v))
	for i, x := range v {
		a[i] = key(x)
	}
	for _, pass := range [...]struct{ shift, bits uint }{{0, 11}, {11, 11}, {22, 10}} {
		var count [1 << 11]int
		mask := uint32(1)<<pass.bits - 1
		for _, k := range a {
			count[k>>pass.shift&mask]++
		}
		sum := 0
		for d := range count {
			sum, count[d] = sum+count[d], sum
		}
		for _, k := range a {
			d := k >> pass.shift & mask
			tmp[count[d]] = k
			count[d]++
		}
		a, tmp = tmp, a
	}
	for i, k := range a {
		// The key's inverse: a set top bit was a positive float's.
		v[i] = math.Float32frombits(k ^ (uint32(int32(^k)>>31) | 0x80000000))
	}
}

// Binned is a feature matrix as bin codes, column-major (Codes[f*N+i]), the
// layout the histogram passes read and the GPU twin uses.
type Binned struct {
	N, F  int
	Codes []uint8
}

// Bin codes a row-major float matrix.
func (b *Bins) Bin(x []float32, nf int) (*Binned, error) {
	if nf != len(b.Edges) || len(x)%nf != 0 {
		return nil, fmt.Errorf("bin: %d values for %d features (bins for %d)", len(x), nf, len(b.Edges))
	}
	n := len(x) / nf
	out := &Binned{N: n, F: nf, Codes: make([]uint8, n*nf)}
	keys := make([]EdgeKeys, nf)
	for f := range keys {
		keys[f] = b.Keys(f)
	}
	// Blocks of rows, each coded feature by feature while its rows stay
	// in cache: a pass per feature over the whole matrix would read every
	// row's cache lines once for each feature.
	const block = 2048
	parallel((n+block-1)/block, func(k int) {
		i0, i1 := k*block, min(n, (k+1)*block)
		// A feature's values of the block side by side, for CodeAll.
		vals := make([]float32, i1-i0)
		for f, kf := range keys {
			for i := range vals {
				vals[i] = x[(i0+i)*nf+f]
			}
			kf.CodeAll(vals, out.Codes[f*n+i0:f*n+i1])
		}
	})
	return out, nil
}
