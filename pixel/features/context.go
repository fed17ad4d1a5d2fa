package features

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Context features summarise a per-pixel feature (a band, an index or an
// nd) over the size×size square centred on each pixel: mean(B08, 15),
// std(ndvi, 7), range(B11, 7). The arithmetic is exact, so that any
// order of summation, the CPU's running sums or a GPU's, gives the same
// bits:
//
//   - the window holds the pixels of the square that lie inside the tile
//     (a window at the tile's edge is cut, not padded) and whose value is
//     not NaN; its count n may be anything from 0 to size²;
//   - for mean and std each value v is clamped to [−4, 4] and quantised
//     to q = round-half-even(v × 2¹⁸), an integer; the window's sums Σq
//     and Σq² are exact in int64 (size ≤ 31 keeps n·Σq² below 2⁶⁰);
//   - mean = float32((float64(Σq) / float64(n)) × 2⁻¹⁸);
//   - std (population) = float32((√float64(n·Σq² − (Σq)²) / float64(n)) × 2⁻¹⁸),
//     the square root IEEE-rounded;
//   - range = max − min of the window's values as float32 (not quantised);
//   - n = 0 gives NaN (canonical).
//
// Whether the centre pixel itself has a value does not matter: a gap is
// described by its neighbours.
const (
	// ContextMaxSize is the largest window side.
	ContextMaxSize = 31
	// contextClamp bounds the quantised values: reflectance and the
	// normalised indices lie well inside it.
	contextClamp = 4
	// contextQuantum is 2¹⁸: values are summed as multiples of 2⁻¹⁸.
	contextQuantum = 1 << 18
)

// contextStats are the statistics a context feature may take.
var contextStats = map[string]bool{"mean": true, "std": true, "range": true}

// parseContext parses "stat(feature, size)"; ok is false when s is not of
// that form at all.
func parseContext(s string, ls *layerSet) (Feature, bool, error) {
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return Feature{}, false, nil
	}
	stat := strings.ToLower(strings.TrimSpace(s[:open]))
	if !contextStats[stat] {
		return Feature{}, false, nil
	}
	args := s[open+1 : len(s)-1]
	comma := strings.LastIndexByte(args, ',')
	if comma < 0 {
		return Feature{}, true, fmt.Errorf("feature %q: %s takes a feature and a window size, as in %s(B08, 7)", s, stat, stat)
	}
	size, err := strconv.Atoi(strings.TrimSpace(args[comma+1:]))
	if err != nil || size < 3 || size > ContextMaxSize || size%2 == 0 {
		return Feature{}, true, fmt.Errorf("feature %q: window size %q must be an odd number of pixels from 3 to %d", s, strings.TrimSpace(args[comma+1:]), ContextMaxSize)
	}
	base, err := parse(strings.TrimSpace(args[:comma]), ls)
	if err != nil {
		return Feature{}, true, fmt.Errorf("feature %q: %w", s, err)
	}
	if base.Kind == "context" {
		return Feature{}, true, fmt.Errorf("feature %q: a context feature summarises a band or an index, not another context feature", s)
	}
	b := base
	f := Feature{
		Name: fmt.Sprintf("%s(%s,%d)", stat, base.Name, size), Kind: "context", Inputs: base.Inputs,
		Op: "context", Stat: stat, Size: size, Base: &b,
	}
	if base.Kind == "layer" {
		layerContext(&f)
	}
	return f, true, nil
}

// Radius is the largest context window's half side (0 without context
// features): the halo a window of pixels needs around it.
func (s *Set) Radius() int {
	r := 0
	for _, f := range s.Features {
		if f.Kind == "context" {
			r = max(r, f.Size/2)
		}
	}
	return r
}

// ContextFeatures lists the positions in Features of the context
// features, in order.
func (s *Set) ContextFeatures() []int {
	var out []int
	for i, f := range s.Features {
		if f.Kind == "context" {
			out = append(out, i)
		}
	}
	return out
}

// Values names what a pixel's values are made of, for a draw that keeps
// them before features are computed: the stack's bands, then the context
// features (computed where the pixel's neighbours are at hand).
func (s *Set) Values() []string {
	out := append([]string{}, s.Bands...)
	for _, i := range s.ContextFeatures() {
		out = append(out, s.Features[i].Name)
	}
	return out
}

// SplitValues splits Values' names back into the bands and the context
// features' names.
func SplitValues(names []string) (bands, context []string) {
	for i, n := range names {
		if f, ok, err := parseContext(n, &layerSet{any: true}); ok && err == nil && f.Kind == "context" {
			return names[:i], names[i:]
		}
	}
	return names, nil
}

// Rect is a block of pixels with a halo: planes hold Width×Height pixels
// row-major, of which the inner rectangle from (X, Y), InnerW×InnerH, is
// what is computed. Pixels beyond the block are outside the tile: a block
// must carry, on each side, the halo of the set's Radius or all the tile
// there is, for the results not to depend on how a tile is cut.
type Rect struct {
	Width, Height  int
	X, Y           int
	InnerW, InnerH int
}

// DN is a block of a stack's digital numbers as a device or a window's
// sink takes them: the block's band planes (Rect.Width × Rect.Height
// pixels each: a window, with its halo where the feature set has context
// features), the DN that stands for no data, and the scaling to
// reflectance (DN × Scale + Offset; nodata becomes NaN).
type DN struct {
	Planes        [][]uint16
	Rect          Rect
	NoData        uint16
	Scale, Offset float32
}

// Halo returns the rectangle to read for the inner w×h block at (x, y) of
// a width×height tile, with a halo of r cut at the tile's edges, as the
// tile's coordinates of the outer block (ox, oy) and its Rect.
func Halo(x, y, w, h, width, height, r int) (ox, oy int, rect Rect) {
	ox, oy = max(0, x-r), max(0, y-r)
	ex, ey := min(width, x+w+r), min(height, y+h+r)
	return ox, oy, Rect{Width: ex - ox, Height: ey - oy, X: x - ox, Y: y - oy, InnerW: w, InnerH: h}
}

// ContextCompute computes the set's context features for rect's inner
// pixels from the band planes of the whole block (reflectance, NaN where
// missing): dst gets one plane per context feature, in ContextFeatures'
// order, of InnerW×InnerH pixels, those of layers in the layers' units
// (layers.go). Features that share a base share its values and sums.
func (s *Set) ContextCompute(dst [][]float32, src [][]float32, rect Rect) error {
	ctx := s.ContextFeatures()
	if len(dst) != len(ctx) || len(src) != len(s.Bands) {
		return fmt.Errorf("features: %d context planes and %d band planes for %d context features and %d bands", len(dst), len(src), len(ctx), len(s.Bands))
	}
	n := rect.Width * rect.Height
	if rect.X < 0 || rect.Y < 0 || rect.X+rect.InnerW > rect.Width || rect.Y+rect.InnerH > rect.Height {
		return fmt.Errorf("features: inner block %+v outside its halo", rect)
	}
	for _, p := range src {
		if len(p) != n {
			return fmt.Errorf("features: band plane of %d pixels for a block of %d", len(p), n)
		}
	}
	for _, p := range dst {
		if len(p) != rect.InnerW*rect.InnerH {
			return fmt.Errorf("features: context plane of %d pixels for an inner block of %d", len(p), rect.InnerW*rect.InnerH)
		}
	}
	// Base values once per distinct base feature, and their quantised
	// values; then one pass per base and window for all its statistics.
	type group struct {
		base        string
		r           int
		mean, std   []float32
		rangeOut    []float32
		values      []float32
		quantised   []int64
		inputs      []int
		baseFeature *Feature
	}
	var groups []*group
	bases := map[string]*group{}
	for k, fi := range ctx {
		f := s.Features[fi]
		i := slices.IndexFunc(groups, func(g *group) bool { return g.base == f.Base.Name && g.r == f.Size/2 })
		if i < 0 {
			i = len(groups)
			groups = append(groups, &group{base: f.Base.Name, r: f.Size / 2, inputs: s.inputs[fi], baseFeature: f.Base})
		}
		g := groups[i]
		switch f.Stat {
		case "mean":
			g.mean = dst[k]
		case "std":
			g.std = dst[k]
		default:
			g.rangeOut = dst[k]
		}
	}
	in := make([]float32, 4)
	var sc scratch
	for _, g := range groups {
		if b, ok := bases[g.base]; ok {
			g.values, g.quantised = b.values, b.quantised
		} else {
			g.values, g.quantised = make([]float32, n), make([]int64, n)
			for i := range n {
				v := pixelValue(g.baseFeature, g.inputs, src, i, in)
				g.values[i] = v
				if v == v {
					g.quantised[i] = Quantise(v)
				}
			}
			bases[g.base] = g
		}
		if g.mean != nil || g.std != nil {
			windowMoments(g.mean, g.std, g.values, g.quantised, rect, g.r, &sc)
		}
		if g.rangeOut != nil {
			windowRange(g.rangeOut, g.values, rect, g.r, &sc)
		}
	}
	s.mapContext(dst)
	return nil
}

// pixelValue is a per-pixel feature's value at pixel i: NaN when an input
// is, canonical NaN for any NaN result (as CPU.Compute).
func pixelValue(f *Feature, pos []int, src [][]float32, i int, in []float32) float32 {
	for k, p := range pos {
		v := src[p][i]
		if v != v {
			return float32(math.NaN())
		}
		in[k] = v
	}
	v := f.fn(in[:len(pos)])
	if v != v {
		return float32(math.NaN())
	}
	return v
}

// Quantise is a value as context sums take it: clamped to [−4, 4], in
// multiples of 2⁻¹⁸, rounded half to even. v must not be NaN.
func Quantise(v float32) int64 {
	v = min(max(v, -contextClamp), contextClamp)
	return int64(math.RoundToEven(float64(v) * contextQuantum))
}

// Moments turns a window's exact sums into its mean or (population)
// standard deviation, as the package doc defines them.
func Moments(sum, sumSq int64, n int64, std bool) float32 {
	if n == 0 {
		return float32(math.NaN())
	}
	if std {
		return float32(math.Sqrt(float64(n*sumSq-sum*sum)) / float64(n) * (1.0 / contextQuantum))
	}
	return float32(float64(sum) / float64(n) * (1.0 / contextQuantum))
}

// windowMoments writes the mean and the std (either may be nil) of every
// inner pixel's window: running sums along rows, then along columns, of
// the quantised values q of the values v (NaN: not counted; its q is 0).
// Both passes run along rows of memory: the column sums slide down a row
// of running sums, one per inner column, so that no pass strides across
// the block.
func windowMoments(mean, std, v []float32, q []int64, rect Rect, r int, sc *scratch) {
	w, h := rect.Width, rect.Height
	iw, ih := rect.InnerW, rect.InnerH
	x0, y0 := rect.X, rect.Y
	// Row sums over each inner column's horizontal span, for every row of
	// the block (every element written: scratch need not be cleared).
	hs, hq, hn := sc.ints(0, h*iw), sc.ints(1, h*iw), sc.ints(2, h*iw)
	for y := range h {
		row, qs := v[y*w:(y+1)*w], q[y*w:(y+1)*w]
		os, oq, on := hs[y*iw:(y+1)*iw], hq[y*iw:(y+1)*iw], hn[y*iw:(y+1)*iw]
		var s, sq, c int64
		for x := max(0, x0-r); x <= min(w-1, x0+r); x++ {
			if row[x] == row[x] {
				s, sq, c = s+qs[x], sq+qs[x]*qs[x], c+1
			}
		}
		os[0], oq[0], on[0] = s, sq, c
		for j := 1; j < iw; j++ {
			if x := x0 + j + r; x < w && row[x] == row[x] {
				s, sq, c = s+qs[x], sq+qs[x]*qs[x], c+1
			}
			if x := x0 + j - r - 1; x >= 0 && row[x] == row[x] {
				s, sq, c = s-qs[x], sq-qs[x]*qs[x], c-1
			}
			os[j], oq[j], on[j] = s, sq, c
		}
	}
	// Column sums of the row sums over each inner row's vertical span,
	// row by row.
	cs, cq, cn := make([]int64, iw), make([]int64, iw), make([]int64, iw)
	for y := max(0, y0-r); y <= min(h-1, y0+r); y++ {
		addRows(cs, cq, cn, hs[y*iw:(y+1)*iw], hq[y*iw:(y+1)*iw], hn[y*iw:(y+1)*iw])
	}
	for i := range ih {
		if i > 0 {
			if y := y0 + i + r; y < h {
				addRows(cs, cq, cn, hs[y*iw:(y+1)*iw], hq[y*iw:(y+1)*iw], hn[y*iw:(y+1)*iw])
			}
			if y := y0 + i - r - 1; y >= 0 {
				subRows(cs, cq, cn, hs[y*iw:(y+1)*iw], hq[y*iw:(y+1)*iw], hn[y*iw:(y+1)*iw])
			}
		}
		if mean != nil {
			out := mean[i*iw : (i+1)*iw]
			for j := range out {
				out[j] = Moments(cs[j], cq[j], cn[j], false)
			}
		}
		if std != nil {
			out := std[i*iw : (i+1)*iw]
			for j := range out {
				out[j] = Moments(cs[j], cq[j], cn[j], true)
			}
		}
	}
}

// addRows adds a row of row sums to the running column sums; subRows
// takes one away.
func addRows(cs, cq, cn, rs, rq, rn []int64) {
	rs, rq, rn = rs[:len(cs)], rq[:len(cs)], rn[:len(cs)]
	cq, cn = cq[:len(cs)], cn[:len(cs)]
	for j := range cs {
		cs[j] += rs[j]
		cq[j] += rq[j]
		cn[j] += rn[j]
	}
}

func subRows(cs, cq, cn, rs, rq, rn []int64) {
	rs, rq, rn = rs[:len(cs)], rq[:len(cs)], rn[:len(cs)]
	cq, cn = cq[:len(cs)], cn[:len(cs)]
	for j := range cs {
		cs[j] -= rs[j]
		cq[j] -= rq[j]
		cn[j] -= rn[j]
	}
}

// scratch holds a ContextCompute's working planes, reused by its bases
// and windows (each pass writes every element it reads back).
type scratch struct {
	i [3][]int64
	f [6][]float32
}

// ints is int64 scratch plane k of n elements.
func (sc *scratch) ints(k, n int) []int64 {
	if cap(sc.i[k]) < n {
		sc.i[k] = make([]int64, n)
	}
	return sc.i[k][:n]
}

// floats is float32 scratch plane k of n elements.
func (sc *scratch) floats(k, n int) []float32 {
	if cap(sc.f[k]) < n {
		sc.f[k] = make([]float32, n)
	}
	return sc.f[k][:n]
}

// windowRange writes max − min of every inner pixel's window: the row
// extremes over each inner column's span, then the column extremes of
// those, each a sliding window of 2r+1 values (slideExtremes, a few
// comparisons an output whatever the window). Go's min and max order −0
// below +0, so the extremes, and their difference, do not depend on the
// order they are taken in.
func windowRange(dst, v []float32, rect Rect, r int, sc *scratch) {
	w, h := rect.Width, rect.Height
	iw, ih := rect.InnerW, rect.InnerH
	k := 2*r + 1
	inf := float32(math.Inf(1))
	rowLo, rowHi := sc.floats(0, h*iw), sc.floats(1, h*iw)
	// A line of values and its window extremes. Positions beyond the
	// block and NaNs are missing: +inf to a minimum, −inf to a maximum.
	n := max(iw, ih) + 2*r
	lo, hi := make([]float32, n), make([]float32, n)
	s := newSlider(n)
	for y := range h {
		row := v[y*w : (y+1)*w]
		for i := range iw + 2*r {
			lo[i], hi[i] = inf, -inf
			if x := rect.X - r + i; x >= 0 && x < w && row[x] == row[x] {
				lo[i], hi[i] = row[x], row[x]
			}
		}
		s.extremes(lo[:iw+2*r], hi[:iw+2*r], k, rowLo[y*iw:(y+1)*iw], rowHi[y*iw:(y+1)*iw])
	}
	// The column extremes of the row extremes, along rows of memory: the
	// same passes as slider.extremes (blocks of k, running extremes from
	// each block's start, g, and from its end, s), a whole row of inner
	// columns at a time. Line t is the block's row rect.Y − r + t.
	L := ih + 2*r
	gLo, gHi := sc.floats(2, L*iw), sc.floats(3, L*iw)
	sLo, sHi := sc.floats(4, L*iw), sc.floats(5, L*iw)
	line := func(t int, lo, hi []float32) {
		if y := rect.Y - r + t; y >= 0 && y < h {
			copy(lo, rowLo[y*iw:(y+1)*iw])
			copy(hi, rowHi[y*iw:(y+1)*iw])
			return
		}
		for j := range lo {
			lo[j], hi[j] = inf, -inf
		}
	}
	for t := range L {
		lo, hi := gLo[t*iw:(t+1)*iw], gHi[t*iw:(t+1)*iw]
		line(t, lo, hi)
		if t%k != 0 {
			plo, phi := gLo[(t-1)*iw:t*iw], gHi[(t-1)*iw:t*iw]
			for j := range lo {
				lo[j], hi[j] = min(plo[j], lo[j]), max(phi[j], hi[j])
			}
		}
	}
	for t := L - 1; t >= 0; t-- {
		lo, hi := sLo[t*iw:(t+1)*iw], sHi[t*iw:(t+1)*iw]
		line(t, lo, hi)
		if t != L-1 && t%k != k-1 {
			nlo, nhi := sLo[(t+1)*iw:(t+2)*iw], sHi[(t+1)*iw:(t+2)*iw]
			for j := range lo {
				lo[j], hi[j] = min(nlo[j], lo[j]), max(nhi[j], hi[j])
			}
		}
	}
	for i := range ih {
		sl, sh := sLo[i*iw:(i+1)*iw], sHi[i*iw:(i+1)*iw]
		gl, gh := gLo[(i+k-1)*iw:(i+k)*iw], gHi[(i+k-1)*iw:(i+k)*iw]
		out := dst[i*iw : (i+1)*iw]
		for j := range out {
			lo, hi := min(sl[j], gl[j]), max(sh[j], gh[j])
			if lo > hi {
				out[j] = float32(math.NaN())
			} else {
				out[j] = hi - lo
			}
		}
	}
}

// slider holds the scratch of slideExtremes' passes for lines of up to n
// values.
type slider struct{ gLo, gHi, sLo, sHi []float32 }

func newSlider(n int) *slider {
	return &slider{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)}
}

// extremes writes the minimum of lo and the maximum of hi over every
// window of k consecutive values, window j to outLo[j] and outHi[j]
// (len(lo) − k + 1 of them), as van Herk and Gil-Werman do: in blocks of
// k, running extremes from each block's start (g) and from its end (s);
// a window spans the end of one block and the start of the next, so its
// extremes are s at its first value and g at its last.
func (sl *slider) extremes(lo, hi []float32, k int, outLo, outHi []float32) {
	n := len(lo)
	gLo, gHi, sLo, sHi := sl.gLo[:n], sl.gHi[:n], sl.sLo[:n], sl.sHi[:n]
	for b := 0; b < n; b += k {
		e := min(n, b+k)
		gLo[b], gHi[b] = lo[b], hi[b]
		for i := b + 1; i < e; i++ {
			gLo[i], gHi[i] = min(gLo[i-1], lo[i]), max(gHi[i-1], hi[i])
		}
		sLo[e-1], sHi[e-1] = lo[e-1], hi[e-1]
		for i := e - 2; i >= b; i-- {
			sLo[i], sHi[i] = min(sLo[i+1], lo[i]), max(sHi[i+1], hi[i])
		}
	}
	for j := range n - k + 1 {
		outLo[j], outHi[j] = min(sLo[j], gLo[j+k-1]), max(sHi[j], gHi[j+k-1])
	}
}

// ContextAt computes the set's context features at chosen pixels of a
// width×height tile, straight from their windows (the arithmetic of
// ContextCompute, for a few pixels rather than every one): for pixel p at
// (xs[p], ys[p]), dst[p*k…] receives its k context features in
// ContextFeatures' order (those of layers in the layers' units). refl(b,
// i) is band b's value at pixel i of the tile (NaN where missing). Pixels
// run on every core.
func (s *Set) ContextAt(dst []float32, xs, ys []int, width, height int, refl func(b, i int) float32) error {
	ctx := s.ContextFeatures()
	if len(xs) != len(ys) || len(dst) != len(xs)*len(ctx) {
		return fmt.Errorf("features: %d values for %d×%d pixels and %d context features", len(dst), len(xs), len(ys), len(ctx))
	}
	// Per base, the largest radius: its values are gathered once.
	type base struct {
		f   *Feature
		pos []int
		r   int
	}
	var bases []base
	of := make([]int, len(ctx))
	for k, fi := range ctx {
		f := s.Features[fi]
		b := slices.IndexFunc(bases, func(b base) bool { return b.f.Name == f.Base.Name })
		if b < 0 {
			b = len(bases)
			bases = append(bases, base{f: f.Base, pos: s.inputs[fi]})
		}
		bases[b].r = max(bases[b].r, f.Size/2)
		of[k] = b
	}
	// A pixel's windows are hundreds of values: a few dozen pixels make a
	// core's worth.
	parallel(len(xs), 64, func(lo, hi int) {
		in := make([]float32, 4)
		vals := make([][]float32, len(bases))
		for p := lo; p < hi; p++ {
			x, y := xs[p], ys[p]
			for b, bs := range bases {
				side := 2*bs.r + 1
				v := vals[b][:0]
				for yy := y - bs.r; yy <= y+bs.r; yy++ {
					for xx := x - bs.r; xx <= x+bs.r; xx++ {
						val := float32(math.NaN())
						if xx >= 0 && xx < width && yy >= 0 && yy < height {
							i := yy*width + xx
							val = pixelValueBy(bs.f, bs.pos, func(b int) float32 { return refl(b, i) }, in)
						}
						v = append(v, val)
					}
				}
				vals[b] = v[:side*side]
			}
			for k, fi := range ctx {
				f := s.Features[fi]
				bs := bases[of[k]]
				r, side := f.Size/2, 2*bs.r+1
				var sum, sq, n int64
				lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
				for dy := -r; dy <= r; dy++ {
					row := vals[of[k]][(bs.r+dy)*side+bs.r-r:][:2*r+1]
					for _, val := range row {
						if val != val {
							continue
						}
						q := Quantise(val)
						sum, sq, n = sum+q, sq+q*q, n+1
						lo, hi = min(lo, val), max(hi, val)
					}
				}
				switch {
				case f.Stat != "range":
					dst[p*len(ctx)+k] = Moments(sum, sq, n, f.Stat == "std")
				case n == 0:
					dst[p*len(ctx)+k] = float32(math.NaN())
				default:
					dst[p*len(ctx)+k] = hi - lo
				}
			}
		}
	})
	s.MapContextAt(dst)
	return nil
}

// pixelValueBy is pixelValue with band b's value given by at(b).
func pixelValueBy(f *Feature, pos []int, at func(b int) float32, in []float32) float32 {
	for k, p := range pos {
		v := at(p)
		if v != v {
			return float32(math.NaN())
		}
		in[k] = v
	}
	v := f.fn(in[:len(pos)])
	if v != v {
		return float32(math.NaN())
	}
	return v
}
