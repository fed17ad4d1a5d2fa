package forest

import "golang.org/x/sys/cpu"

// vectorWalk reports whether Proba walks forests that fit the words with
// AVX-512 (walk512, accumulate512); tests turn it off to compare with the
// scalar walk.
var vectorWalk = cpu.X86.HasAVX512F

// walk512 walks groups × 64 rows (codes row-major, stride bytes apart,
// readable 3 bytes past the last group) through one tree's words for
// depth steps, and writes each row's final node into leaves.
//
//go:noescape
func walk512(words *uint32, rows *uint8, stride, depth, groups int, leaves *uint32)

// accumulate512 adds n rows' leaf probabilities from trees trees (leaves:
// each tree's final nodes, stride apart; leafRows and probs: each tree's
// Compiled.leaf and probabilities) to the rows' sums in acc, tree by tree
// in order. classes must be at most 16.
//
//go:noescape
func accumulate512(leaves *uint32, stride, n, trees int, leafRows **int32, probs **float32, classes int, acc *float32)

// walkBatch is the number of trees whose leaves accumulate512 adds in one
// call: each row's sums are then loaded and stored once per batch.
const walkBatch = 8

// walkWords adds the chunk's rows' leaf probabilities over every tree to
// acc (n rows × classes), with AVX-512: each tree walks the rows 64 at a
// time (walk512), then a batch of trees' leaves is added row by row
// (accumulate512). rows holds the codes row-major, nf bytes a row,
// padded to a multiple of 64 rows and 4 bytes past them.
func (f *Compiled) walkWords(rows []uint8, n, nf int, acc []float32) {
	np := (n + 63) &^ 63
	if len(rows) < np*nf+4 {
		panic("forest: walkWords: rows not padded")
	}
	leaves := make([]uint32, walkBatch*np)
	var leafRows [walkBatch]*int32
	var probs [walkBatch]*float32
	for t0 := 0; t0 < len(f.words); t0 += walkBatch {
		nt := min(walkBatch, len(f.words)-t0)
		for b := range nt {
			t := t0 + b
			walk512(&f.words[t][0], &rows[0], nf, f.depth[t], np/64, &leaves[b*np])
			leafRows[b], probs[b] = &f.leaf[t][0], &f.probs[t][0]
		}
		accumulate512(&leaves[0], np, n, nt, &leafRows[0], &probs[0], f.classes, &acc[0])
	}
}

// code512 codes n values against nkeys ≥ 1 keys as EdgeKeys.Code does,
// sixteen at a time with AVX-512.
//
//go:noescape
func code512(keys *int32, nkeys int, vals *float32, n int, out *uint8)

// codeVector codes vals into out with code512 where AVX-512 runs; ok is
// false where it does not.
func codeVector(k EdgeKeys, vals []float32, out []uint8) (ok bool) {
	if !vectorWalk || len(k) == 0 {
		return false
	}
	if len(vals) > 0 {
		code512(&k[0], len(k), &vals[0], len(vals), &out[0])
	}
	return true
}

// CPUReport says which of the CPU's ways the forest's walk and binning
// take here, for lulc doctor.
func CPUReport() string {
	if vectorWalk {
		return "AVX-512: the forest walks and bins in vectors"
	}
	return "no AVX-512: the forest walks and bins one value at a time"
}
