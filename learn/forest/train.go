package forest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/internal/progress"
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
// the data and p, not on workers. Once ctx is done (an interrupt) the
// workers stop at their next tree level and Train returns ctx's error.
// Each tree grown is a step reported to ctx's progress (progress.Step).
func Train(ctx context.Context, x *Binned, y []uint8, classes int, p Params, workers int) (*Forest, error) {
	if err := CheckData(x, y, classes, p); err != nil {
		return nil, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	trees := make([]Tree, p.Trees)
	imp := make([][]float64, p.Trees)
	errs := make([]error, p.Trees)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, p.Trees) {
		wg.Go(func() {
			g := newGrower(x, y, classes, p)
			for {
				t := int(next.Add(1) - 1)
				if t >= p.Trees || ctx.Err() != nil {
					return
				}
				tr, ti, err := Grow(ctx, g, []uint64{uint64(t)}, classes, x.F, p)
				if err != nil {
					errs[t] = err
					continue
				}
				trees[t], imp[t] = tr[0], ti[0]
				progress.Step(ctx, 1)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("forest: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewForest(classes, x.F, trees, imp), nil
}

// CheckData names the first problem with a training set: bad parameters,
// a label count that is not the row count, no rows, or a class index out
// of range.
func CheckData(x *Binned, y []uint8, classes int, p Params) error {
	if err := p.Validate(x.F); err != nil {
		return err
	}
	if len(y) != x.N {
		return fmt.Errorf("train: %d labels for %d rows", len(y), x.N)
	}
	if x.N == 0 {
		return errors.New("train: no samples")
	}
	if classes < 1 || classes > 255 {
		return fmt.Errorf("train: %d classes", classes)
	}
	for i, c := range y {
		if int(c) >= classes {
			return fmt.Errorf("train: row %d has class index %d of %d", i, c, classes)
		}
	}
	return nil
}

// NewForest assembles grown trees (in tree order) and their impurity
// decreases into a Forest whose importances sum to 1.
func NewForest(classes, features int, trees []Tree, imp [][]float64) *Forest {
	f := &Forest{Classes: classes, Features: features, Trees: trees, Importance: make([]float64, features)}
	// Sum in tree order, so the floats do not depend on which worker or
	// batch grew which tree.
	for _, ti := range imp {
		for k, v := range ti {
			f.Importance[k] += v
		}
	}
	total := 0.0
	for _, v := range f.Importance {
		total += v
	}
	if total > 0 {
		for k := range f.Importance {
			f.Importance[k] /= total
		}
	}
	return f
}

// cpuGrower is the CPU Grower: one worker's scratch space, growing one tree
// at a time. A handle is an index into ranges, the node's rows being
// rows[lo:hi].
type cpuGrower struct {
	x       *Binned
	y       []uint8
	classes int
	p       Params
	weight  []uint32
	rows    []int32
	tmp     []int32
	ranges  [][2]int
	hist    []int64 // bins × classes for one feature
	seen    [256]bool
	used    []uint8 // bins present in the node, for one feature
}

func newGrower(x *Binned, y []uint8, classes int, p Params) *cpuGrower {
	return &cpuGrower{
		x: x, y: y, classes: classes, p: p,
		weight: make([]uint32, x.N), rows: make([]int32, 0, x.N), tmp: make([]int32, x.N),
		hist: make([]int64, 256*classes),
	}
}

// Roots draws the bootstrap of one tree.
func (g *cpuGrower) Roots(trees []uint64) ([][]int64, []int, error) {
	if len(trees) != 1 {
		return nil, nil, fmt.Errorf("cpu grower: %d trees in a batch (grows one at a time)", len(trees))
	}
	t := trees[0]
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
	g.ranges = append(g.ranges[:0], [2]int{0, len(g.rows)})
	return [][]int64{root}, []int{0}, nil
}

// appendProbs appends a leaf's class probabilities, its counts over their
// total, to dst.
func appendProbs(dst []float32, counts []int64) []float32 {
	var total int64
	for _, v := range counts {
		total += v
	}
	for _, v := range counts {
		dst = append(dst, float32(float64(v)/float64(total)))
	}
	return dst
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

// Splits finds each task's best split.
func (g *cpuGrower) Splits(tasks []Task) ([]Split, error) {
	out := make([]Split, len(tasks))
	for k, t := range tasks {
		out[k] = g.split(t)
	}
	return out, nil
}

// split finds a node's best split over its candidate features. Ties go to
// the lower feature index, then the lower bin.
func (g *cpuGrower) split(t Task) Split {
	c := g.classes
	r := g.ranges[t.Handle]
	rows := g.rows[r[0]:r[1]]
	counts := t.Counts
	var total int64
	for _, v := range counts {
		total += v
	}
	minLeaf := int64(g.p.MinSamplesLeaf)
	best := Split{Feature: -1}
	left := make([]int64, c)
	for _, f := range t.Feats {
		// g.hist is all zero here, and only the bins a node uses are
		// visited and cleared: deep nodes touch few of the 256.
		col := g.x.Codes[f*g.x.N : (f+1)*g.x.N]
		used := g.used[:0]
		for _, i := range rows {
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
				r := float64(counts[k] - left[k])
				sl += float64(l * l) // explicit rounding: no FMA, same bits on every build
				sr += float64(r * r)
			}
			score := sl/float64(nl) + sr/float64(nr)
			if score > best.Score || (score == best.Score && best.Feature >= 0 && f < best.Feature) {
				best = Split{Feature: f, Bin: code, Score: score, Left: append([]int64(nil), left...)}
			}
		}
		for _, code := range used {
			clear(g.hist[int(code)*c : int(code)*c+c])
			g.seen[code] = false
		}
		g.used = used
	}
	return best
}

// Partition splits each task's rows in place.
func (g *cpuGrower) Partition(tasks []Task, splits []Split) ([][2]int, error) {
	out := make([][2]int, len(tasks))
	for k, t := range tasks {
		r := g.ranges[t.Handle]
		mid := g.partition(r[0], r[1], splits[k].Feature, splits[k].Bin)
		g.ranges = append(g.ranges, [2]int{r[0], mid}, [2]int{mid, r[1]})
		out[k] = [2]int{len(g.ranges) - 2, len(g.ranges) - 1}
	}
	return out, nil
}

// partition reorders rows[lo:hi] so rows going left come first, keeping
// their relative order, and returns the boundary.
func (g *cpuGrower) partition(lo, hi, f int, bin uint8) int {
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
