package classifier

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/learn/forest"
)

// sweepLeafAdds is what forest_sweep adds to each class's sum for a leaf
// word (lulc.cu's sweep_leaf): a pair's float32 quotients, else its
// record's probabilities.
func sweepLeafAdds(w uint32, leaves []uint32, k int) []float32 {
	out := make([]float32, k)
	if w&sweepPair == 0 {
		rec := leaves[w&0x3fffffff:]
		j := 1
		for c := range k {
			if rec[0]>>c&1 != 0 {
				out[c] = math.Float32frombits(rec[j])
				j++
			}
		}
		return out
	}
	a, b := int(w&31), int(w>>5&31)
	na, tot := int(w>>10&1023), int(w>>20&1023)
	pa, pb := float32(na)/float32(tot), float32(tot-na)/float32(tot)
	for c := range k {
		switch c {
		case a:
			out[c] = pa
		case b:
			out[c] = pb
		}
	}
	return out
}

// TestSweepPairWord encodes every leaf of one or two classes that a count
// over a total of at most 1023 gives (as the forest's training writes
// them) and checks that the kernel's arithmetic gives the same bits back;
// rows that cannot be held so are refused.
func TestSweepPairWord(t *testing.T) {
	const k = 11
	for tot := 1; tot <= sweepMaxTotal; tot++ {
		for na := 0; na <= tot; na++ {
			row := make([]float32, k)
			row[3] = float32(float64(na) / float64(tot))
			row[7] = float32(float64(tot-na) / float64(tot))
			w, ok := sweepPairWord(row)
			if !ok {
				t.Fatalf("%d/%d: not encoded", na, tot)
			}
			got := sweepLeafAdds(w, nil, k)
			for c := range k {
				if math.Float32bits(got[c]) != math.Float32bits(row[c]) {
					t.Fatalf("%d/%d: class %d decodes to %v, want %v", na, tot, c, got[c], row[c])
				}
			}
		}
	}
	refused := [][]float32{
		{0.5, 0.25, 0.25},                   // three classes
		{float32(1) / 3, 0.5},               // the second is not what remains of the first
		{float32(1.0 / 3000), 1 - 1.0/3000}, // a total beyond 1023
		{float32(math.Pi / 4), 0},           // no count over a small total
	}
	for _, row := range refused {
		if w, ok := sweepPairWord(row); ok {
			if got := sweepLeafAdds(w, nil, len(row)); !sameFloats(got, row) {
				t.Errorf("%v encoded as %v", row, got)
			}
		}
	}
	// A probability that no small quotient rounds to must not be encoded.
	if _, ok := sweepPairWord([]float32{float32(math.Pi / 4), 0}); ok {
		t.Error("π/4 was encoded as a pair")
	}
}

func sameFloats(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// packed is c's packed arrays and class count, sweepNodes's arguments.
func packed(c *forest.Compiled) ([]byte, []int32, []float32, []int32, int) {
	nodes, nodeOff, probs, probOff := c.Packed()
	return nodes, nodeOff, probs, probOff, c.Classes()
}

// sweepClassify walks forest_sweep's words as the kernel does, in Go.
func sweepClassify(s sweepForest, c *forest.Compiled, x *forest.Binned) ([]uint8, []float32) {
	k, trees := c.Classes(), c.Trees()
	inv := 1 / float32(trees)
	cls, conf := make([]uint8, x.N), make([]float32, x.N)
	acc := make([]float32, k)
	for i := range x.N {
		clear(acc)
		for t := range trees {
			w := s.words[s.off[t]:]
			nd := w[0]
			for nd&sweepLeaf == 0 {
				feat, bin, next := nd&63, uint8(nd>>6), nd>>14
				if x.Codes[int(feat)*x.N+i] > bin {
					next++
				}
				nd = w[next]
			}
			for ci, v := range sweepLeafAdds(nd, s.leafWords, k) {
				acc[ci] += v
			}
		}
		best, top := 0, float32(0)
		for ci := range k {
			if v := acc[ci] * inv; ci == 0 || v > top {
				best, top = ci, v
			}
		}
		cls[i], conf[i] = uint8(best), top
	}
	return cls, conf
}

// TestSweepNodes packs forests of shallow (impure leaves) and deep trees,
// of 11 and 20 classes, and checks that the words walked as the kernel
// walks them give the CPU walk's classes and confidences bit for bit.
func TestSweepNodes(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct{ k, depth int }{{11, 8}, {11, 16}, {20, 12}} {
		const nf = 24
		x, y := gaussianRows(r, 30_000, nf, tc.k)
		p := forest.Params{Trees: 12, MaxDepth: tc.depth, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 4}
		fo, bins := fitForest(t, x[:20_000*nf], y[:20_000], nf, tc.k, p)
		c := fo.Compile()
		s, ok := sweepNodes(packed(c))
		if !ok {
			t.Fatalf("%d classes, depth %d: not packed", tc.k, tc.depth)
		}
		if s.pairs == 0 || s.pairs == s.leaves {
			t.Errorf("%d classes, depth %d: %d of %d leaves as pairs; the test wants both kinds", tc.k, tc.depth, s.pairs, s.leaves)
		}
		for tr, o := range s.off {
			if o%4 != 0 {
				t.Fatalf("tree %d starts at word %d, not on 16 bytes", tr, o)
			}
		}
		// Every record of up to eight words lies in one 32-byte sector.
		for _, w := range s.words {
			if w&sweepLeaf != 0 && w&sweepPair == 0 {
				at := int(w & 0x3fffffff)
				size := 1 + bits.OnesCount32(s.leafWords[at])
				if size <= 8 && at/8 != (at+size-1)/8 {
					t.Fatalf("a record of %d words at %d straddles a sector", size, at)
				}
			}
		}
		xv, _ := bins.Bin(x[20_000*nf:], nf)
		wantCls, wantConf, _ := c.Classify(xv)
		gotCls, gotConf := sweepClassify(s, c, xv)
		for i := range wantCls {
			if wantCls[i] != gotCls[i] || math.Float32bits(wantConf[i]) != math.Float32bits(gotConf[i]) {
				t.Fatalf("%d classes, depth %d, row %d: CPU %d/%v, sweep %d/%v", tc.k, tc.depth, i, wantCls[i], wantConf[i], gotCls[i], gotConf[i])
			}
		}
		t.Logf("%d classes, depth %d: %d nodes, longest tree %d, %d of %d leaves as pairs", tc.k, tc.depth, len(s.words), s.longest, s.pairs, s.leaves)
	}
}

// TestForestSweepBitExact runs forest_sweep on the device (its 8, 12, 16
// and 32 class kernels) with the share of shared memory lulc picks, with a share
// that leaves most of each tree in global memory, and forest_walk, each
// against the CPU walk bit for bit, over a row count that leaves the last
// block short.
func TestForestSweepBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(23, 24))
	for _, tc := range []struct{ k, depth int }{{11, 16}, {20, 12}, {7, 12}, {14, 10}} {
		const nf = 30
		x, y := gaussianRows(r, 60_000, nf, tc.k)
		p := forest.Params{Trees: 30, MaxDepth: tc.depth, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 6}
		fo, bins := fitForest(t, x[:35_000*nf], y[:35_000], nf, tc.k, p)
		c := fo.Compile()
		xv, _ := bins.Bin(x[35_000*nf:], nf)
		wantCls, wantConf, _ := c.Classify(xv)
		g, err := NewForest(d, c)
		if err != nil {
			t.Fatal(err)
		}
		if g.sweepCap == 0 {
			t.Fatalf("%d classes: forest_sweep not chosen", tc.k)
		}
		chosen := g.sweepCap
		for _, cap := range []int{chosen, 64, 0} {
			g.sweepCap = cap
			gotCls, gotConf, err := g.Classify(xv)
			if err != nil {
				t.Fatal(err)
			}
			for i := range wantCls {
				if wantCls[i] != gotCls[i] || math.Float32bits(wantConf[i]) != math.Float32bits(gotConf[i]) {
					t.Fatalf("%d classes (%s), %d nodes held: row %d: CPU %d/%v, GPU %d/%v", tc.k, g.sweepKernel, cap, i, wantCls[i], wantConf[i], gotCls[i], gotConf[i])
				}
			}
		}
		g.Close()
	}
}
