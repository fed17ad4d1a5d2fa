// Package resample is lulc's own upsampling of a coarse band onto a finer
// grid that nests in it at a whole zoom factor k: Sentinel-2's 20 m and
// 60 m bands onto the 10 m grid (k = 2 and 6). It is the CPU specification
// that a GPU twin must match bit for bit, so it uses integer arithmetic
// only, and it imports neither GDAL nor cgo.
//
// Geometry. Output pixel I (counted on the fine grid from the coarse
// raster's origin) covers coarse pixel I/k; its centre lies at coarse
// coordinate (I+½)/k, and coarse pixel s has its centre at s+½.
//
// Bilinear. Along each axis the output centre falls between coarse centres
// b and b+1, where 2k·b + r = 2I + 1 − k with 0 ≤ r < 2k; b gets weight
// 2k − r and b+1 gets weight r (in units of 1/2k). For k = 2 the weights are
// ¼ and ¾, for k = 6 they run 5/12, 7/12 … in steps of 1/6. The weight of a
// neighbour is the product of its two axis weights.
//
// Edge rule. A neighbour outside the coarse raster, or equal to its
// nodata value, carries no weight; the others' weights are renormalised.
// So the outermost half pixel of the raster repeats its edge value, and
// nodata never bleeds into valid pixels. An output pixel with no weighted
// neighbour is nodata.
//
// Rounding. With S = Σ wᵢ·vᵢ and W = Σ wᵢ over the neighbours that count,
// the output is ⌊(2S + W) / 2W⌋: the nearest integer, halves rounded up.
// Every step is exact integer arithmetic, so the result does not depend on
// the order of operations, the machine or the window the pixel is
// computed in.
//
// Nearest gives output pixel I the value of coarse pixel I/k.
package resample

import "fmt"

// Plane is a rectangle of a coarse raster: the pixels with column
// X0 … X0+W−1 and row Y0 … Y0+H−1, row-major in Pix. Rows and columns are
// counted from the raster's origin.
type Plane[T ~uint8 | ~uint16] struct {
	X0, Y0, W, H int
	Pix          []T
}

// Window places the output: W×H fine pixels starting at fine pixel
// (X, Y), on a grid K times finer than the coarse raster, which is
// RasterW×RasterH coarse pixels.
type Window struct {
	X, Y, W, H       int
	K                int
	RasterW, RasterH int
}

// Need is the rectangle of coarse pixels (column, row, width, height) that
// Bilinear reads for w: every neighbour of every output pixel that lies
// inside the raster. A Plane covering it gives the same result as the
// whole raster.
func (w Window) Need(bilinear bool) (x, y, width, height int) {
	x0, x1 := w.X/w.K, (w.X+w.W-1)/w.K+1
	y0, y1 := w.Y/w.K, (w.Y+w.H-1)/w.K+1
	if bilinear {
		x0, x1 = max(0, x0-1), min(w.RasterW, x1+1)
		y0, y1 = max(0, y0-1), min(w.RasterH, y1+1)
	}
	return x0, y0, x1 - x0, y1 - y0
}

// axis is one output coordinate's two neighbours and their weights.
type axis struct {
	lo, hi   int    // coarse indices, relative to the plane
	wlo, whi uint32 // weights in units of 1/2k; 0 for a neighbour outside the raster (whose index is then the other's)
}

// axes computes the neighbours of n output pixels starting at fine index
// start, for a plane starting at coarse index p0 in a raster of size rn
// (covers has checked that the plane holds every neighbour inside it).
func axes(start, n, k, p0, rn int) []axis {
	out := make([]axis, n)
	twoK := 2 * k
	for i := range out {
		num := 2*(start+i) + 1 - k
		b := num / twoK
		if num < 0 && num%twoK != 0 {
			b-- // floor division
		}
		r := num - b*twoK
		var a axis
		if b >= 0 && b < rn && twoK-r > 0 {
			a.lo, a.wlo = b-p0, uint32(twoK-r)
		}
		if b+1 >= 0 && b+1 < rn && r > 0 {
			a.hi, a.whi = b+1-p0, uint32(r)
		}
		// A weightless neighbour still needs an index inside the plane.
		switch {
		case a.wlo == 0 && a.whi > 0:
			a.lo = a.hi
		case a.whi == 0 && a.wlo > 0:
			a.hi = a.lo
		case a.wlo == 0 && a.whi == 0:
			a.lo, a.hi = 0, 0 // a raster of no pixels along this axis
		}
		out[i] = a
	}
	return out
}

func (w Window) check(dst, planeW, planeH, pixLen int) error {
	if w.K < 1 || w.K > 64 || w.W < 0 || w.H < 0 {
		return fmt.Errorf("resample: bad window %+v", w)
	}
	if dst != w.W*w.H {
		return fmt.Errorf("resample: %d output pixels for a %d×%d window", dst, w.W, w.H)
	}
	if pixLen != planeW*planeH {
		return fmt.Errorf("resample: plane of %d pixels for %d×%d", pixLen, planeW, planeH)
	}
	return nil
}

// Bilinear fills dst (w.W×w.H, row-major) from the coarse plane p with the
// bilinear rule of the package doc. Pixels equal to nodata are ignored when
// hasNoData is set. p must cover w.Need(true).
func Bilinear(dst []uint16, w Window, p Plane[uint16], nodata uint16, hasNoData bool) error {
	if err := w.check(len(dst), p.W, p.H, len(p.Pix)); err != nil {
		return err
	}
	if err := covers(w, p.X0, p.Y0, p.W, p.H, true); err != nil {
		return err
	}
	// Interior pixels with four valid neighbours all divide by the same
	// total weight: a multiply by its reciprocal replaces the division,
	// which dominated the time (exact; see divider).
	full := uint32(4 * w.K * w.K)
	div := newDivider(2 * full)
	xs := axes(w.X, w.W, w.K, p.X0, w.RasterW)
	ys := axes(w.Y, w.H, w.K, p.Y0, w.RasterH)
	// Separable and branch-free: per output row, blend the plane's two
	// rows into weighted sums and weights per column (nodata weighs 0),
	// then blend columns. Σ over four neighbours of wy·wx·v is the same
	// integer either way.
	vs, vw := make([]uint32, p.W), make([]uint32, p.W)
	for j, ay := range ys {
		rlo := p.Pix[ay.lo*p.W : (ay.lo+1)*p.W]
		rhi := p.Pix[ay.hi*p.W : (ay.hi+1)*p.W]
		columns(vs, vw, rlo, rhi, ay, nodata, hasNoData)
		out := dst[j*w.W : (j+1)*w.W]
		if w.K == 2 {
			blend2(out, vs, vw, xs, w, p.X0, nodata)
			continue
		}
		for i, ax := range xs {
			out[i] = blend(ax, vs, vw, full, div, nodata)
		}
	}
	return nil
}

// blend is one output pixel from the column sums vs and weights vw.
func blend(ax axis, vs, vw []uint32, full uint32, div divider, nodata uint16) uint16 {
	s := ax.wlo*vs[ax.lo] + ax.whi*vs[ax.hi]
	wt := ax.wlo*vw[ax.lo] + ax.whi*vw[ax.hi]
	switch wt {
	case full:
		return uint16(div.div(2*s + wt))
	case 0:
		return nodata
	}
	return uint16((2*s + wt) / (2 * wt))
}

// blend2 is the horizontal pass at k = 2, Sentinel-2's 20 m bands, where
// nearly all the time goes: away from the raster's edges, the outputs
// 2c and 2c+1 blend columns (c−1, c) and (c, c+1) with weights ¼ and ¾,
// and where all three columns are whole (weight 4) the division by 32 is
// a shift. The result is the same integers as blend's.
func blend2(out []uint16, vs, vw []uint32, xs []axis, w Window, x0 int, nodata uint16) {
	div := newDivider(32)
	i := 0
	if w.X%2 == 1 && len(out) > 0 {
		out[0] = blend(xs[0], vs, vw, 16, div, nodata) // a window starting mid-pair
		i = 1
	}
	for ; i+1 < len(out); i += 2 {
		cg := (w.X + i) / 2 // output i is the left one of its pair
		if cg < 1 || cg+1 >= w.RasterW {
			out[i] = blend(xs[i], vs, vw, 16, div, nodata)
			out[i+1] = blend(xs[i+1], vs, vw, 16, div, nodata)
			continue
		}
		c := cg - x0
		a, b, d := vs[c-1], vs[c], vs[c+1]
		if vw[c-1]&vw[c]&vw[c+1] == 4 {
			out[i] = uint16((a + 3*b + 8) >> 4)
			out[i+1] = uint16((3*b + d + 8) >> 4)
			continue
		}
		out[i] = blend(axis{lo: c - 1, hi: c, wlo: 1, whi: 3}, vs, vw, 16, div, nodata)
		out[i+1] = blend(axis{lo: c, hi: c + 1, wlo: 3, whi: 1}, vs, vw, 16, div, nodata)
	}
	if i < len(out) {
		out[i] = blend(xs[i], vs, vw, 16, div, nodata)
	}
}

// columns blends two plane rows, rlo and rhi (ay's), into per-column sums
// and weights; nodata weighs 0.
func columns(vs, vw []uint32, rlo, rhi []uint16, ay axis, nodata uint16, hasNoData bool) {
	wlo, whi := ay.wlo, ay.whi
	rlo, rhi, vw = rlo[:len(vs)], rhi[:len(vs)], vw[:len(vs)]
	if !hasNoData {
		for c := range vs {
			vs[c] = wlo*uint32(rlo[c]) + whi*uint32(rhi[c])
			vw[c] = wlo + whi
		}
		return
	}
	for c := range vs {
		vlo, vhi := rlo[c], rhi[c]
		a, b := wlo*b2u(vlo != nodata), whi*b2u(vhi != nodata)
		vs[c] = a*uint32(vlo) + b*uint32(vhi)
		vw[c] = a + b
	}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// divider divides by a constant d with a multiply and a shift:
// ⌊x/d⌋ = ⌊x·m / 2⁴⁸⌋ with m = ⌊2⁴⁸/d⌋ + 1. The error of m·d over 2⁴⁸ is at
// most d, so the result is exact while x·d < 2⁴⁸; here x ≤ 2·65535·(2k)² +
// (2k)² and d = 2·(2k)², far inside that for any zoom up to 64.
type divider struct{ m uint64 }

func newDivider(d uint32) divider { return divider{m: 1<<48/uint64(d) + 1} }

func (v divider) div(x uint32) uint32 { return uint32(uint64(x) * v.m >> 48) }

// Nearest fills dst (w.W×w.H, row-major) with coarse pixel I/k of the
// plane p, which must cover w.Need(false).
func Nearest[T ~uint8 | ~uint16](dst []T, w Window, p Plane[T]) error {
	if err := w.check(len(dst), p.W, p.H, len(p.Pix)); err != nil {
		return err
	}
	if err := covers(w, p.X0, p.Y0, p.W, p.H, false); err != nil {
		return err
	}
	cols := make([]int, w.W)
	for i := range cols {
		cols[i] = (w.X+i)/w.K - p.X0
	}
	for j := range w.H {
		row := p.Pix[((w.Y+j)/w.K-p.Y0)*p.W:]
		out := dst[j*w.W : (j+1)*w.W]
		for i, c := range cols {
			out[i] = row[c]
		}
	}
	return nil
}

// covers checks that a plane holds the rectangle the window needs.
func covers(w Window, x0, y0, pw, ph int, bilinear bool) error {
	nx, ny, nw, nh := w.Need(bilinear)
	if nx < x0 || ny < y0 || nx+nw > x0+pw || ny+nh > y0+ph {
		return fmt.Errorf("resample: plane at (%d, %d) of %d×%d does not cover (%d, %d) of %d×%d", x0, y0, pw, ph, nx, ny, nw, nh)
	}
	return nil
}

// Coarse is a band not yet resampled: a plane of the coarse raster that
// covers Window.Need(true), to become the window's pixels by Bilinear.
// The composite's GPU twin uploads the plane (k² times fewer bytes than
// the window) and resamples it on the device.
type Coarse struct {
	Window    Window
	Plane     Plane[uint16]
	NoData    uint16
	HasNoData bool
}

// Bilinear resamples the band onto its window.
func (c *Coarse) Bilinear() ([]uint16, error) {
	out := make([]uint16, c.Window.W*c.Window.H)
	return out, Bilinear(out, c.Window, c.Plane, c.NoData, c.HasNoData)
}
