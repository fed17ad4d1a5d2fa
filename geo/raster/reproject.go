package raster

import (
	"fmt"
	"github.com/lulc/lulc/geo"
	"math"
)

// Class rasters (labels) onto another grid, by lulc's own rule rather than
// GDAL's warper: GDAL's mode costs about 130 ns a pixel, 16 CPU-seconds
// for a full Sentinel-2 tile of WorldCover labels, which made reading the
// labels most of a tile's CPU time. The rule, for each destination pixel:
//
//   - Its four corners are mapped into the source's pixel space: exactly
//     (PROJ, through GDAL) at the nodes of a lattice every latticeStep
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
const latticeStep = 16

// classWindow is where both ways of applying the rule start (the rule
// and, in its test, the rule written plainly): the source window every
// footprint of a destination grid lies in, read, and the grid's corner
// lattice in the window's pixel space.
type classWindow struct {
	src       []uint8
	sw, sh    int
	u, v      []float64 // the lattice, nx nodes a row, relative to the window
	nx        int
	lxs       []int     // each edge's lattice cell across a row
	fxs       []float64 // and its place in it
	nodata    uint8
	hasNodata bool
	beside    bool // the grid lies beside the source: nothing read
}

// readClassWindow reads the window and lays out the lattice for dst.
func (s *Source) readClassWindow(dst geo.Grid) (classWindow, error) {
	var cw classWindow
	w := dst.Width
	cw.hasNodata = s.NoData != nil
	if cw.hasNodata {
		cw.nodata = uint8(*s.NoData)
	}
	// A window far beside the source (one of a tile's other label
	// rasters) needs only the lattice's rim to say so.
	if far, err := s.farBeside(dst); err != nil || far {
		cw.beside = far
		return cw, err
	}
	u, v, err := s.cornerLattice(dst)
	if err != nil {
		return cw, err
	}
	// The source window every footprint lies in: the lattice's hull
	// (bilinear interpolation stays inside it), one pixel wider, clamped.
	x0, y0, x1, y1 := s.reach(u, v, 1)
	if x0 >= x1 || y0 >= y1 {
		cw.beside = true
		return cw, nil
	}
	cw.sw, cw.sh = x1-x0, y1-y0
	cw.src = make([]uint8, cw.sw*cw.sh)
	if err := s.ds.Bands()[0].Read(x0, y0, cw.src, cw.sw, cw.sh); err != nil {
		return cw, fmt.Errorf("read %s: %w", s.Href, err)
	}
	// Columns and rows from here on are relative to the window.
	for k := range u {
		u[k] -= float64(x0)
		v[k] -= float64(y0)
	}
	cw.u, cw.v = u, v
	cw.nx = (w+latticeStep-1)/latticeStep + 1
	// Each edge's lattice cell and place in it across a row, the same for
	// every row. The last lattice cell may be narrower than latticeStep.
	cw.lxs, cw.fxs = make([]int, w+1), make([]float64, w+1)
	for i := range cw.lxs {
		lx := min(i/latticeStep, (w-1)/latticeStep)
		cw.lxs[i], cw.fxs[i] = lx, float64(i-lx*latticeStep)/float64(min((lx+1)*latticeStep, w)-lx*latticeStep)
	}
	return cw, nil
}

// vote is mode's count over the box of source columns c0..c1 and rows
// r0..r1 of the window: every pixel votes once, nodata does not; the
// most votes win, a tie the value met first reading the box row by row,
// and nodata when none votes. counts is all zeros, and left so; touched
// is scratch.
func (cw *classWindow) vote(c0, c1, r0, r1 int, counts *[256]int32, touched []uint8) (uint8, []uint8) {
	touched = touched[:0]
	for r := r0; r < r1; r++ {
		for _, val := range cw.src[r*cw.sw+c0 : r*cw.sw+c1] {
			if cw.hasNodata && val == cw.nodata {
				continue
			}
			if counts[val] == 0 {
				touched = append(touched, val)
			}
			counts[val]++
		}
	}
	best, bestN := cw.nodata, int32(0)
	for _, val := range touched {
		if n := counts[val]; n > bestN {
			best, bestN = val, n
		}
		counts[val] = 0
	}
	return best, touched
}

// reprojectClasses fills buf with the source's band 1 on dst by the rule
// above; alg is "nearest" or "mode".
func (s *Source) reprojectClasses(dst geo.Grid, alg string, buf []uint8) error {
	w, h := dst.Width, dst.Height
	cw, err := s.readClassWindow(dst)
	if err != nil {
		return err
	}
	if cw.beside {
		for i := range buf {
			buf[i] = cw.nodata
		}
		return nil
	}
	src, sw, sh, u, v, nx, lxs, fxs, nodata := cw.src, cw.sw, cw.sh, cw.u, cw.v, cw.nx, cw.lxs, cw.fxs, cw.nodata
	// Each lattice row's top and bottom lines, interpolated across at
	// every edge (the first two steps of a bilinear interpolation, the
	// same for all the latticeStep rows of edges between them): a row of
	// edges is then one step of interpolation down.
	tu, bu := make([]float64, w+1), make([]float64, w+1)
	tv, bv := make([]float64, w+1), make([]float64, w+1)
	band := -1
	edge := func(j int, ue, ve []float64) {
		ly := min(j/latticeStep, (h-1)/latticeStep)
		fy := float64(j-ly*latticeStep) / float64(min((ly+1)*latticeStep, h)-ly*latticeStep)
		if ly != band {
			band = ly
			for i, lx := range lxs {
				k, fx := ly*nx+lx, fxs[i]
				tu[i], bu[i] = u[k]+(u[k+1]-u[k])*fx, u[k+nx]+(u[k+nx+1]-u[k+nx])*fx
				tv[i], bv[i] = v[k]+(v[k+1]-v[k])*fx, v[k+nx]+(v[k+nx+1]-v[k+nx])*fx
			}
		}
		for i := range ue {
			ue[i] = tu[i] + (bu[i]-tu[i])*fy
			ve[i] = tv[i] + (bv[i]-tv[i])*fy
		}
	}
	// Corner positions of one destination row of pixel edges, and of the
	// next: W+1 values each.
	ua, va := make([]float64, w+1), make([]float64, w+1)
	ub, vb := make([]float64, w+1), make([]float64, w+1)
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
	if alg != "nearest" {
		c0s, c1s, r0s, r1s = make([]int, w+1), make([]int, w+1), make([]int, w+1), make([]int, w+1)
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
		if alg == "nearest" {
			for x := range w {
				cu := (ua[x] + ua[x+1] + ub[x] + ub[x+1]) / 4
				cv := (va[x] + va[x+1] + vb[x] + vb[x+1]) / 4
				v := nodata
				if c, r := floor(cu), floor(cv); c >= 0 && c < sw && r >= 0 && r < sh {
					v = src[r*sw+c]
				}
				buf[y*w+x] = v
			}
			continue
		}
		for i := range w + 1 {
			c0s[i], c1s[i] = floor(lower(ua[i], ub[i])+1e-10), ceil(upper(ua[i], ub[i])-1e-10)
			r0s[i], r1s[i] = floor(lower(va[i], vb[i])+1e-10), ceil(upper(va[i], vb[i])-1e-10)
		}
		for x := range w {
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
					buf[y*w+x] = first
					continue
				}
			}
			buf[y*w+x], touched = cw.vote(c0, c1, r0, r1, &counts, touched)
		}
	}
	return nil
}

// lower and upper are min and max of two floats as the builtins give
// them where it matters here (NaN when either is), in a compare and a
// branch rather than the builtins' handling of signed zeros.
func lower(a, b float64) float64 {
	if b < a || b != b {
		return b
	}
	return a
}

func upper(a, b float64) float64 {
	if b > a || b != b {
		return b
	}
	return a
}

// floor and ceil as ints, inlined (math.Floor is a call without SSE4.1).
func floor(x float64) int {
	i := int(x)
	if float64(i) > x {
		i--
	}
	return i
}

func ceil(x float64) int {
	i := int(x)
	if float64(i) < x {
		i++
	}
	return i
}

// farBeside says whether dst lies beside the source by more than
// farMargin source pixels beyond the reach readClassWindow gives the
// lattice's hull, judged from the lattice's rim alone (its nodes on
// dst's edges, the same positions and so the same values as the whole
// lattice's): interior nodes of a smooth map stray from the rim's hull by
// a small part of a pixel (the bow of a projected 10 km edge is a few
// metres), so a window far beside by the rim is beside by the whole
// lattice, and reads nothing.
func (s *Source) farBeside(dst geo.Grid) (bool, error) {
	nx, ny := latticeSize(dst)
	var u, v []float64
	node := func(i, j int) {
		x, y := latticeNode(dst, i, j)
		u, v = append(u, x), append(v, y)
	}
	for i := range nx {
		node(i, 0)
		node(i, ny-1)
	}
	for j := 1; j < ny-1; j++ {
		node(0, j)
		node(nx-1, j)
	}
	if err := s.toPixels(dst.EPSG, u, v); err != nil {
		return false, err
	}
	// A node PROJ could not map (NaN) leaves the question to the whole
	// lattice.
	for k := range u {
		if u[k] != u[k] || v[k] != v[k] {
			return false, nil
		}
	}
	const farMargin = 2
	x0, y0, x1, y1 := s.reach(u, v, 1+farMargin)
	return x0 >= x1 || y0 >= y1, nil
}

// reach is the source window, clamped to the source, that the hull of
// the points u, v (source pixels) reaches, margin pixels wider.
func (s *Source) reach(u, v []float64, margin int) (x0, y0, x1, y1 int) {
	umin, umax, vmin, vmax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i := range u {
		umin, umax = min(umin, u[i]), max(umax, u[i])
		vmin, vmax = min(vmin, v[i]), max(vmax, v[i])
	}
	x0, y0 = max(0, int(math.Floor(umin))-margin), max(0, int(math.Floor(vmin))-margin)
	x1, y1 = min(s.Width, int(math.Ceil(umax))+margin), min(s.Height, int(math.Ceil(vmax))+margin)
	return x0, y0, x1, y1
}

// ClassesBeside says whether reading dst by lulc's class rule (Read
// with a []uint8 buffer and "nearest" or "mode", dst not nested in the
// source) finds no source pixel, dst lying far beside the source; Read
// would then fill the buffer with fill (the nodata value, else 0).
func (s *Source) ClassesBeside(dst geo.Grid, alg string) (beside bool, fill uint8, err error) {
	if alg != "nearest" && alg != "mode" {
		return false, 0, nil
	}
	if _, _, _, _, nested := s.nested(dst); nested {
		return false, 0, nil
	}
	if s.NoData != nil {
		fill = uint8(*s.NoData)
	}
	beside, err = s.farBeside(dst)
	return beside, fill, err
}

// cornerLattice maps the lattice of dst's pixel corners (every
// latticeStep pixels, and the last edge) into the source's pixel space:
// u (columns) and v (rows), row-major, ceil(W/step)+1 nodes a row.
func (s *Source) cornerLattice(dst geo.Grid) (u, v []float64, err error) {
	nx, ny := latticeSize(dst)
	u, v = make([]float64, nx*ny), make([]float64, nx*ny)
	for j := range ny {
		for i := range nx {
			u[j*nx+i], v[j*nx+i] = latticeNode(dst, i, j)
		}
	}
	if err := s.toPixels(dst.EPSG, u, v); err != nil {
		return nil, nil, err
	}
	return u, v, nil
}

// latticeSize is the lattice's nodes a row and a column for dst.
func latticeSize(dst geo.Grid) (nx, ny int) {
	return (dst.Width+latticeStep-1)/latticeStep + 1, (dst.Height+latticeStep-1)/latticeStep + 1
}

// latticeNode is node (i, j) of dst's lattice in dst's CRS.
func latticeNode(dst geo.Grid, i, j int) (x, y float64) {
	px := float64(min(i*latticeStep, dst.Width))
	py := float64(min(j*latticeStep, dst.Height))
	return dst.Transform[0] + px*dst.Transform[1], dst.Transform[3] + py*dst.Transform[5]
}

// toPixels maps points of EPSG:epsg, in place, into the source's pixel
// space (columns u, rows v).
func (s *Source) toPixels(epsg int, u, v []float64) error {
	if epsg != s.EPSG {
		t, err := s.transformerTo(epsg)
		if err != nil {
			return err
		}
		if err := t.Transform(u, v); err != nil {
			return fmt.Errorf("read %s onto EPSG:%d: %w", s.Href, epsg, err)
		}
	}
	for k := range u {
		u[k] = (u[k] - s.Transform[0]) / s.Transform[1]
		v[k] = (v[k] - s.Transform[3]) / s.Transform[5]
	}
	return nil
}

// transformerTo returns the source's transformer from EPSG:epsg into its
// own CRS, made on first use and kept with the source (a source serves
// one goroutine).
func (s *Source) transformerTo(epsg int) (*Transformer, error) {
	if s.toSource != nil && s.toSourceFrom == epsg {
		return s.toSource, nil
	}
	if s.toSource != nil {
		s.toSource.Close()
		s.toSource = nil
	}
	t, err := NewTransformer(epsg, s.EPSG)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Href, err)
	}
	s.toSource, s.toSourceFrom = t, epsg
	return t, nil
}

// classRule says whether Read takes lulc's own rule for buf and alg.
func classRule(buf any, alg string) bool {
	_, u8 := buf.([]uint8)
	return u8 && (alg == "nearest" || alg == "mode")
}
