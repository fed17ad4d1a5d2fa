package aoa

import (
	"math"

	"gonum.org/v1/gonum/spatial/kdtree"
)

// KDTreeMaxDims is the most weighted features for which Index searches a
// k-d tree rather than every point: above it the tree visits most points
// anyway and costs more than brute force (measured in BenchmarkNearest on
// 20,000 points; docs/predict.md has the figures).
const KDTreeMaxDims = 8

// Index finds, for transformed pixels, the squared distance to the
// nearest training point. It is safe for concurrent use.
type Index struct {
	ref  *Reference
	tree *kdtree.Tree // nil: brute force
	dims []int        // the weighted features, in order
	// blocks holds the points eight a block for the vector search
	// (eightBlocks), when brute force runs with AVX-512; nil otherwise.
	blocks []float64
}

// NewIndex prepares the search: a k-d tree (gonum's) over the weighted
// features when there are at most KDTreeMaxDims of them, brute force
// otherwise, eight points at a time where the CPU has AVX-512. All give
// the same bits (the tree prunes a branch only when its plane lies at
// least as far as the best distance found, and computes distances as
// brute force does; the vector search sums each point's terms in the same
// order).
func NewIndex(r *Reference) *Index {
	x := &Index{ref: r}
	nf := r.Features()
	for f := range nf {
		if r.Scale[f] != 0 {
			x.dims = append(x.dims, f)
		}
	}
	if len(x.dims) <= KDTreeMaxDims {
		x.tree = newTree(r, x.dims)
	} else if vectorNearest && r.N > 0 {
		x.blocks = eightBlocks(r.Points, nf)
	}
	return x
}

// eightBlocks lays points (row-major, nf features) out eight a block,
// feature by feature: block b's feature f for lane l at (b*nf+f)*8+l. The
// last block repeats the last point, which changes no minimum.
func eightBlocks(p []float64, nf int) []float64 {
	n := len(p) / nf
	nb := (n + 7) / 8
	out := make([]float64, nb*nf*8)
	for b := range nb {
		for l := range 8 {
			pt := p[min(b*8+l, n-1)*nf:][:nf]
			for f, v := range pt {
				out[(b*nf+f)*8+l] = v
			}
		}
	}
	return out
}

// vectorNearest reports whether brute force compares eight points at a
// time here (nearestVector is not nil).
var vectorNearest = nearestVector != nil

// BruteForce is an Index that always compares every point (for tests and
// measurements).
func BruteForce(r *Reference) *Index { return &Index{ref: r} }

// Nearest is the squared distance from transformed features z to the
// nearest training point (NaN when z has a NaN).
func (x *Index) Nearest(z []float64) float64 {
	for _, v := range z {
		if v != v {
			return math.NaN()
		}
	}
	if x.tree != nil {
		q := make(point, len(x.dims))
		for k, f := range x.dims {
			q[k] = z[f]
		}
		_, d := x.tree.Nearest(q)
		return d
	}
	if x.blocks != nil {
		return nearestVector(x.blocks, x.ref.Features(), z)
	}
	return nearestBrute(x.ref.Points, x.ref.Features(), z)
}

// nearestBrute compares every point, stopping a point's sum once it
// exceeds the best so far: the terms are not negative and rounded
// addition is monotone, so that point cannot be nearer, and the minimum
// is the one the full sums give.
func nearestBrute(p []float64, nf int, z []float64) float64 {
	best := math.Inf(1)
	for i := 0; i < len(p); i += nf {
		pi := p[i : i+nf]
		var s float64
		for f, v := range z {
			d := v - pi[f]
			s = float64(s + float64(d*d))
			if s > best {
				break
			}
		}
		best = min(best, s)
	}
	return best
}

// point is a k-d tree point: the weighted features of a transformed
// pixel or training point. Features of weight 0 are 0 in every point
// and add exact zeros to brute force's sums, so leaving them out changes
// no sum.
type point []float64

func (p point) Compare(c kdtree.Comparable, d kdtree.Dim) float64 { return p[d] - c.(point)[d] }
func (p point) Dims() int                                         { return len(p) }

// Distance is dist2: the same operations in the same order.
func (p point) Distance(c kdtree.Comparable) float64 { return dist2(p, c.(point)) }

type points []point

func (p points) Index(i int) kdtree.Comparable         { return p[i] }
func (p points) Len() int                              { return len(p) }
func (p points) Slice(start, end int) kdtree.Interface { return p[start:end] }

// Pivot partitions around the median of medians along d: deterministic,
// unlike gonum's Points, which picks random elements.
func (p points) Pivot(d kdtree.Dim) int {
	pl := plane{p, d}
	return kdtree.Partition(pl, kdtree.MedianOfMedians(pl))
}

type plane struct {
	points
	d kdtree.Dim
}

func (p plane) Less(i, j int) bool { return p.points[i][p.d] < p.points[j][p.d] }
func (p plane) Swap(i, j int)      { p.points[i], p.points[j] = p.points[j], p.points[i] }
func (p plane) Slice(start, end int) kdtree.SortSlicer {
	return plane{p.points[start:end], p.d}
}

func newTree(r *Reference, dims []int) *kdtree.Tree {
	nf := r.Features()
	ps := make(points, r.N)
	for i := range ps {
		q := make(point, len(dims))
		for k, f := range dims {
			q[k] = r.Points[i*nf+f]
		}
		ps[i] = q
	}
	return kdtree.New(ps, false)
}
