package cog

import (
	"math"
	"runtime"
	"strings"
	"sync"
)

// resampling is an overview rule the Go encoder implements.
type resampling int

const (
	resampleNearest resampling = iota
	resampleAverage
	resampleMode
)

// parseResampling maps Options.OverviewResampling to a rule; "" is
// AVERAGE, as for GDAL.
func parseResampling(s string) (resampling, bool) {
	switch strings.ToUpper(s) {
	case "NEAREST":
		return resampleNearest, true
	case "", "AVERAGE":
		return resampleAverage, true
	case "MODE":
		return resampleMode, true
	}
	return 0, false
}

// overviewSizes returns the sizes of the overview levels of a w×h raster,
// largest first. Each level halves the previous one, rounding down (but
// never below one pixel), as GDAL sizes COG overviews. With count 0 there
// are as many levels as GDAL's COG driver makes by default: until the
// level fits in one block.
func overviewSizes(w, h, block, count int) [][2]int {
	var out [][2]int
	for count > 0 && len(out) < count || count == 0 && max(w, h) > block {
		if w == 1 && h == 1 {
			break
		}
		w, h = max(1, w/2), max(1, h/2)
		out = append(out, [2]int{w, h})
	}
	return out
}

// downsample computes one overview level (dst, dw×dh) from the level above
// it (src, sw×sh), where dw = max(1, sw/2) and dh = max(1, sh/2).
//
// Overview pixel (x, y) is computed from the 2×2 window at (2x, 2y) of the
// level above, its pixels taken in the order top-left, top-right,
// bottom-left, bottom-right. Every level is computed from the one above
// it, not from full resolution. Sizes round down, so the last column (row)
// of a level of odd width (height) is left out; a window is cut short only
// when the level above is one pixel wide or high. With nodata,
// pixels equal to it are left out of the window, and a window with no
// other pixel gives nodata. The rules:
//   - NEAREST: the first pixel of the window in that order (the top-left
//     one when it is not nodata).
//   - AVERAGE: the mean of the window's pixels rounded half up,
//     (sum + n/2) / n in integers (n: number of pixels). With nodata, the
//     mean of the other pixels may happen to equal the nodata value.
//   - MODE: the most frequent value of the window; between values equally
//     frequent, the smallest.
//
// Rows are shared among threads goroutines; the result does not depend on
// their number.
func downsample[T Pixels](to, from level[T], rule resampling, nodata *T, threads int) {
	dh := to.h
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// Strips of at least 16 rows keep the goroutines' start-up cost small.
	strips := max(1, min(threads*4, dh/16))
	var wg sync.WaitGroup
	sem := make(chan struct{}, threads)
	for s := range strips {
		y0, y1 := s*dh/strips, (s+1)*dh/strips
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			downsampleRows(to, from, y0, y1, rule, nodata)
		}()
	}
	wg.Wait()
}

// level is a band of one level of a COG's pyramid: w × h pixels,
// row-major.
type level[T Pixels] struct {
	px   []T
	w, h int
}

// downsampleRows is downsample for the rows [y0, y1) of to.
func downsampleRows[T Pixels](to, from level[T], y0, y1 int, rule resampling, nodata *T) {
	if fto, ok := any(to).(level[float32]); ok {
		downsampleFloatRows(fto, any(from).(level[float32]), y0, y1, rule)
		return
	}
	dst, dw, src, sw, sh := to.px, to.w, from.px, from.w, from.h
	var nd T
	if nodata != nil {
		nd = *nodata
	}
	var win [4]T
	for y := y0; y < y1; y++ {
		r0 := src[2*y*sw : 2*y*sw+sw]
		var r1 []T
		full := 0 // windows with all four pixels inside the level
		if 2*y+1 < sh {
			r1 = src[(2*y+1)*sw : (2*y+2)*sw]
			full = min(dw, sw/2)
		}
		out := dst[y*dw : y*dw+dw]
		r0, r1 = r0[:2*full], r1[:2*full]
		for x := range out[:full] {
			a, b, c, d := r0[2*x], r0[2*x+1], r1[2*x], r1[2*x+1]
			// Uniform windows, the most common in class maps, give their
			// value under every rule, nodata included.
			if a == b && a == c && a == d {
				out[x] = a
				continue
			}
			if nodata != nil && (a == nd || b == nd || c == nd || d == nd) {
				n := 0
				for _, v := range [4]T{a, b, c, d} {
					if v != nd {
						win[n] = v
						n++
					}
				}
				out[x] = reduceWindow(win[:n], rule, nd)
				continue
			}
			switch rule {
			case resampleNearest:
				out[x] = a
			case resampleAverage:
				out[x] = T((uint32(a) + uint32(b) + uint32(c) + uint32(d) + 2) >> 2)
			default:
				out[x] = mode4(a, b, c, d)
			}
		}
		// Sizes round down, so a window is cut by the edge only when the
		// level above is one pixel wide or high.
		r0 = src[2*y*sw : 2*y*sw+sw]
		if r1 != nil {
			r1 = src[(2*y+1)*sw : (2*y+2)*sw]
		}
		for x := full; x < dw; x++ {
			var cand [4]T
			m := 0
			cand[m], m = r0[2*x], m+1
			if 2*x+1 < sw {
				cand[m], m = r0[2*x+1], m+1
			}
			if r1 != nil {
				cand[m], m = r1[2*x], m+1
				if 2*x+1 < sw {
					cand[m], m = r1[2*x+1], m+1
				}
			}
			n := 0
			for _, v := range cand[:m] {
				if nodata == nil || v != nd {
					win[n] = v
					n++
				}
			}
			out[x] = reduceWindow(win[:n], rule, nd)
		}
	}
}

// downsampleFloatRows is downsampleRows for Float32 levels, whose nodata
// is NaN: a window's pixels that are not NaN, in the order top-left,
// top-right, bottom-left, bottom-right (those inside the level above),
// give its NEAREST (the first), AVERAGE (their sum in float64, in that
// order, divided by their number and rounded once) or MODE; a window of
// NaN only gives NaN.
func downsampleFloatRows(to, from level[float32], y0, y1 int, rule resampling) {
	var win [4]float32
	for y := y0; y < y1; y++ {
		for x := range to.w {
			n := 0
			for _, d := range [4][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				sx, sy := 2*x+d[0], 2*y+d[1]
				if sx < from.w && sy < from.h {
					if v := from.px[sy*from.w+sx]; v == v {
						win[n] = v
						n++
					}
				}
			}
			out := float32(math.NaN())
			switch {
			case n == 0:
			case rule == resampleNearest:
				out = win[0]
			case rule == resampleAverage:
				var sum float64
				for _, v := range win[:n] {
					sum += float64(v)
				}
				out = float32(sum / float64(n))
			default:
				out = modeOf(win[:n])
			}
			to.px[y*to.w+x] = out
		}
	}
}

// mode4 is modeOf for a full window without nodata, without a loop: each
// pixel's count is the number of pixels equal to it.
func mode4[T Pixels](a, b, c, d T) T {
	ab, ac, ad, bc, bd, cd := a == b, a == c, a == d, b == c, b == d, c == d
	na := 1 + b2i(ab) + b2i(ac) + b2i(ad)
	nb := 1 + b2i(ab) + b2i(bc) + b2i(bd)
	nc := 1 + b2i(ac) + b2i(bc) + b2i(cd)
	nd := 1 + b2i(ad) + b2i(bd) + b2i(cd)
	best, bn := a, na
	for _, e := range [3]struct {
		v T
		n int
	}{{b, nb}, {c, nc}, {d, nd}} {
		if e.n > bn || e.n == bn && e.v < best {
			best, bn = e.v, e.n
		}
	}
	return best
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reduceWindow applies rule to a window's pixels (nodata already left out).
// An empty window (all nodata) gives nodata.
func reduceWindow[T Pixels](v []T, rule resampling, nodata T) T {
	if len(v) == 0 {
		return nodata
	}
	switch rule {
	case resampleNearest:
		return v[0]
	case resampleAverage:
		var s uint32
		for _, p := range v {
			s += uint32(p)
		}
		n := uint32(len(v))
		return T((s + n/2) / n)
	}
	return modeOf(v)
}

// modeOf returns the most frequent value of v, the smallest among ties.
func modeOf[T Pixels](v []T) T {
	best, bestN := v[0], 0
	for i, a := range v {
		n := 0
		for _, b := range v[i:] {
			if a == b {
				n++
			}
		}
		// Counting only from i on undercounts a value seen before, but its
		// first occurrence already counted all of them.
		if n > bestN || n == bestN && a < best {
			best, bestN = a, n
		}
	}
	return best
}
