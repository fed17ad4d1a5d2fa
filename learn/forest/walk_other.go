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

// CPUReport says which of the CPU's ways the forest's walk and binning
// take here, for lulc doctor: the scalar one off amd64.
func CPUReport() string {
	return "no AVX-512 (not amd64): the forest walks and bins one value at a time"
}
