package composite

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var nan = float32(math.NaN())

func TestMedianRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		vals []float32
		want float32
	}{
		{[]float32{0.3}, 0.3},
		{[]float32{0.3, nan, 0.1, 0.2}, 0.2},
		{[]float32{0.4, 0.1}, float32(0.4+0.1) * 0.5},
		{[]float32{0.1, 0.2, 0.3, 0.4}, float32(float32(0.2)+float32(0.3)) * 0.5},
		{[]float32{nan, nan}, nan},
		{[]float32{}, nan},
		{[]float32{0.5, 0.5, 0.1}, 0.5},
	}
	for _, c := range cases {
		dates := make([][]float32, len(c.vals))
		for d, v := range c.vals {
			dates[d] = []float32{v}
		}
		dst := []float32{-1}
		if err := Median(dst, dates); err != nil {
			t.Fatal(err)
		}
		if got := dst[0]; got != c.want && !(got != got && c.want != c.want) {
			t.Errorf("median %v = %v, want %v", c.vals, got, c.want)
		}
	}
}

// TestMedianAgainstSort checks the parallel insertion-sort median against
// a plain sort on random data with holes, over many pixels.
func TestMedianAgainstSort(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	const n, d = 100_003, 7
	dates := make([][]float32, d)
	for k := range dates {
		dates[k] = make([]float32, n)
		for i := range dates[k] {
			if r.IntN(4) == 0 {
				dates[k][i] = nan
			} else {
				dates[k][i] = float32(r.IntN(50)) / 100 // ties on purpose
			}
		}
	}
	dst := make([]float32, n)
	if err := Median(dst, dates); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var v []float32
		for k := range d {
			if x := dates[k][i]; x == x {
				v = append(v, x)
			}
		}
		slices.Sort(v)
		want := nan
		switch {
		case len(v)%2 == 1:
			want = v[len(v)/2]
		case len(v) > 0:
			want = (v[len(v)/2-1] + v[len(v)/2]) * 0.5
		}
		if dst[i] != want && !(dst[i] != dst[i] && want != want) {
			t.Fatalf("pixel %d: %v from %v, want %v", i, dst[i], v, want)
		}
	}
	if err := Median(dst, [][]float32{make([]float32, 3)}); err == nil {
		t.Error("mismatched lengths accepted")
	}
}

func TestMaskAndCount(t *testing.T) {
	t.Parallel()
	scl := []uint8{4, 8, 3, 5, 0, 6}
	b1 := []float32{0.1, 0.2, 0.3, nan, 0.5, 0.6}
	b2 := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	valid := make([]bool, 6)
	if err := Mask(valid, scl, [][]float32{b1, b2}, DefaultDropSCL); err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, false, false, false, true}
	if !slices.Equal(valid, want) {
		t.Errorf("valid %v, want %v", valid, want)
	}
	if b2[1] == b2[1] || b2[3] == b2[3] || b2[0] != 0.1 {
		t.Errorf("masked band %v", b2)
	}
	count := make([]uint8, 6)
	if err := Count(count, [][]bool{valid, {true, true, false, false, false, false}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(count, []uint8{2, 1, 0, 0, 0, 1}) {
		t.Errorf("count %v", count)
	}
}

func TestReflectanceQuantise(t *testing.T) {
	t.Parallel()
	r := Reflectance([]uint16{0, 1000, 1234, 65535}, 0, 0.0001, -0.1)
	if r[0] == r[0] || math.Abs(float64(r[1])) > 1e-7 || math.Abs(float64(r[2])-0.0234) > 1e-7 {
		t.Errorf("reflectance %v", r)
	}
	dn := make([]uint16, 5)
	Quantise(dn, []float32{nan, 0, 0.0234, -0.5, 9}, 0.0001, -0.1)
	if !slices.Equal(dn, []uint16{0, 1000, 1234, 1, 65535}) {
		t.Errorf("quantised %v", dn)
	}
}
