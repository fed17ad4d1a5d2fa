package forest

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/internal/rng"
)

// Params are the forest's hyperparameters.
type Params struct {
	Trees          int    `yaml:"trees" json:"trees"`
	MaxDepth       int    `yaml:"max_depth" json:"max_depth"`               // 1–30
	MinSamplesLeaf int    `yaml:"min_samples_leaf" json:"min_samples_leaf"` // bootstrap-weighted
	MaxFeatures    int    `yaml:"max_features" json:"max_features"`         // per node; 0: sqrt(features)
	Bins           int    `yaml:"bins" json:"bins"`                         // 2–255
	Bootstrap      bool   `yaml:"bootstrap" json:"bootstrap"`
	Seed           uint64 `yaml:"seed" json:"seed"`
}

// Validate names the first bad parameter.
func (p Params) Validate(features int) error {
	switch {
	case p.Trees < 1 || p.Trees > 10000:
		return fmt.Errorf("trees: %d is outside 1–10000", p.Trees)
	case p.MaxDepth < 1 || p.MaxDepth > 30:
		return fmt.Errorf("max_depth: %d is outside 1–30", p.MaxDepth)
	case p.MinSamplesLeaf < 1:
		return fmt.Errorf("min_samples_leaf: %d is below 1", p.MinSamplesLeaf)
	case p.MaxFeatures < 0 || p.MaxFeatures > features:
		return fmt.Errorf("max_features: %d is outside 0–%d (0 means sqrt)", p.MaxFeatures, features)
	case p.Bins < 2 || p.Bins > MaxBins:
		return fmt.Errorf("bins: %d is outside 2–%d", p.Bins, MaxBins)
	}
	return nil
}

func (p Params) mtry(features int) int {
	if p.MaxFeatures > 0 {
		return p.MaxFeatures
	}
	return max(1, int(math.Sqrt(float64(features))))
}

// Tree is one fitted tree, nodes in breadth-first order (root 0). A split
// node sends a row left when its code for Feature is <= Bin; a leaf
// (Feature < 0) holds class probabilities at Probs[Leaf*classes:].
type Tree struct {
	Feature []int16
	Bin     []uint8
	Left    []int32
	Right   []int32
	Leaf    []int32
	Probs   []float32
}

// Forest is a fitted forest over binned features.
type Forest struct {
	Classes    int
	Features   int
	Trees      []Tree
	Importance []float64 // impurity decrease per feature, summing to 1
}

// Train fits a forest to a binned matrix and class indices y (0…classes−1)
// using up to workers goroutines (0: all CPUs). The result depends only on
// the data and p, not on workers.
func Train(x *Binned, y []uint8, classes int, p Params, workers int) (*Forest, error) {
	if err := p.Validate(x.F); err != nil {
		return nil, err
	}
	if len(y) != x.N {
		return nil, fmt.Errorf("train: %d labels for %d rows", len(y), x.N)
	}
	if x.N == 0 {
		return nil, errors.New("train: no samples")
	}
	if classes < 1 || classes > 255 {
		return nil, fmt.Errorf("train: %d classes", classes)
	}
	for i, c := range y {
		if int(c) >= classes {
			return nil, fmt.Errorf("train: row %d has class index %d of %d", i, c, classes)
		}
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	f := &Forest{Classes: classes, Features: x.F, Trees: make([]Tree, p.Trees)}
	imp := make([][]float64, p.Trees)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, p.Trees) {
		wg.Go(func() {
			g := newGrower(x, y, classes, p)
			for {
				t := int(next.Add(1) - 1)
				if t >= p.Trees {
					return
				}
				f.Trees[t], imp[t] = g.grow(uint64(t))
			}
		})
	}
	wg.Wait()
	// Sum importances in tree order, so the floats do not depend on which
	// worker grew which tree.
	f.Importance = make([]float64, x.F)
	total := 0.0
	for _, ti := range imp {
		for k, v := range ti {
			f.Importance[k] += v
		}
	}
	for _, v := range f.Importance {
		total += v
	}
	if total > 0 {
		for k := range f.Importance {
			f.Importance[k] /= total
		}
	}
	return f, nil
}

// grower holds one worker's scratch space.
type grower struct {
	x       *Binned
	y       []uint8
	classes int
	p       Params
	mtry    int
	weight  []uint32
	rows    []int32
	tmp     []int32
	hist    []int64 // bins × classes for one feature
	seen    [256]bool
	used    []uint8 // bins present in the node, for one feature
	feats   []int
}

func newGrower(x *Binned, y []uint8, classes int, p Params) *grower {
	return &grower{
		x: x, y: y, classes: classes, p: p, mtry: p.mtry(x.F),
		weight: make([]uint32, x.N), rows: make([]int32, 0, x.N), tmp: make([]int32, x.N),
		hist: make([]int64, 256*classes), feats: make([]int, x.F),
	}
}

// node is a node waiting to be split: its rows are g.rows[lo:hi].
type node struct {
	lo, hi int
	depth  int
	id     uint64 // breadth-first position in a complete binary tree
	index  int32  // position in the tree's arrays
	counts []int64
}

// grow fits tree t level by level.
func (g *grower) grow(t uint64) (Tree, []float64) {
	n, c := g.x.N, g.classes
	clear(g.weight)
	if g.p.Bootstrap {
		for k := range n {
			g.weight[rng.Hash(g.p.Seed, t, 0xb007, uint64(k))%uint64(n)]++
		}
	} else {
		for i := range g.weight {
			g.weight[i] = 1
		}
	}
	g.rows = g.rows[:0]
	root := make([]int64, c)
	for i := range n {
		if w := g.weight[i]; w > 0 {
			g.rows = append(g.rows, int32(i))
			root[g.y[i]] += int64(w)
		}
	}
	var tr Tree
	imp := make([]float64, g.x.F)
	add := func() int32 {
		tr.Feature = append(tr.Feature, -1)
		tr.Bin = append(tr.Bin, 0)
		tr.Left = append(tr.Left, -1)
		tr.Right = append(tr.Right, -1)
		tr.Leaf = append(tr.Leaf, -1)
		return int32(len(tr.Feature) - 1)
	}
	level := []node{{lo: 0, hi: len(g.rows), id: 0, index: add(), counts: root}}
	for len(level) > 0 {
		var next []node
		for _, nd := range level {
			s, ok := g.split(t, nd)
			if !ok {
				tr.Leaf[nd.index] = int32(len(tr.Probs) / c)
				tr.Probs = append(tr.Probs, probs(nd.counts)...)
				continue
			}
			imp[s.feature] += s.gain
			mid := g.partition(nd.lo, nd.hi, s.feature, s.bin)
			tr.Feature[nd.index], tr.Bin[nd.index] = int16(s.feature), s.bin
			l, r := add(), add()
			tr.Left[nd.index], tr.Right[nd.index] = l, r
			right := make([]int64, c)
			for k := range right {
				right[k] = nd.counts[k] - s.left[k]
			}
			next = append(next,
				node{lo: nd.lo, hi: mid, depth: nd.depth + 1, id: 2*nd.id + 1, index: l, counts: s.left},
				node{lo: mid, hi: nd.hi, depth: nd.depth + 1, id: 2*nd.id + 2, index: r, counts: right})
		}
		level = next
	}
	return tr, imp
}

func probs(counts []int64) []float32 {
	var total int64
	for _, v := range counts {
		total += v
	}
	out := make([]float32, len(counts))
	for k, v := range counts {
		out[k] = float32(float64(v) / float64(total))
	}
	return out
}

type split struct {
	feature int
	bin     uint8
	score   float64
	gain    float64
	left    []int64
}

// purity is Σ counts² / total, the quantity Gini splits maximise: the
// weighted Gini impurity of a node is total − purity.
func purity(counts []int64, total int64) float64 {
	if total == 0 {
		return 0
	}
	s := 0.0
	for _, v := range counts {
		s += float64(float64(v) * float64(v)) // no FMA: same bits on every build
	}
	return s / float64(total)
}

// split finds the node's best split over a per-node random subset of
// features. Ties go to the lower feature index, then the lower bin.
func (g *grower) split(t uint64, nd node) (split, bool) {
	c := g.classes
	var total int64
	pure := 0
	for _, v := range nd.counts {
		total += v
		if v > 0 {
			pure++
		}
	}
	minLeaf := int64(g.p.MinSamplesLeaf)
	if nd.depth >= g.p.MaxDepth || pure <= 1 || total < 2*minLeaf {
		return split{}, false
	}
	// Partial Fisher–Yates keyed by (seed, tree, node).
	for i := range g.feats {
		g.feats[i] = i
	}
	for k := range g.mtry {
		j := k + int(rng.Hash(g.p.Seed, t, nd.id, 0xfea7, uint64(k))%uint64(len(g.feats)-k))
		g.feats[k], g.feats[j] = g.feats[j], g.feats[k]
	}
	parent := purity(nd.counts, total)
	best := split{feature: -1}
	left := make([]int64, c)
	for _, f := range g.feats[:g.mtry] {
		// g.hist is all zero here, and only the bins a node uses are
		// visited and cleared: deep nodes touch few of the 256.
		col := g.x.Codes[f*g.x.N : (f+1)*g.x.N]
		used := g.used[:0]
		for _, i := range g.rows[nd.lo:nd.hi] {
			code := col[i]
			if !g.seen[code] {
				g.seen[code] = true
				used = append(used, code)
			}
			g.hist[int(code)*c+int(g.y[i])] += int64(g.weight[i])
		}
		slices.Sort(used)
		clear(left)
		var nl int64
		// A split after the last used bin leaves nothing on the right; a
		// split between used bins is the same as one at the lower used bin,
		// the one kept (ties go to the lower bin).
		for _, code := range used[:len(used)-1] {
			h := g.hist[int(code)*c : int(code)*c+c]
			for k := range c {
				left[k] += h[k]
				nl += h[k]
			}
			nr := total - nl
			if nl < minLeaf || nr < minLeaf {
				continue
			}
			sl, sr := 0.0, 0.0
			for k := range c {
				l := float64(left[k])
				r := float64(nd.counts[k] - left[k])
				sl += float64(l * l) // explicit rounding: no FMA, same bits on every build
				sr += float64(r * r)
			}
			score := sl/float64(nl) + sr/float64(nr)
			if score > best.score || (score == best.score && best.feature >= 0 && f < best.feature) {
				best = split{feature: f, bin: code, score: score, left: append([]int64(nil), left...)}
			}
		}
		for _, code := range used {
			clear(g.hist[int(code)*c : int(code)*c+c])
			g.seen[code] = false
		}
		g.used = used
	}
	if best.feature < 0 {
		return split{}, false
	}
	best.gain = best.score - parent
	if !(best.gain > 1e-12*float64(total)) {
		return split{}, false
	}
	return best, true
}

// partition reorders rows[lo:hi] so rows going left come first, keeping
// their relative order, and returns the boundary.
func (g *grower) partition(lo, hi, f int, bin uint8) int {
	col := g.x.Codes[f*g.x.N : (f+1)*g.x.N]
	l, r := lo, 0
	for _, i := range g.rows[lo:hi] {
		if col[i] <= bin {
			g.rows[l] = i
			l++
		} else {
			g.tmp[r] = i
			r++
		}
	}
	copy(g.rows[l:hi], g.tmp[:r])
	return l
}

// parallel runs f(0…n−1) over all CPUs.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
