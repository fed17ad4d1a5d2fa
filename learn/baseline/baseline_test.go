package baseline

import (
	"math/rand/v2"
	"testing"
)

// TestGolearnOnSmallSet trains golearn on two well separated classes and
// expects it to find them. Each tree sees every feature: with a subset per
// tree, golearn's trees that lack the informative features vote at random
// (seen here: 284 of 600 training rows right with 2 of 4 features per
// tree), which is golearn's weakness to measure, not the adapter's.
func TestGolearnOnSmallSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, nf = 600, 4
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		c := i % 2
		y[i] = uint8(c)
		for f := range nf {
			x[i*nf+f] = float32(r.NormFloat64()*0.3 + float64(3*c*(f%2)))
		}
	}
	f, err := Train(x[:400*nf], nf, y[:400], 2, 10, nf, 7)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := f.Predict(x[400*nf:], nf)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i, p := range pred {
		if p == y[400+i] {
			ok++
		}
	}
	if acc := float64(ok) / float64(len(pred)); acc < 0.9 {
		t.Errorf("golearn accuracy %.3f on separable classes", acc)
	}
	if _, err := Train(x, nf, y[:10], 2, 10, 2, 7); err == nil {
		t.Error("mismatched rows accepted")
	}
}
