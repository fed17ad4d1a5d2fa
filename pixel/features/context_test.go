package features

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// contextTile is a w×h tile of the ten stack bands with gaps (NaN) and
// values beyond the clamp.
func contextTile(w, h int, seed uint64) ([]string, [][]float32) {
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	r := rand.New(rand.NewPCG(seed, 1))
	planes := make([][]float32, len(bands))
	for b := range planes {
		planes[b] = make([]float32, w*h)
		for i := range planes[b] {
			switch v := r.Float32(); {
			case v < 0.03:
				planes[b][i] = float32(math.NaN())
			case v < 0.04:
				planes[b][i] = 5 + v // beyond the clamp
			default:
				planes[b][i] = r.Float32() * 0.6
			}
		}
	}
	return bands, planes
}

var contextNames = []string{"B04", "mean(B08,15)", "std(ndvi,7)", "range(B11,7)", "mean(ndvi,3)", "std(B08, 3)", "range(nd(B08,B11),5)", "ndvi"}

// naiveContext is the package doc's definition, pixel by pixel.
func naiveContext(f Feature, pos []int, planes [][]float32, w, h, x, y int) float32 {
	r := f.Size / 2
	var s, sq, n int64
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	in := make([]float32, 4)
	for yy := max(0, y-r); yy <= min(h-1, y+r); yy++ {
		for xx := max(0, x-r); xx <= min(w-1, x+r); xx++ {
			v := pixelValue(f.Base, pos, planes, yy*w+xx, in)
			if v != v {
				continue
			}
			q := Quantise(v)
			s, sq, n = s+q, sq+q*q, n+1
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if f.Stat == "range" {
		if n == 0 {
			return float32(math.NaN())
		}
		return hi - lo
	}
	return Moments(s, sq, n, f.Stat == "std")
}

func TestContextMatchesDefinition(t *testing.T) {
	t.Parallel()
	w, h := 61, 47
	bands, planes := contextTile(w, h, 3)
	set, err := NewSet(contextNames, bands)
	if err != nil {
		t.Fatal(err)
	}
	ctx := set.ContextFeatures()
	if len(ctx) != 6 || set.Radius() != 7 || set.Planes() != len(bands)+6 {
		t.Fatalf("context features %v, radius %d, planes %d", ctx, set.Radius(), set.Planes())
	}
	dst := make([][]float32, len(ctx))
	for k := range dst {
		dst[k] = make([]float32, w*h)
	}
	if err := set.ContextCompute(dst, planes, Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
		t.Fatal(err)
	}
	// ContextAt, pixel by pixel, gives the same bits.
	var xs, ys []int
	for y := range h {
		for x := range w {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	at := make([]float32, len(xs)*len(ctx))
	if err := set.ContextAt(at, xs, ys, w, h, func(b, i int) float32 { return planes[b][i] }); err != nil {
		t.Fatal(err)
	}
	for p := range xs {
		for k := range ctx {
			if got, want := at[p*len(ctx)+k], dst[k][p]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("ContextAt: %s at pixel %d: %v, ContextCompute %v", set.Features[ctx[k]].Name, p, got, want)
			}
		}
	}
	for k, fi := range ctx {
		f := set.Features[fi]
		for y := range h {
			for x := range w {
				want := naiveContext(f, set.Inputs(fi), planes, w, h, x, y)
				if got := dst[k][y*w+x]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s at (%d, %d): %v, want %v", f.Name, x, y, got, want)
				}
			}
		}
	}
}

// TestContextCutTwoWays computes the same tile's features whole and cut
// into windows of two sizes, each read with its halo: every bit agrees.
func TestContextCutTwoWays(t *testing.T) {
	t.Parallel()
	w, h := 97, 83
	bands, planes := contextTile(w, h, 9)
	set, err := NewSet(contextNames, bands)
	if err != nil {
		t.Fatal(err)
	}
	whole := computeCut(t, set, planes, w, h, max(w, h))
	for _, side := range []int{16, 33} {
		cut := computeCut(t, set, planes, w, h, side)
		for f := range whole {
			for i := range whole[f] {
				if math.Float32bits(whole[f][i]) != math.Float32bits(cut[f][i]) {
					t.Fatalf("windows of %d: %s differs at pixel %d: %v, whole tile %v", side, set.Features[f].Name, i, cut[f][i], whole[f][i])
				}
			}
		}
	}
}

// computeCut computes every feature of a w×h tile window by window, each
// window read with the set's halo, as prediction does.
func computeCut(t *testing.T, set *Set, planes [][]float32, w, h, side int) [][]float32 {
	out := make([][]float32, len(set.Features))
	for f := range out {
		out[f] = make([]float32, w*h)
	}
	nctx := len(set.ContextFeatures())
	for y := 0; y < h; y += side {
		for x := 0; x < w; x += side {
			ww, wh := min(side, w-x), min(side, h-y)
			ox, oy, rect := Halo(x, y, ww, wh, w, h, set.Radius())
			block := make([][]float32, len(planes))
			for b := range planes {
				block[b] = make([]float32, rect.Width*rect.Height)
				for r := range rect.Height {
					copy(block[b][r*rect.Width:(r+1)*rect.Width], planes[b][(oy+r)*w+ox:])
				}
			}
			src := make([][]float32, len(planes)+nctx)
			for b := range planes {
				src[b] = make([]float32, ww*wh)
				for r := range wh {
					copy(src[b][r*ww:(r+1)*ww], block[b][(rect.Y+r)*rect.Width+rect.X:])
				}
			}
			for k := range nctx {
				src[len(planes)+k] = make([]float32, ww*wh)
			}
			if err := set.ContextCompute(src[len(planes):], block, rect); err != nil {
				t.Fatal(err)
			}
			dst := make([][]float32, len(set.Features))
			for f := range dst {
				dst[f] = make([]float32, ww*wh)
			}
			if err := (CPU{Set: set}).Compute(dst, src); err != nil {
				t.Fatal(err)
			}
			for f := range dst {
				for r := range wh {
					copy(out[f][(y+r)*w+x:(y+r)*w+x+ww], dst[f][r*ww:(r+1)*ww])
				}
			}
		}
	}
	return out
}

func TestParseContext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"mean(B08, 15)":        "mean(B08,15)",
		"STD(ndvi,7)":          "std(ndvi,7)",
		"range(nir, 3)":        "range(B08,3)",
		"mean(nd(B08, B11),5)": "mean(nd(B08,B11),5)",
	} {
		f, err := ParseFeature(in)
		if err != nil || f.Name != want || f.Kind != "context" {
			t.Errorf("%q: %+v, %v; want %s", in, f, err, want)
		}
	}
	for in, msg := range map[string]string{
		"mean(B08)":            "window size",
		"mean(B08, 4)":         "odd",
		"mean(B08, 33)":        "odd",
		"mean(B08, x)":         "odd",
		"std(FOO, 3)":          "unknown",
		"range(mean(B08,3),5)": "not another context",
		"median(B08, 3)":       "unknown feature",
	} {
		_, err := ParseFeature(in)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error saying %q", in, err, msg)
		}
	}
	// Context features need their base's bands in the stack.
	if _, err := NewSet([]string{"mean(B11,3)"}, []string{"B04", "B08"}); err == nil || !strings.Contains(err.Error(), "B11") {
		t.Errorf("a missing band: %v", err)
	}
	bands, ctx := SplitValues([]string{"B04", "B08", "mean(B08,3)", "std(ndvi,5)"})
	if len(bands) != 2 || len(ctx) != 2 {
		t.Errorf("SplitValues: %v %v", bands, ctx)
	}
}

// TestContextComputeRefuses checks the shapes ContextCompute takes.
func TestContextComputeRefuses(t *testing.T) {
	t.Parallel()
	bands, planes := contextTile(10, 10, 1)
	set, _ := NewSet([]string{"mean(B08,3)"}, bands)
	dst := [][]float32{make([]float32, 100)}
	if err := set.ContextCompute(dst, planes, Rect{Width: 10, Height: 10, X: 2, InnerW: 10, InnerH: 10}); err == nil {
		t.Error("an inner block past its halo was accepted")
	}
	if err := set.ContextCompute(dst[:0], planes, Rect{Width: 10, Height: 10, InnerW: 10, InnerH: 10}); err == nil {
		t.Error("too few context planes were accepted")
	}
	if err := (CPU{Set: set}).Compute([][]float32{make([]float32, 100)}, planes); err == nil {
		t.Error("Compute without the context plane was accepted")
	}
}

// TestMeanFloatPath checks what the GPU's mean relies on (ctx_mean in
// device/cuda/kernels/lulc.cu): for |Σq| < 2²⁴ and n <= 961, the float32 division
// of Σq by n gives the bits of Moments' float64 division rounded to
// float32. Random sums, sums next to n × (k + ½) (where a tie in one
// rounding could hide behind the other) and the ends of the range.
func TestMeanFloatPath(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(61, 62))
	const lim = 1 << 24
	check := func(s, n int64) {
		if s <= -lim || s >= lim {
			return
		}
		got := float32(s) / float32(n) * (1.0 / contextQuantum)
		if want := Moments(s, 0, n, false); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("sum %d, n %d: float32 %v, Moments %v", s, n, got, want)
		}
	}
	for n := int64(1); n <= ContextMaxSize*ContextMaxSize; n++ {
		for range 2000 {
			check(r.Int64N(2*lim-1)-(lim-1), n)
			k := r.Int64N(lim/n + 1)
			for d := int64(-2); d <= 2; d++ {
				check(n*k+n/2+d, n)
				check(-(n*k + n/2 + d), n)
			}
		}
		for _, s := range []int64{0, 1, -1, lim - 1, -(lim - 1), lim - n, n} {
			check(s, n)
		}
	}
}

// TestMomentsReciprocal checks the device's arithmetic for windows of an
// odd count (cuda's ctx_mean_whole and ctx_std_whole): the mean as S ×
// RN(2^-18/N) rounded to float32, and the std's quotient by two Markstein
// corrections of √V × RN(2^-18/N) with N × 2^18, against Moments, for
// every odd count a window can hold, on random sums and on sums whose
// quotient lies next to a midpoint between float32s.
func TestMomentsReciprocal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(63, 64))
	// The device's steps (ctx_mean_whole, ctx_std_whole): the reciprocal
	// and the count scaled by the quantum, 2^-18, so that nothing is
	// scaled after.
	mean := func(s, n int64) float32 {
		rn := (1.0 / contextQuantum) / float64(n)
		return float32(float64(float64(s) * rn))
	}
	std := func(s, sq, n int64) float32 {
		rn, x, fn := (1.0/contextQuantum)/float64(n), math.Sqrt(float64(n*sq-s*s)), float64(n)*contextQuantum
		q := float64(x * rn)
		q = math.FMA(math.FMA(-q, fn, x), rn, q)
		q = math.FMA(math.FMA(-q, fn, x), rn, q)
		return float32(q)
	}
	const qmax = 1 << 20 // |q| after the clamp
	checkMean := func(s, n int64) {
		if got, want := mean(s, n), Moments(s, 0, n, false); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("mean of sum %d, n %d: %v, Moments %v", s, n, got, want)
		}
	}
	// checkStd takes a window whose n·Σq² − (Σq)² is v, or the next value
	// that n values can give.
	checkStd := func(v, n int64) {
		for s := range n {
			if (v+s*s)%n != 0 {
				continue
			}
			sq := (v + s*s) / n
			if got, want := std(s, sq, n), Moments(s, sq, n, true); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("std of sum %d, squares %d, n %d: %v, Moments %v", s, sq, n, got, want)
			}
			return
		}
	}
	for n := int64(1); n <= ContextMaxSize*ContextMaxSize; n += 2 {
		for range 300 {
			checkMean(r.Int64N(2*n*qmax+1)-n*qmax, n)
			// A midpoint m between float32s of a random binade, and sums
			// whose mean lies beside it.
			e := r.IntN(31) - 10
			m := (2*(1<<23+r.Int64N(1<<23)) + 1) // m × 2^(e−24)
			num := new(big.Int).Mul(big.NewInt(m), big.NewInt(n))
			shift := uint(24 - e)
			s := new(big.Int).Rsh(num, shift).Int64()
			for d := int64(-1); d <= 2; d++ {
				if abs := max(s+d, -(s + d)); abs <= n*qmax {
					checkMean(s+d, n)
					checkMean(-(s + d), n)
				}
			}
		}
		for range 30 {
			// A std of (2k+1) × 2^(e−24), a midpoint, squared, over n²: the
			// window's n·Σq² − (Σq)² next to it.
			e := r.IntN(21)
			m := big.NewInt(2*(1<<23+r.Int64N(1<<23)) + 1)
			v := new(big.Int).Mul(m, big.NewInt(n))
			v.Mul(v, v).Rsh(v, uint(48-2*e))
			for d := int64(-2); d <= 2; d++ {
				checkStd(v.Int64()+d, n)
			}
			checkStd(r.Int64N(n*n*qmax*qmax/4), n)
		}
	}
}

// BenchmarkContextCompute times the context features of the default set
// over one 1024² window with its 7-px halo, on one core: the whole set,
// and its ranges alone.
func BenchmarkContextCompute(b *testing.B) {
	const side, r = 1024, 7
	bands, planes := contextTile(side+2*r, side+2*r, 9)
	var all, ranges []string
	for _, base := range []string{"B04", "B08", "B11", "ndvi", "ndwi", "ndbi"} {
		for _, w := range []int{7, 15} {
			all = append(all, fmt.Sprintf("mean(%s,%d)", base, w), fmt.Sprintf("std(%s,%d)", base, w), fmt.Sprintf("range(%s,%d)", base, w))
			ranges = append(ranges, fmt.Sprintf("range(%s,%d)", base, w))
		}
	}
	rect := Rect{Width: side + 2*r, Height: side + 2*r, X: r, Y: r, InnerW: side, InnerH: side}
	for _, c := range []struct {
		name  string
		names []string
	}{{"default", all}, {"ranges", ranges}} {
		b.Run(c.name, func(b *testing.B) {
			set, err := NewSet(c.names, bands)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([][]float32, len(c.names))
			for k := range dst {
				dst[k] = make([]float32, side*side)
			}
			for b.Loop() {
				if err := set.ContextCompute(dst, planes, rect); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestContextRangeFlat checks ranges (and moments) against the definition
// where a third of the 8×8 patches are flat: every band the same value,
// −0.01, −0, +0 or 0.01, so that windows hold zeros of both signs, ties
// and nothing but equal values, on an inner block with its halo.
func TestContextRangeFlat(t *testing.T) {
	t.Parallel()
	w, h := 71, 59
	bands, planes := contextTile(w, h, 5)
	r := rand.New(rand.NewPCG(7, 8))
	flat := []float32{-0.01, float32(math.Copysign(0, -1)), 0, 0.01}
	for py := 0; py < h; py += 8 {
		for px := 0; px < w; px += 8 {
			if r.IntN(3) != 0 {
				continue
			}
			v := flat[r.IntN(len(flat))]
			for y := py; y < min(h, py+8); y++ {
				for x := px; x < min(w, px+8); x++ {
					for b := range planes {
						planes[b][y*w+x] = v
					}
				}
			}
		}
	}
	names := []string{"range(B04,3)", "range(ndvi,5)", "range(nd(B08,B11),7)", "range(ndwi,15)", "mean(ndvi,7)", "std(ndvi,15)"}
	set, err := NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	rect := Rect{Width: w, Height: h, X: 5, Y: 3, InnerW: w - 9, InnerH: h - 7}
	ctx := set.ContextFeatures()
	dst := make([][]float32, len(ctx))
	for k := range dst {
		dst[k] = make([]float32, rect.InnerW*rect.InnerH)
	}
	if err := set.ContextCompute(dst, planes, rect); err != nil {
		t.Fatal(err)
	}
	for k, fi := range ctx {
		f := set.Features[fi]
		for i := range rect.InnerH {
			for j := range rect.InnerW {
				want := naiveContext(f, set.Inputs(fi), planes, w, h, rect.X+j, rect.Y+i)
				if got := dst[k][i*rect.InnerW+j]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s at inner (%d, %d): %v, want %v", f.Name, j, i, got, want)
				}
			}
		}
	}
}
