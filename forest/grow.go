package forest

import (
	"fmt"

	"github.com/lulc/lulc/internal/rng"
)

// Task is a node of the level being grown whose best split an Engine
// must find.
type Task struct {
	Tree   int   // position of the node's tree in the batch
	Handle int   // the engine's name for the node's rows
	Feats  []int // the candidate features, drawn for this node
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

// Engine does the row work of growing a batch of trees level by level:
// the CPU grower and the GPU trainer in package cuda. Grow does the rest
// (which nodes to split, feature draws, tie rules, the tree arrays), so
// every engine grows the same trees.
type Engine interface {
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
// with their impurity decrease per feature.
func Grow(e Engine, trees []uint64, classes, features int, p Params) ([]Tree, [][]float64, error) {
	if err := p.Validate(features); err != nil {
		return nil, nil, err
	}
	roots, handles, err := e.Roots(trees)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Tree, len(trees))
	imp := make([][]float64, len(trees))
	add := func(t int) int32 {
		tr := &out[t]
		tr.Feature = append(tr.Feature, -1)
		tr.Bin = append(tr.Bin, 0)
		tr.Left = append(tr.Left, -1)
		tr.Right = append(tr.Right, -1)
		tr.Leaf = append(tr.Leaf, -1)
		return int32(len(tr.Feature) - 1)
	}
	level := make([]pending, len(trees))
	for t := range trees {
		imp[t] = make([]float64, features)
		level[t] = pending{tree: t, index: add(t), handle: handles[t], counts: roots[t]}
	}
	mtry := p.mtry(features)
	perm := make([]int, features)
	for len(level) > 0 {
		var tasks []Task
		of := make([]int, len(level)) // task of each node, -1 for a leaf
		for k, nd := range level {
			of[k] = -1
			if !splittable(nd, p) {
				continue
			}
			of[k] = len(tasks)
			tasks = append(tasks, Task{Tree: nd.tree, Handle: nd.handle, Feats: drawFeatures(perm, mtry, p.Seed, trees[nd.tree], nd.id)})
		}
		splits, err := e.Splits(tasks)
		if err != nil {
			return nil, nil, err
		}
		if len(splits) != len(tasks) {
			return nil, nil, fmt.Errorf("grow: %d splits for %d tasks", len(splits), len(tasks))
		}
		var taken []Task
		var chosen []Split
		var next []pending
		for k, nd := range level {
			tr := &out[nd.tree]
			var s Split
			if of[k] >= 0 {
				s = splits[of[k]]
			}
			gain := 0.0
			if of[k] >= 0 && s.Feature >= 0 {
				var total int64
				for _, v := range nd.counts {
					total += v
				}
				gain = s.Score - purity(nd.counts, total)
				if !(gain > 1e-12*float64(total)) {
					s.Feature = -1
				}
			}
			if of[k] < 0 || s.Feature < 0 {
				tr.Leaf[nd.index] = int32(len(tr.Probs) / classes)
				tr.Probs = append(tr.Probs, probs(nd.counts)...)
				continue
			}
			imp[nd.tree][s.Feature] += gain
			tr.Feature[nd.index], tr.Bin[nd.index] = int16(s.Feature), s.Bin
			l, r := add(nd.tree), add(nd.tree)
			tr.Left[nd.index], tr.Right[nd.index] = l, r
			right := make([]int64, classes)
			for c := range right {
				right[c] = nd.counts[c] - s.Left[c]
			}
			taken = append(taken, tasks[of[k]])
			chosen = append(chosen, s)
			next = append(next,
				pending{tree: nd.tree, id: 2*nd.id + 1, depth: nd.depth + 1, index: l, counts: s.Left},
				pending{tree: nd.tree, id: 2*nd.id + 2, depth: nd.depth + 1, index: r, counts: right})
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
	return out, imp, nil
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

// drawFeatures returns a node's candidate features: the first mtry of a
// partial Fisher–Yates shuffle keyed by (seed, tree, node), in draw order.
// perm is scratch of length features.
func drawFeatures(perm []int, mtry int, seed, tree, id uint64) []int {
	for i := range perm {
		perm[i] = i
	}
	for k := range mtry {
		j := k + int(rng.Hash(seed, tree, id, 0xfea7, uint64(k))%uint64(len(perm)-k))
		perm[k], perm[j] = perm[j], perm[k]
	}
	return append([]int(nil), perm[:mtry]...)
}

// Mtry is the number of candidate features per node for nf features.
func (p Params) Mtry(features int) int { return p.mtry(features) }
