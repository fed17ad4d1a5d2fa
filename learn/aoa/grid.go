package aoa

import (
	"fmt"
	"math"
)

// NaN is the DI of a pixel without data: one bit pattern (0x7fc00000),
// the GPU's too, so that maps compare byte for byte.
var NaN = math.Float32frombits(0x7fc00000)

// Grid is the lattice of pixels whose DI a map computes: a tile of
// Width × Height pixels cut into cells of Step × Step pixels from its
// top-left corner (the last row and column of cells may be narrower),
// each cell represented by its centre pixel, column x0 + (w − 1) / 2 and
// row y0 + (h − 1) / 2 for a cell of w × h pixels at (x0, y0) (integer
// division: the upper left of the middle four for an even side). Step 1
// is every pixel.
type Grid struct {
	Width, Height, Step int
}

// Cells is the grid's size in cells.
func (g Grid) Cells() (int, int) {
	return (g.Width + g.Step - 1) / g.Step, (g.Height + g.Step - 1) / g.Step
}

// centre is the pixel that represents cell c along an axis of n pixels.
func (g Grid) centre(c, n int) int {
	x0 := c * g.Step
	return x0 + (min(g.Step, n-x0)-1)/2
}

// Centre is the pixel (column, row) that represents cell (cx, cy).
func (g Grid) Centre(cx, cy int) (int, int) { return g.centre(cx, g.Width), g.centre(cy, g.Height) }

// In lists the cells whose centre pixel lies in the window of w × h
// pixels at (x, y): their index in the grid (row-major over Cells) and
// their centre's index in the window (row-major), in row-major order.
func (g Grid) In(x, y, w, h int) (cells, pixels []int) {
	cw, ch := g.Cells()
	for cy := y / g.Step; cy < ch; cy++ {
		py := g.centre(cy, g.Height)
		if py >= y+h {
			break
		}
		if py < y {
			continue
		}
		for cx := x / g.Step; cx < cw; cx++ {
			px := g.centre(cx, g.Width)
			if px >= x+w {
				break
			}
			if px < x {
				continue
			}
			cells = append(cells, cy*cw+cx)
			pixels = append(pixels, (py-y)*w+px-x)
		}
	}
	return cells, pixels
}

// Check refuses a grid that has no cells.
func (g Grid) Check() error {
	if g.Width < 1 || g.Height < 1 || g.Step < 1 {
		return fmt.Errorf("aoa grid: %d × %d pixels in steps of %d", g.Width, g.Height, g.Step)
	}
	return nil
}

// Map is a tile's DI on a Grid, filled window by window (windows hold
// disjoint cells, so concurrent fills need no lock). Cells never filled,
// and pixels without data, are NaN.
type Map struct {
	Grid Grid
	DI   []float32
}

// NewMap starts a map whose cells are all NaN.
func NewMap(g Grid) *Map {
	cw, ch := g.Cells()
	m := &Map{Grid: g, DI: make([]float32, cw*ch)}
	for i := range m.DI {
		m.DI[i] = NaN
	}
	return m
}

// Features fills the cells of a window from its feature planes (one per
// model feature, w × h pixels each) on the CPU.
func (m *Map) Features(x *Index, r *Reference, wx, wy, w, h int, feats [][]float32) {
	cells, pixels := m.Grid.In(wx, wy, w, h)
	v := make([]float32, len(feats))
	z := make([]float64, len(feats))
	for k, c := range cells {
		for f, plane := range feats {
			v[f] = plane[pixels[k]]
		}
		r.Transform(v, z)
		d2 := x.Nearest(z)
		m.DI[c] = NaN
		if d2 == d2 {
			m.DI[c] = r.DI(d2)
		}
	}
}

// Summary counts a map's cells with data and those outside the area of
// applicability.
func (m *Map) Summary(r *Reference) (valid, outside int64) {
	for _, d := range m.DI {
		if d != d {
			continue
		}
		valid++
		if !r.Inside(d) {
			outside++
		}
	}
	return valid, outside
}

// Mask is the map's second band: 1 inside the area of applicability, 0
// outside, NaN without data.
func (m *Map) Mask(r *Reference) []float32 {
	out := make([]float32, len(m.DI))
	for i, d := range m.DI {
		switch {
		case d != d:
			out[i] = d
		case r.Inside(d):
			out[i] = 1
		}
	}
	return out
}
