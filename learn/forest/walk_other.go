//go:build !amd64

package forest

// vectorWalk is false: only amd64 has a vector walk.
var vectorWalk = false

// walkWords is never reached where vectorWalk is false (Compile packs no
// words); it walks the scalar way for completeness.
func (f *Compiled) walkWords(rows []uint8, n, nf int, acc []float32) {
	f.walkScalar(rows, n, nf, acc)
}

// codeVector is false: only amd64 codes values by vectors.
func codeVector(k EdgeKeys, vals []float32, out []uint8) (ok bool) { return false }
