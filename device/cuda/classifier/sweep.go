package classifier

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// forest_sweep's 4-byte node words (lulc.cu): a split holds its feature in
// bits 0–5, its bin in 6–13 and its left child in 14–30; a leaf sets bit
// 31 and holds either, with bit 30 set, two classes (0–4, 5–9), the first
// one's count (10–19) and the total (20–29), whose float32 quotients are
// its probabilities, or the index (bits 0–29) of its record among the
// leaf words: a mask of its non-zero classes, then their probabilities in
// class order, placed so that a record of up to eight words lies in one
// 32-byte sector.
const (
	sweepLeaf     = 1 << 31
	sweepPair     = 1 << 30
	sweepMaxNodes = 1 << 17       // a left child's 17 bits
	sweepMaxTotal = 1023          // a count's 10 bits
	sweepRows     = 1024          // SWEEP_ROWS: the rows a block sweeps the trees over
	sweepStride   = sweepRows + 4 // SWEEP_STRIDE: a feature's bytes of codes in shared memory
	sweepBlock    = 512           // SWEEP_BLOCK: a block's threads, two rows each
)

// sweepForest is a forest in forest_sweep's layout: each tree's words
// padded to a multiple of four (the kernel copies a tree 16 bytes at a
// time), its first word's index and its node count.
type sweepForest struct {
	words     []uint32
	off, lens []int32
	leafWords []uint32 // the records of the leaves not held as pairs
	longest   int      // the most nodes of a tree
	pairs     int      // leaves held as two counts, not a record
	leaves    int      // every leaf, pairs and records
}

// sweepNodes packs a forest for forest_sweep from its packed arrays
// (forest.Compiled.Packed) and class count, the trees in parallel. ok is
// false when a tree does not fit the words (more than 2¹⁷ nodes, more
// than 64 features or 32 classes, 2³⁰ words of leaf records);
// forest_walk serves such forests.
func sweepNodes(nodes []byte, nodeOff []int32, probs []float32, probOff []int32, k int) (s sweepForest, ok bool) {
	if k > 32 {
		return s, false
	}
	trees := make([]sweepForest, len(nodeOff))
	fits := make([]bool, len(nodeOff))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(nodeOff)) {
		wg.Go(func() {
			for t := int(next.Add(1) - 1); t < len(nodeOff); t = int(next.Add(1) - 1) {
				hi := len(nodes) / 8
				if t+1 < len(nodeOff) {
					hi = int(nodeOff[t+1])
				}
				trees[t], fits[t] = sweepTree(nodes[8*int(nodeOff[t]):8*hi], probs[probOff[t]:], k)
			}
		})
	}
	wg.Wait()
	for t, tr := range trees {
		if !fits[t] || len(s.leafWords)+len(tr.leafWords) >= sweepPair {
			return sweepForest{}, false
		}
		// Each tree's records start on a sector, so their placement holds.
		base := uint32(len(s.leafWords))
		for _, w := range tr.words {
			if w&sweepLeaf != 0 && w&sweepPair == 0 {
				w += base
			}
			s.words = append(s.words, w)
		}
		s.off = append(s.off, int32(len(s.words)-len(tr.words)))
		s.lens = append(s.lens, tr.lens[0])
		s.leafWords = append(s.leafWords, tr.leafWords...)
		s.longest = max(s.longest, tr.longest)
		s.pairs += tr.pairs
		s.leaves += tr.leaves
	}
	return s, true
}

// sweepTree packs one tree: its 8-byte packed nodes and its probability
// rows; its records start at 0, and its words and records are padded to
// 16 and 32 bytes.
func sweepTree(nodes []byte, probs []float32, k int) (s sweepForest, ok bool) {
	n := len(nodes) / 8
	if n > sweepMaxNodes {
		return s, false
	}
	s.lens, s.longest = []int32{int32(n)}, n
	s.words = make([]uint32, 0, (n+3)&^3)
	for j := range n {
		r := nodes[8*j : 8*j+8]
		feat := int16(uint16(r[0]) | uint16(r[1])<<8)
		next := int32(uint32(r[4]) | uint32(r[5])<<8 | uint32(r[6])<<16 | uint32(r[7])<<24)
		if feat >= 0 {
			// Children are numbered within their tree; the right one
			// follows the left.
			if next < 0 || int(next)+1 >= n || feat > 63 {
				return s, false
			}
			s.words = append(s.words, uint32(feat)|uint32(r[2])<<6|uint32(next)<<14)
			continue
		}
		s.leaves++
		if next < 0 || (int(next)+1)*k > len(probs) {
			return s, false
		}
		row := probs[int(next)*k : int(next)*k+k]
		if w, ok := sweepPairWord(row); ok {
			s.words = append(s.words, w)
			s.pairs++
			continue
		}
		s.words = append(s.words, sweepLeaf|uint32(s.record(row)))
	}
	for len(s.words)%4 != 0 {
		s.words = append(s.words, 0)
	}
	for len(s.leafWords)%8 != 0 {
		s.leafWords = append(s.leafWords, 0)
	}
	return s, true
}

// record appends a leaf's record to the leaf words and returns its index.
func (s *sweepForest) record(row []float32) int {
	var mask uint32
	var vals []uint32
	for c, p := range row {
		if p != 0 {
			mask |= 1 << c
			vals = append(vals, math.Float32bits(p))
		}
	}
	size := 1 + len(vals)
	if at := len(s.leafWords) % 8; at+size > 8 {
		for len(s.leafWords)%8 != 0 {
			s.leafWords = append(s.leafWords, 0)
		}
	}
	at := len(s.leafWords)
	s.leafWords = append(append(s.leafWords, mask), vals...)
	return at
}

// sweepPairWord encodes a leaf's probabilities as two classes and counts
// when at most two are non-zero and each is the float32 quotient of a
// count over a total of at most 1023, bit for bit; the kernel divides
// them back (__fdiv_rn, as float32 division here) and adds nothing for
// the other classes, which leaves their sums as they are.
func sweepPairWord(row []float32) (uint32, bool) {
	a, b := -1, -1
	for c, p := range row {
		if p == 0 {
			continue
		}
		switch {
		case a < 0:
			a = c
		case b < 0:
			b = c
		default:
			return 0, false
		}
	}
	if a < 0 || a > 31 || b > 31 {
		return 0, false
	}
	pa := row[a]
	// A count over a total of at most 1023 that rounds to pa is, in
	// lowest terms, a convergent of pa's continued fraction (its error,
	// under 2⁻²⁴·pa, is below 1/(2·1023²)): try those.
	for _, q := range convergents(float64(pa), sweepMaxTotal) {
		na, tot := q[0], q[1]
		if na > tot || quotient(na, tot) != math.Float32bits(pa) {
			continue
		}
		if b < 0 {
			return sweepLeaf | sweepPair | uint32(a) | uint32(a)<<5 | uint32(na)<<10 | uint32(tot)<<20, true
		}
		if quotient(tot-na, tot) == math.Float32bits(row[b]) {
			return sweepLeaf | sweepPair | uint32(a) | uint32(b)<<5 | uint32(na)<<10 | uint32(tot)<<20, true
		}
	}
	return 0, false
}

// quotient is the bits of float32(n) / float32(d), rounded to nearest
// once, as __fdiv_rn computes it.
func quotient(n, d int) uint32 {
	return math.Float32bits(float32(n) / float32(d))
}

// convergents returns the convergents h/k of x ∈ (0, 1] with k ≤ most.
func convergents(x float64, most int) [][2]int {
	var out [][2]int
	h0, h1 := 0, 1 // h₋₂, h₋₁
	k0, k1 := 1, 0
	for range 40 {
		a := math.Floor(x)
		if a > float64(most) {
			break
		}
		ai := int(a)
		h, k := ai*h1+h0, ai*k1+k0
		if k > most {
			break
		}
		if k > 0 {
			out = append(out, [2]int{h, k})
		}
		h0, h1, k0, k1 = h1, h, k1, k
		f := x - a
		if f < 1e-12 {
			break
		}
		x = 1 / f
	}
	return out
}
