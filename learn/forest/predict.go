package forest

import "fmt"

// pnode is a tree node packed for the walk in 8 bytes: a split's feature,
// bin and left child (the right child follows it). A leaf steps onto
// itself (feature 0, bin 255, above every code), so that a walk takes
// its tree's depth of steps without asking, row by row, whether a leaf
// was reached: a branch each step that mispredicts where paths end.
type pnode struct {
	feature uint16
	bin     uint8
	_       uint8
	next    int32
}

// Compiled is a forest laid out for prediction.
type Compiled struct {
	classes, features int
	trees             [][]pnode
	leaf              [][]int32 // each node's probability row; -1 for a split
	depth             []int     // each tree's deepest level
	probs             [][]float32
	// words holds each tree's nodes in 4 bytes (feature | bin<<8 |
	// next<<16; a leaf steps onto itself as in trees) for the vector walk,
	// when it runs here and the forest fits: at most 256 features, 16
	// classes and 65,536 nodes a tree. Otherwise nil.
	words [][]uint32
}

// Compile packs the forest's trees for prediction. Trees must have been
// grown by Train or checked by Decode (children adjacent, after their
// parent).
func (f *Forest) Compile() *Compiled {
	c := &Compiled{classes: f.Classes, features: f.Features, trees: make([][]pnode, len(f.Trees)),
		leaf: make([][]int32, len(f.Trees)), depth: make([]int, len(f.Trees)), probs: make([][]float32, len(f.Trees))}
	for ti, t := range f.Trees {
		nodes := make([]pnode, len(t.Feature))
		leaf := make([]int32, len(t.Feature))
		for i := range nodes {
			if t.Feature[i] >= 0 {
				nodes[i] = pnode{feature: uint16(t.Feature[i]), bin: t.Bin[i], next: t.Left[i]}
				leaf[i] = -1
			} else {
				nodes[i] = pnode{bin: 255, next: int32(i)}
				leaf[i] = t.Leaf[i]
			}
		}
		c.depth[ti] = t.depth()
		c.trees[ti], c.leaf[ti], c.probs[ti] = nodes, leaf, t.Probs
	}
	c.words = c.packWords()
	return c
}

// packWords returns the trees' nodes as the vector walk's words, or nil
// when it does not run here or the forest does not fit them.
func (c *Compiled) packWords() [][]uint32 {
	if !vectorWalk || c.features > 256 || c.classes > 16 {
		return nil
	}
	words := make([][]uint32, len(c.trees))
	for ti, nodes := range c.trees {
		if len(nodes) > 1<<16 {
			return nil
		}
		w := make([]uint32, len(nodes))
		for i, nd := range nodes {
			w[i] = uint32(nd.feature) | uint32(nd.bin)<<8 | uint32(nd.next)<<16
		}
		words[ti] = w
	}
	return words
}

// Packed returns the trees' nodes back to back as little-endian 8-byte
// records (int16 feature, uint8 bin, pad, int32 next: the layout the GPU
// kernel reads), each tree's first node index, the leaf probabilities back
// to back and each tree's first probability index.
func (f *Compiled) Packed() (nodes []byte, nodeOff []int32, probs []float32, probOff []int32) {
	var nn, np int
	for ti, t := range f.trees {
		nn, np = nn+len(t), np+len(f.probs[ti])
	}
	nodes, probs = make([]byte, 0, 8*nn), make([]float32, 0, np)
	nodeOff, probOff = make([]int32, 0, len(f.trees)), make([]int32, 0, len(f.trees))
	for ti, t := range f.trees {
		nodeOff = append(nodeOff, int32(len(nodes)/8))
		probOff = append(probOff, int32(len(probs)))
		for i, nd := range t {
			// The GPU's format: a leaf is feature −1 with its probability row.
			feat, bin, next := nd.feature, nd.bin, nd.next
			if row := f.leaf[ti][i]; row >= 0 {
				feat, bin, next = 0xffff, 0, row
			}
			nodes = append(nodes, byte(feat), byte(feat>>8), bin, 0,
				byte(next), byte(next>>8), byte(next>>16), byte(next>>24))
		}
		probs = append(probs, f.probs[ti]...)
	}
	return nodes, nodeOff, probs, probOff
}

// Classes and Features report the forest's shape.
func (f *Compiled) Classes() int  { return f.classes }
func (f *Compiled) Features() int { return f.features }
func (f *Compiled) Trees() int    { return len(f.trees) }

// Proba writes each row's class probabilities, the mean over trees, into
// out (x.N × classes, row-major). Sums run in tree order in float32, so
// results do not depend on threading.
func (f *Compiled) Proba(x *Binned, out []float32) error {
	if x.F != f.features {
		return fmt.Errorf("predict: %d features, the forest has %d", x.F, f.features)
	}
	c := f.classes
	if len(out) != x.N*c {
		return fmt.Errorf("predict: output of %d for %d rows × %d classes", len(out), x.N, c)
	}
	const chunk = 4096
	inv := 1 / float32(len(f.trees))
	vector := f.words != nil && vectorWalk
	parallel((x.N+chunk-1)/chunk, func(k int) {
		lo, hi := k*chunk, min(x.N, (k+1)*chunk)
		acc := out[lo*c : hi*c]
		clear(acc)
		// Row-major codes for the chunk: a traversal then reads one row's
		// features from one cache line instead of one column per level.
		// The vector walk takes rows 64 at a time and reads 4 bytes where
		// it wants one: the padding keeps both inside the buffer.
		nf, n := x.F, hi-lo
		rows := make([]uint8, ((n+63)&^63)*nf+4)
		for ft := range nf {
			col := x.Codes[ft*x.N+lo : ft*x.N+hi]
			for i, v := range col {
				rows[i*nf+ft] = v
			}
		}
		if vector {
			f.walkWords(rows, n, nf, acc)
		} else {
			f.walkScalar(rows, n, nf, acc)
		}
		for j := range acc {
			acc[j] *= inv
		}
	})
	return nil
}

// walkScalar adds the chunk's rows' leaf probabilities over every tree to
// acc (n rows × classes), tree by tree in order. rows holds the codes
// row-major, nf bytes a row.
func (f *Compiled) walkScalar(rows []uint8, n, nf int, acc []float32) {
	c := f.classes
	for ti, nodes := range f.trees {
		probs, leaf := f.probs[ti], f.leaf[ti]
		// Walk a group of rows in lockstep, each its tree's depth of
		// steps (leaves step onto themselves): their node loads and
		// comparisons are independent, so the CPU overlaps them, and
		// no step asks whether a row is done.
		const group = 8
		for g := 0; g < n; g += group {
			m := min(group, n-g)
			var at [group]int32
			var base [group]int
			for r := range m {
				base[r] = (g + r) * nf
			}
			for range f.depth[ti] {
				for r := range m {
					nd := nodes[at[r]]
					code := rows[base[r]+int(nd.feature)]
					// 1 when code > bin: the right child.
					at[r] = nd.next + int32((uint32(nd.bin)-uint32(code))>>31)
				}
			}
			for r := range m {
				row := int(leaf[at[r]])
				p := probs[row*c : row*c+c]
				sum := acc[(g+r)*c : (g+r)*c+c]
				for j := range c {
					sum[j] += p[j]
				}
			}
		}
	}
}

// Classify returns each row's most probable class index (ties to the lower
// index) and that probability.
func (f *Compiled) Classify(x *Binned) ([]uint8, []float32, error) {
	c := f.classes
	prob := make([]float32, x.N*c)
	if err := f.Proba(x, prob); err != nil {
		return nil, nil, err
	}
	cls := make([]uint8, x.N)
	conf := make([]float32, x.N)
	for i := range x.N {
		row := prob[i*c : i*c+c]
		best := 0
		for j := 1; j < c; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		cls[i], conf[i] = uint8(best), row[best]
	}
	return cls, conf, nil
}

// Classify returns each row's most probable class index (ties to the lower
// index) and that probability.
func (f *Forest) Classify(x *Binned) ([]uint8, []float32, error) {
	return f.Compile().Classify(x)
}

// Nodes returns the number of nodes over all trees and the deepest level.
func (f *Forest) Nodes() (nodes, depth int) {
	for _, t := range f.Trees {
		nodes += len(t.Feature)
		depth = max(depth, t.depth())
	}
	return nodes, depth
}

// depth is the tree's deepest level (0: the root alone). Children come
// after their parent.
func (t *Tree) depth() int {
	d := make([]int, len(t.Feature))
	deepest := 0
	for n := range t.Feature {
		if t.Feature[n] >= 0 {
			d[t.Left[n]], d[t.Right[n]] = d[n]+1, d[n]+1
		}
		deepest = max(deepest, d[n])
	}
	return deepest
}
