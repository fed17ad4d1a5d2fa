package classrule

import (
	"math"
	"slices"
	"testing"
)

// lattice is the corner lattice of a w × h grid mapped by u = ox + s·x,
// v = oy + s·y.
func lattice(w, h int, s, ox, oy float64) (u, v []float64) {
	nx, ny := LatticeSize(w, h)
	for j := range ny {
		for i := range nx {
			u = append(u, ox+s*float64(min(i*Step, w)))
			v = append(v, oy+s*float64(min(j*Step, h)))
		}
	}
	return u, v
}

// TestEdges: each edge's lattice cell and place; the last cell is as
// wide as what is left of the grid.
func TestEdges(t *testing.T) {
	cell, frac := Edges(40)
	if len(cell) != 41 || cell[0] != 0 || frac[0] != 0 || cell[16] != 1 || frac[16] != 0 || cell[31] != 1 || frac[31] != 15.0/16 {
		t.Errorf("edges 0, 16, 31: cells %d %d %d, places %v %v %v", cell[0], cell[16], cell[31], frac[0], frac[16], frac[31])
	}
	// The last cell, edges 32..40, is 8 pixels wide and ends at 1.
	if cell[36] != 2 || frac[36] != 0.5 || cell[40] != 2 || frac[40] != 1 {
		t.Errorf("edges 36 and 40: cells %d %d, places %v %v", cell[36], cell[40], frac[36], frac[40])
	}
	if nx, ny := LatticeSize(40, 16); nx != 4 || ny != 2 {
		t.Errorf("LatticeSize(40, 16) = %d, %d", nx, ny)
	}
}

// TestApplySamePixels: onto the source's own pixels, both rules give
// the source back; shifted by half a pixel, nearest takes the pixel
// holding each centre, and mode votes among the four each footprint
// overlaps.
func TestApplySamePixels(t *testing.T) {
	const w, h = 37, 21
	src := make([]uint8, w*h)
	for i := range src {
		src[i] = uint8(i*7%5 + 1)
	}
	for _, mode := range []bool{false, true} {
		u, v := lattice(w, h, 1, 0, 0)
		cw := &Window{Src: src, SW: w, SH: h, W: w, H: h, U: u, V: v, Mode: mode}
		got := make([]uint8, w*h)
		cw.Apply(got)
		if !slices.Equal(got, src) {
			t.Errorf("mode %v onto the source's pixels: not the source", mode)
		}
	}
	// A 2 × 2 source: 1 2 / 2 3, the grid one pixel shifted by half.
	u, v := lattice(1, 1, 1, 0.5, 0.5)
	cw := &Window{Src: []uint8{1, 2, 2, 3}, SW: 2, SH: 2, W: 1, H: 1, U: u, V: v}
	got := []uint8{0}
	if cw.Apply(got); got[0] != 3 {
		t.Errorf("nearest: %d, want 3 (the centre lies in pixel (1, 1))", got[0])
	}
	cw.Mode = true
	if cw.Apply(got); got[0] != 2 {
		t.Errorf("mode: %d, want 2 (two votes of four)", got[0])
	}
	// A tie goes to the value met first row by row; nodata never votes.
	cw.Src = []uint8{4, 9, 9, 4}
	if cw.Apply(got); got[0] != 4 {
		t.Errorf("mode tie: %d, want 4", got[0])
	}
	cw.HasNoData, cw.NoData = true, 4
	if cw.Apply(got); got[0] != 9 {
		t.Errorf("mode with nodata 4: %d, want 9", got[0])
	}
	// Outside the source: nodata.
	u, v = lattice(1, 1, 1, 5, 5)
	cw.U, cw.V = u, v
	if cw.Apply(got); got[0] != 4 {
		t.Errorf("outside: %d, want nodata 4", got[0])
	}
}

// TestTame: a NaN node, or one beyond 2³⁰ pixels, is not tame.
func TestTame(t *testing.T) {
	u, v := lattice(20, 20, 1.5, -3, 2)
	cw := &Window{U: u, V: v}
	if !cw.Tame() {
		t.Error("an ordinary lattice is not tame")
	}
	for _, bad := range []float64{math.NaN(), math.Inf(-1), 1 << 31} {
		cw.V[2] = bad
		if cw.Tame() {
			t.Errorf("a node at %v is tame", bad)
		}
	}
}

// TestApplyBeside: a grid beside the source is all nodata, whatever its
// size (the fill doubles its copies).
func TestApplyBeside(t *testing.T) {
	for _, n := range []int{1, 2, 3, 1000, 1 << 16, 1<<16 + 7} {
		cw := &Window{W: n, H: 1, Beside: true, HasNoData: true, NoData: 9}
		buf := make([]uint8, n)
		cw.Apply(buf)
		for i, v := range buf {
			if v != 9 {
				t.Fatalf("%d pixels beside: pixel %d is %d, want 9", n, i, v)
			}
		}
	}
}
