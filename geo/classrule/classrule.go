// Package classrule maps class rasters (labels) onto another grid by
// lulc's own rule rather than GDAL's warper. GDAL's mode costs about
// 130 ns a pixel, 16 CPU-seconds for a full Sentinel-2 tile of WorldCover
// labels, which made reading the labels most of a tile's CPU time. The
// rule, for each destination pixel:
//
//   - Its four corners are mapped into the source's pixel space: exactly
//     (by the caller, with PROJ) at the nodes of a lattice every Step
//     destination pixels, bilinearly between them. Over 16 pixels of 10 m
//     the mapping between UTM and geographic coordinates is linear far
//     below a thousandth of a source pixel.
//   - Its centre is the mean of the four corners; nearest takes the
//     source pixel holding the centre.
//   - mode counts each source pixel that the corners' bounding box
//     overlaps (by more than 1e-10 of a pixel) once, leaving out the
//     source's nodata; the most frequent value wins, a tie the value met
//     first reading the pixels row by row. That is GDAL's own mode (it
//     agrees with GDAL's warper at 99.97 % of the pixels of the real
//     WorldCover crop), computed without the warper's set-up per window.
//   - Pixels whose footprint falls outside the source get the nodata
//     value (the source's, else 0), as the warper gives.
//
// geo/raster reads a Window (the source pixels every footprint lies in,
// and the lattice); Apply computes the rule on the host, and the cuda
// package's Classes the same bytes on a GPU.
package classrule

import "math"

// Step is the lattice's spacing in destination pixels.
const Step = 16

// Window is what the rule needs to map a source onto a W × H grid: the
// source window every footprint lies in, and the grid's corner lattice in
// the window's pixel space.
type Window struct {
	// Src is the source window, SW × SH pixels, row-major.
	Src    []uint8
	SW, SH int
	// W and H are the destination grid's size.
	W, H int
	// U and V are the lattice's nodes (columns and rows of the window's
	// pixel space), row-major, LatticeSize(W, H) of them.
	U, V []float64
	// NoData is the source's nodata value (0 when HasNoData is false),
	// which fills footprints outside the source and never votes.
	NoData    uint8
	HasNoData bool
	// Mode chooses mode; otherwise nearest.
	Mode bool
	// Beside says the grid lies beside the source: Src is empty and every
	// pixel is NoData.
	Beside bool
}

// LatticeSize is the lattice's nodes a row and a column for a W × H grid.
func LatticeSize(w, h int) (nx, ny int) {
	return (w+Step-1)/Step + 1, (h+Step-1)/Step + 1
}

// Edges gives, for each of the n+1 pixel edges across a grid n pixels
// wide (or high), its lattice cell and its place in it, from 0 to 1. The
// last cell may be narrower than Step.
func Edges(n int) (cell []int32, frac []float64) {
	cell, frac = make([]int32, n+1), make([]float64, n+1)
	for i := range cell {
		l := min(i/Step, (n-1)/Step)
		cell[i], frac[i] = int32(l), float64(i-l*Step)/float64(min((l+1)*Step, n)-l*Step)
	}
	return cell, frac
}

// Tame says whether every lattice node is finite and within 2³⁰ pixels of
// the window: then every floor and ceil of the rule is an exact integer,
// the same on the host and on a GPU (conversions of NaN and of values out
// of range differ between them).
func (w *Window) Tame() bool {
	const most = 1 << 30
	for k := range w.U {
		if !(math.Abs(w.U[k]) < most && math.Abs(w.V[k]) < most) {
			return false
		}
	}
	return true
}

// Apply fills buf (W × H) by the rule.
func (w *Window) Apply(buf []uint8) {
	if w.Beside {
		fill(buf, w.NoData)
		return
	}
	width, h := w.W, w.H
	src, sw, sh, u, v, nodata := w.Src, w.SW, w.SH, w.U, w.V, w.NoData
	nx, _ := LatticeSize(width, h)
	lxs, fxs := Edges(width)
	lys, fys := Edges(h)
	// Each lattice row's top and bottom lines, interpolated across at
	// every edge (the first two steps of a bilinear interpolation, the
	// same for all the Step rows of edges between them): a row of edges is
	// then one step of interpolation down.
	tu, bu := make([]float64, width+1), make([]float64, width+1)
	tv, bv := make([]float64, width+1), make([]float64, width+1)
	band := int32(-1)
	edge := func(j int, ue, ve []float64) {
		if ly := lys[j]; ly != band {
			band = ly
			for i, lx := range lxs {
				k, fx := int(ly)*nx+int(lx), fxs[i]
				tu[i], bu[i] = u[k]+(u[k+1]-u[k])*fx, u[k+nx]+(u[k+nx+1]-u[k+nx])*fx
				tv[i], bv[i] = v[k]+(v[k+1]-v[k])*fx, v[k+nx]+(v[k+nx+1]-v[k+nx])*fx
			}
		}
		fy := fys[j]
		for i := range ue {
			ue[i] = tu[i] + (bu[i]-tu[i])*fy
			ve[i] = tv[i] + (bv[i]-tv[i])*fy
		}
	}
	// Corner positions of one destination row of pixel edges, and of the
	// next: W+1 values each.
	ua, va := make([]float64, width+1), make([]float64, width+1)
	ub, vb := make([]float64, width+1), make([]float64, width+1)
	// For mode, each vertical edge's span between the two rows of corners,
	// as the source columns and rows it reaches: a footprint's box is the
	// union of its two edges' spans, and floor and ceil, being monotonic,
	// give the box's bounds from the edges' (the same integers as from the
	// box's own extremes).
	var c0s, c1s, r0s, r1s []int
	// run[k] counts the pixels from k rightwards in its row that hold
	// src[k]'s value (at most 255): a box's row is all one value when its
	// first pixel's run reaches the box's far column.
	var run []uint8
	if w.Mode {
		c0s, c1s, r0s, r1s = make([]int, width+1), make([]int, width+1), make([]int, width+1), make([]int, width+1)
		run = make([]uint8, sw*sh)
		for r := range sh {
			row, rr := src[r*sw:r*sw+sw], run[r*sw:r*sw+sw]
			n := uint8(1)
			rr[sw-1] = 1
			for c := sw - 2; c >= 0; c-- {
				if row[c] != row[c+1] {
					n = 1
				} else if n < 255 {
					n++
				}
				rr[c] = n
			}
		}
	}
	edge(0, ua, va)
	var counts [256]int32
	touched := make([]uint8, 0, 64)
	for y := range h {
		if y > 0 {
			ua, va, ub, vb = ub, vb, ua, va // this row's top edge is the last row's bottom one
		}
		edge(y+1, ub, vb)
		if !w.Mode {
			for x := range width {
				cu := (ua[x] + ua[x+1] + ub[x] + ub[x+1]) / 4
				cv := (va[x] + va[x+1] + vb[x] + vb[x+1]) / 4
				v := nodata
				if c, r := Floor(cu), Floor(cv); c >= 0 && c < sw && r >= 0 && r < sh {
					v = src[r*sw+c]
				}
				buf[y*width+x] = v
			}
			continue
		}
		for i := range width + 1 {
			c0s[i], c1s[i] = Floor(Lower(ua[i], ub[i])+1e-10), Ceil(Upper(ua[i], ub[i])-1e-10)
			r0s[i], r1s[i] = Floor(Lower(va[i], vb[i])+1e-10), Ceil(Upper(va[i], vb[i])-1e-10)
		}
		for x := range width {
			// Every source pixel the box overlaps votes once; pixels
			// outside the source and nodata don't vote.
			c0, c1 := max(min(c0s[x], c0s[x+1]), 0), min(max(c1s[x], c1s[x+1]), sw)
			r0, r1 := max(min(r0s[x], r0s[x+1]), 0), min(max(r1s[x], r1s[x+1]), sh)
			if c0 >= c1 {
				r1 = r0 // the box lies beside the source
			}
			// Most footprints lie in one class: when every pixel of the
			// box holds the same value, that value wins without counting
			// (nodata too, which is what a box of nothing but nodata
			// gives).
			if r0 < r1 {
				first, same := src[r0*sw+c0], true
				if width := c1 - c0; width <= 255 {
					for r := r0; r < r1; r++ {
						if k := r*sw + c0; src[k] != first || int(run[k]) < width {
							same = false
							break
						}
					}
				} else {
					for r := r0; r < r1 && same; r++ {
						for _, val := range src[r*sw+c0 : r*sw+c1] {
							same = same && val == first
						}
					}
				}
				if same {
					buf[y*width+x] = first
					continue
				}
			}
			buf[y*width+x], touched = w.Vote(c0, c1, r0, r1, &counts, touched)
		}
	}
}

// fill sets every byte of buf to v by doubling copies: a byte loop took
// 2.3 ms a megabyte on the 2-core host, the copies 0.03 ms, and a tile's
// windows beside a label raster fill a megabyte each.
func fill(buf []uint8, v uint8) {
	if len(buf) == 0 {
		return
	}
	buf[0] = v
	for n := 1; n < len(buf); n *= 2 {
		copy(buf[n:], buf[:n])
	}
}

// Vote is mode's count over the box of source columns c0..c1 and rows
// r0..r1 of the window: every pixel votes once, nodata does not; the most
// votes win, a tie the value met first reading the box row by row, and
// NoData when none votes. counts is all zeros, and left so; touched is
// scratch.
func (w *Window) Vote(c0, c1, r0, r1 int, counts *[256]int32, touched []uint8) (uint8, []uint8) {
	touched = touched[:0]
	for r := r0; r < r1; r++ {
		for _, val := range w.Src[r*w.SW+c0 : r*w.SW+c1] {
			if w.HasNoData && val == w.NoData {
				continue
			}
			if counts[val] == 0 {
				touched = append(touched, val)
			}
			counts[val]++
		}
	}
	best, bestN := w.NoData, int32(0)
	for _, val := range touched {
		if n := counts[val]; n > bestN {
			best, bestN = val, n
		}
		counts[val] = 0
	}
	return best, touched
}

// Lower and Upper are min and max of two floats as the builtins give
// them where it matters here (NaN when either is), in a compare and a
// branch rather than the builtins' handling of signed zeros.
func Lower(a, b float64) float64 {
	if b < a || b != b {
		return b
	}
	return a
}

// Upper: see Lower.
func Upper(a, b float64) float64 {
	if b > a || b != b {
		return b
	}
	return a
}

// Floor and Ceil as ints, inlined (math.Floor is a call without SSE4.1).
func Floor(x float64) int {
	i := int(x)
	if float64(i) > x {
		i--
	}
	return i
}

// Ceil: see Floor.
func Ceil(x float64) int {
	i := int(x)
	if float64(i) < x {
		i++
	}
	return i
}
