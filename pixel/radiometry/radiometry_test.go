package radiometry

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// scene makes a w × h tile of nb bands in lulc's stack encoding
// (reflectance = DN × 1e-4 − 0.1): a tenth of it dark water (reflectance
// about 0.01), the rest brighter land; shift is added to every
// reflectance (0.1: an offset left in).
func scene(r *rand.Rand, w, h, nb int, shift float64) [][]uint16 {
	dn := make([][]uint16, nb)
	for b := range dn {
		dn[b] = make([]uint16, w*h)
		for i := range dn[b] {
			refl := 0.05 + 0.3*r.Float64()
			if i%10 == 0 {
				refl = 0.005 + 0.01*r.Float64()
			}
			dn[b][i] = uint16(math.Round((refl + shift + 0.1) / 1e-4))
		}
	}
	return dn
}

// window cuts a window out of full-tile planes.
func window(dn [][]uint16, w, x, y, ww, wh int) [][]uint16 {
	out := make([][]uint16, len(dn))
	for b, p := range dn {
		for r := range wh {
			out[b] = append(out[b], p[(y+r)*w+x:(y+r)*w+x+ww]...)
		}
	}
	return out
}

// TestDarkIndependentOfWindows checks that the levels depend on the tile,
// not on how it is cut into windows, and sit where the scene's dark
// tenth puts them.
func TestDarkIndependentOfWindows(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	const w, h, nb = 301, 203, 3
	dn := scene(r, w, h, nb, 0)
	var levels [][]float64
	for _, cut := range []int{301, 64, 37} {
		hist := NewHistogram(nb, 1e-4, -0.1)
		for y := 0; y < h; y += cut {
			for x := 0; x < w; x += cut {
				ww, wh := min(cut, w-x), min(cut, h-y)
				if err := hist.Write(x, y, ww, wh, window(dn, w, x, y, ww, wh), nil, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		levels = append(levels, hist.Dark())
	}
	for _, l := range levels[1:] {
		if !slices.Equal(l, levels[0]) {
			t.Fatalf("windows of other sizes give levels %v, not %v", l, levels[0])
		}
	}
	for b, v := range levels[0] {
		if v < 0.004 || v > 0.016 {
			t.Errorf("band %d: dark level %v, want about 0.005–0.015", b, v)
		}
	}
}

// TestSuspect checks the two conventions' signatures: an offset left in
// and one removed twice are named with the numbers; plain reflectance
// and a band without data are not.
func TestSuspect(t *testing.T) {
	t.Parallel()
	bands := []string{"B02", "B08", "B11"}
	r := rand.New(rand.NewPCG(3, 4))
	dark := func(shift float64) []float64 {
		hist := NewHistogram(3, 1e-4, -0.1)
		if err := hist.Write(0, 0, 100, 100, scene(r, 100, 100, 3, shift), nil, nil); err != nil {
			t.Fatal(err)
		}
		return hist.Dark()
	}
	if s := Suspect(bands, dark(0)); s != "" {
		t.Errorf("plain reflectance suspected: %s", s)
	}
	if s := Suspect(bands, dark(0.1)); !strings.Contains(s, "+1000 DN offset") || !strings.Contains(s, "offset: -0.1") {
		t.Errorf("an offset left in: %q", s)
	}
	if s := Suspect(bands, dark(-0.1)); !strings.Contains(s, "offset: 0") {
		t.Errorf("an offset removed twice: %q", s)
	}
	if s := Suspect(bands, []float64{math.NaN(), math.NaN(), math.NaN()}); s != "" {
		t.Errorf("no data suspected: %s", s)
	}
}

// TestCompare checks the comparison with the training data: a shift of
// 0.1 either way is reported, natural differences of a few hundredths are
// not, and missing levels compare nothing.
func TestCompare(t *testing.T) {
	t.Parallel()
	bands := []string{"B02", "B03", "B04"}
	trained := []float64{0.01, 0.02, 0.015}
	cases := []struct {
		tile []float64
		want string
	}{
		{[]float64{0.03, 0.01, 0.04}, ""},
		{[]float64{0.11, 0.12, 0.115}, "may carry the +1000 DN offset"},
		{[]float64{-0.09, -0.08, math.NaN()}, "darker than the training data's"},
		// Snow: bright in the visible, one band still dark: not an offset.
		{[]float64{0.3, 0.25, 0.02}, "brighter than the training data's (the median over 3 bands of B02, B03, B04): the tile's own dark pixels show no offset"},
		{[]float64{math.NaN(), math.NaN(), math.NaN()}, ""},
	}
	for _, c := range cases {
		got := Compare(bands, c.tile, trained)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("tile %v: %q, want %q", c.tile, got, c.want)
		}
	}
	// Trained on offset images, mapping plain ones: the training side is
	// named.
	if got := Compare(bands, trained, []float64{0.11, 0.12, 0.115}); !strings.Contains(got, "training images may have carried a +1000 DN offset") {
		t.Errorf("offset training data: %q", got)
	}
	if Compare(bands, trained, nil) != "" {
		t.Error("a model without levels compared")
	}
}

// TestLevelsRoundTrip checks the by-name form files store.
func TestLevelsRoundTrip(t *testing.T) {
	t.Parallel()
	bands := []string{"B02", "B03"}
	m := ByName(bands, []float64{0.01, math.NaN()})
	if len(m) != 1 || m["B02"] != 0.01 {
		t.Fatalf("levels %v", m)
	}
	back := m.Aligned([]string{"B03", "B02"})
	if !math.IsNaN(back[0]) || back[1] != 0.01 {
		t.Errorf("aligned %v", back)
	}
	if got := Median([][]float64{{0.01, 0.5}, {0.03, math.NaN()}, {0.02, 0.4}}); got[0] != 0.02 || got[1] != 0.4 {
		t.Errorf("median %v", got)
	}
}
