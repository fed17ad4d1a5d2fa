package forest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/lulc/lulc/internal/rng"
)

// Task is a node of the level being grown whose best split a Grower
// must find.
type Task struct {
	Tree   int     // position of the node's tree in the batch
	Handle int     // the grower's name for the node's rows
	Feats  []int   // the candidate features, drawn for this node
	Counts []int64 // the node's (bootstrap-weighted) class counts
}

// Split is the best split of a task's node: rows whose code for Feature is
// <= Bin go left. Score is Σ left² / nl + Σ right² / nr over the class
// counts (what Gini splits maximise) and Left the left child's class
// counts. Feature is -1 when no split leaves MinSamplesLeaf on each side.
type Split struct {
	Feature int
	Bin     uint8
	Score   float64
	Left    []int64
}

// Grower does the row work of growing a batch of trees level by level:
// the CPU grower and the GPU trainer in package cuda. Grow does the rest
// (which nodes to split, feature draws, tie rules, the tree arrays), so
// every grower grows the same trees.
type Grower interface {
	// Roots draws the bootstrap of each tree (tree numbers, as keyed in
	// the random numbers) and returns each root's class counts and handle.
	Roots(trees []uint64) (counts [][]int64, handles []int, err error)
	// Splits returns each task's best split over its candidate features:
	// the highest Score, ties to the lower feature, then the lower bin.
	Splits(tasks []Task) ([]Split, error)
	// Partition sends the rows of each task to the children of its split
	// and returns the children's handles.
	Partition(tasks []Task, splits []Split) (children [][2]int, err error)
}

// pending is a node of the current level.
type pending struct {
	tree   int
	id     uint64 // breadth-first position in a complete binary tree
	depth  int
	index  int32 // position in the tree's arrays
	handle int
	counts []int64
}

// Grow grows the trees numbered trees (one batch) with e; it returns them
// with their impurity decrease per feature. The host's share of the work
// (decisions, feature draws, tree arrays) runs in parallel over the
// batch's trees; the result does not depend on it. Grow checks ctx before
// each level, so that an interrupt stops a fit within one level's work.
func Grow(ctx context.Context, e Grower, trees []uint64, classes, features int, p Params) ([]Tree, [][]float64, error) {
	if err := p.Validate(features); err != nil {
		return nil, nil, err
	}
	roots, handles, err := e.Roots(trees)
	if err != nil {
		return nil, nil, err
	}
	g := &grow{trees: trees, classes: classes, p: p, mtry: p.mtry(features),
		out: make([]Tree, len(trees)), imp: make([][]float64, len(trees))}
	level := make([]pending, len(trees))
	for t := range trees {
		g.imp[t] = make([]float64, features)
		level[t] = pending{tree: t, index: g.add(t), handle: handles[t], counts: roots[t]}
	}
	workers := min(len(trees), runtime.GOMAXPROCS(0))
	for len(level) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("grow: %w", err)
		}
		// A level lists its nodes tree by tree (children follow their
		// parents' order), so it cuts into per-tree segments that workers
		// handle apart and that join back in order.
		segs := segments(level, workers)
		parts := make([]part, len(segs))
		eachPart(parts, func(k int) { parts[k].plan(g, level[segs[k][0]:segs[k][1]], features) })
		nt := 0
		for _, pt := range parts {
			nt += len(pt.tasks)
		}
		tasks := make([]Task, 0, nt)
		for k := range parts {
			parts[k].first = len(tasks)
			tasks = append(tasks, parts[k].tasks...)
		}
		splits, err := e.Splits(tasks)
		if err != nil {
			return nil, nil, err
		}
		if len(splits) != len(tasks) {
			return nil, nil, fmt.Errorf("grow: %d splits for %d tasks", len(splits), len(tasks))
		}
		eachPart(parts, func(k int) { parts[k].apply(g, level[segs[k][0]:segs[k][1]], splits) })
		nt, nn := 0, 0
		for _, pt := range parts {
			nt, nn = nt+len(pt.taken), nn+len(pt.next)
		}
		taken, chosen, next := make([]Task, 0, nt), make([]Split, 0, nt), make([]pending, 0, nn)
		for _, pt := range parts {
			taken, chosen, next = append(taken, pt.taken...), append(chosen, pt.chosen...), append(next, pt.next...)
		}
		if len(taken) > 0 {
			children, err := e.Partition(taken, chosen)
			if err != nil {
				return nil, nil, err
			}
			for k, ch := range children {
				next[2*k].handle, next[2*k+1].handle = ch[0], ch[1]
			}
		}
		level = next
	}
	return g.out, g.imp, nil
}

// grow is the state of one Grow call shared by its workers; each tree's
// arrays are touched by one worker at a time.
type grow struct {
	trees   []uint64
	classes int
	p       Params
	mtry    int
	out     []Tree
	imp     [][]float64
}

// add appends an undecided node to tree t.
func (g *grow) add(t int) int32 {
	tr := &g.out[t]
	tr.Feature = append(tr.Feature, -1)
	tr.Bin = append(tr.Bin, 0)
	tr.Left = append(tr.Left, -1)
	tr.Right = append(tr.Right, -1)
	tr.Leaf = append(tr.Leaf, -1)
	return int32(len(tr.Feature) - 1)
}

// part is one worker's segment of a level.
type part struct {
	of     []int // task of each node within tasks, -1 for a leaf
	tasks  []Task
	first  int // index of tasks[0] in the level's tasks
	taken  []Task
	chosen []Split
	next   []pending
}

// plan draws the candidate features of the segment's splittable nodes.
func (pt *part) plan(g *grow, nodes []pending, features int) {
	perm := make([]int, features)
	// One allocation per segment for the feature draws: levels can hold
	// millions of nodes.
	drawn := make([]int, 0, len(nodes)*g.mtry)
	pt.of = make([]int, len(nodes))
	for k, nd := range nodes {
		pt.of[k] = -1
		if !splittable(nd, g.p) {
			continue
		}
		pt.of[k] = len(pt.tasks)
		drawn = drawFeatures(drawn, perm, g.mtry, g.p.Seed, g.trees[nd.tree], nd.id)
		pt.tasks = append(pt.tasks, Task{Tree: nd.tree, Handle: nd.handle, Feats: drawn[len(drawn)-g.mtry:], Counts: nd.counts})
	}
}

// apply turns the segment's nodes into leaves or splits, in node order.
func (pt *part) apply(g *grow, nodes []pending, splits []Split) {
	c := g.classes
	rights := make([]int64, len(pt.tasks)*c)
	// Size everything once: growing slices of millions of nodes node by
	// node costs more than the decisions.
	pt.taken = make([]Task, 0, len(pt.tasks))
	pt.chosen = make([]Split, 0, len(pt.tasks))
	pt.next = make([]pending, 0, 2*len(pt.tasks))
	for lo := 0; lo < len(nodes); {
		hi := lo
		for hi < len(nodes) && nodes[hi].tree == nodes[lo].tree {
			hi++
		}
		tr := &g.out[nodes[lo].tree]
		n := 2 * (hi - lo)
		tr.Feature, tr.Bin = slices.Grow(tr.Feature, n), slices.Grow(tr.Bin, n)
		tr.Left, tr.Right, tr.Leaf = slices.Grow(tr.Left, n), slices.Grow(tr.Right, n), slices.Grow(tr.Leaf, n)
		tr.Probs = slices.Grow(tr.Probs, (hi-lo)*c)
		lo = hi
	}
	for k, nd := range nodes {
		tr := &g.out[nd.tree]
		var s Split
		if pt.of[k] >= 0 {
			s = splits[pt.first+pt.of[k]]
		}
		gain := 0.0
		if pt.of[k] >= 0 && s.Feature >= 0 {
			var total int64
			for _, v := range nd.counts {
				total += v
			}
			gain = s.Score - purity(nd.counts, total)
			if !(gain > 1e-12*float64(total)) {
				s.Feature = -1
			}
		}
		if pt.of[k] < 0 || s.Feature < 0 {
			tr.Leaf[nd.index] = int32(len(tr.Probs) / c)
			tr.Probs = appendProbs(tr.Probs, nd.counts)
			continue
		}
		g.imp[nd.tree][s.Feature] += gain
		tr.Feature[nd.index], tr.Bin[nd.index] = int16(s.Feature), s.Bin
		l, r := g.add(nd.tree), g.add(nd.tree)
		tr.Left[nd.index], tr.Right[nd.index] = l, r
		right := rights[:c:c]
		rights = rights[c:]
		for j := range right {
			right[j] = nd.counts[j] - s.Left[j]
		}
		pt.taken = append(pt.taken, pt.tasks[pt.of[k]])
		pt.chosen = append(pt.chosen, s)
		pt.next = append(pt.next,
			pending{tree: nd.tree, id: 2*nd.id + 1, depth: nd.depth + 1, index: l, counts: s.Left},
			pending{tree: nd.tree, id: 2*nd.id + 2, depth: nd.depth + 1, index: r, counts: right})
	}
}

// segments cuts a level into at most n runs of whole trees with about
// equal node counts, as [start, end) pairs.
func segments(level []pending, n int) [][2]int {
	var out [][2]int
	target := (len(level) + n - 1) / n
	start := 0
	for i := 1; i <= len(level); i++ {
		if i == len(level) || (i-start >= target && level[i].tree != level[i-1].tree) {
			out = append(out, [2]int{start, i})
			start = i
		}
	}
	return out
}

// eachPart runs f over the parts in parallel (inline for one).
func eachPart(parts []part, f func(k int)) {
	if len(parts) == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { f(k) })
	}
	wg.Wait()
}

// splittable says whether a node may split at all: below the depth limit,
// impure, and with room for MinSamplesLeaf (bootstrap-weighted) per side.
func splittable(nd pending, p Params) bool {
	var total int64
	nonzero := 0
	for _, v := range nd.counts {
		total += v
		if v > 0 {
			nonzero++
		}
	}
	return nd.depth < p.MaxDepth && nonzero > 1 && total >= 2*int64(p.MinSamplesLeaf)
}

// drawFeatures appends a node's candidate features to dst: the first mtry
// of a partial Fisher–Yates shuffle keyed by (seed, tree, node), in draw
// order. perm is scratch of length features.
func drawFeatures(dst, perm []int, mtry int, seed, tree, id uint64) []int {
	for i := range perm {
		perm[i] = i
	}
	for k := range mtry {
		j := k + int(rng.Hash(seed, tree, id, 0xfea7, uint64(k))%uint64(len(perm)-k))
		perm[k], perm[j] = perm[j], perm[k]
	}
	return append(dst, perm[:mtry]...)
}

// Mtry is the number of candidate features per node for nf features.
func (p Params) Mtry(features int) int { return p.mtry(features) }
