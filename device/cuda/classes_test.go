package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/geo/classrule"
)

// ruleWindow is a class window for a w × h grid whose pixels map into the
// source by an affine map (sx, sy source pixels a destination pixel,
// offset ox, oy, sheared by shear) bowed by bow pixels at the grid's
// far corner, as a UTM grid onto geographic labels is: patches of
// classes with noise, some nodata, and a source that the grid's edges
// may overrun (negative offsets, or a source smaller than the hull).
func ruleWindow(rng *rand.Rand, w, h int, sx, sy, ox, oy, shear, bow float64, sw, sh int, mode, hasNoData bool) *classrule.Window {
	nx, ny := classrule.LatticeSize(w, h)
	cw := &classrule.Window{W: w, H: h, SW: sw, SH: sh, Mode: mode, HasNoData: hasNoData, U: make([]float64, nx*ny), V: make([]float64, nx*ny)}
	if hasNoData {
		cw.NoData = 255
	}
	for j := range ny {
		for i := range nx {
			x, y := float64(min(i*classrule.Step, w)), float64(min(j*classrule.Step, h))
			b := bow * (x / float64(w)) * (y / float64(h))
			cw.U[j*nx+i] = ox + sx*x + shear*y + b
			cw.V[j*nx+i] = oy + sy*y - shear*x + b/2
		}
	}
	cw.Src = make([]uint8, sw*sh)
	classes := []uint8{10, 20, 30, 40, 50, 60, 80, 90}
	for r := range sh {
		for c := range sw {
			v := classes[(c/7+r/5*3)%len(classes)]
			switch p := rng.Float64(); {
			case p < 0.10:
				v = classes[rng.IntN(len(classes))]
			case p < 0.13 && hasNoData:
				v = cw.NoData
			}
			cw.Src[r*sw+c] = v
		}
	}
	return cw
}

// TestClassesBitExact: the device's class rule gives Apply's bytes, in
// mode and nearest, with and without nodata, for footprints of about one
// source pixel (WorldCover under a Sentinel-2 grid), of a few, of more
// than 64 (the vote's table) and more than 255 columns, for grids whose
// last lattice cells are narrow, that overrun the source, and that lie
// beside it or have a lattice node PROJ could not map (both on the
// host).
func TestClassesBitExact(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(44, 1))
	type grid struct {
		name                       string
		w, h                       int
		sx, sy, ox, oy, shear, bow float64
		sw, sh                     int
	}
	grids := []grid{
		{"worldcover", 1024, 1024, 1.54, 1.08, 0.37, 0.61, 0.013, 0.7, 1580, 1110},
		{"one", 333, 517, 1, 1, 0, 0, 0, 0, 333, 517},
		{"offset", 333, 517, 1, 1, 0.5, 0.25, 0, 0, 334, 518},
		{"few", 300, 257, 3.3, 2.7, 2.2, 1.1, 0.2, 1.5, 1000, 700},
		{"table", 64, 48, 9.5, 8.25, 0, 0, 0.05, 3, 610, 400},
		{"wide", 20, 17, 280, 3, 0, 0, 0, 0, 5600, 52},
		{"overrun", 400, 300, 1.5, 1.2, -100, -50, 0.01, 2, 300, 200},
		{"shrink", 200, 200, 0.4, 0.45, 3, 7, 0, 0.2, 90, 100},
	}
	for _, g := range grids {
		for _, mode := range []bool{true, false} {
			for _, nodata := range []bool{true, false} {
				cw := ruleWindow(rng, g.w, g.h, g.sx, g.sy, g.ox, g.oy, g.shear, g.bow, g.sw, g.sh, mode, nodata)
				want, got := make([]uint8, g.w*g.h), make([]uint8, g.w*g.h)
				cw.Apply(want)
				if err := d.Classes(cw, got); err != nil {
					t.Fatal(err)
				}
				differ := 0
				for i := range got {
					if got[i] != want[i] {
						if differ == 0 {
							t.Errorf("%s mode %v nodata %v: pixel (%d, %d) = %d on the device, %d on the host", g.name, mode, nodata, i%g.w, i/g.w, got[i], want[i])
						}
						differ++
					}
				}
				if differ > 0 {
					t.Errorf("%s mode %v nodata %v: %d of %d pixels differ", g.name, mode, nodata, differ, len(got))
				}
				// The vote must have had work: not every pixel one class.
				if mode && g.name == "worldcover" {
					seen := map[uint8]bool{}
					for _, v := range got {
						seen[v] = true
					}
					if len(seen) < 5 {
						t.Errorf("%s: only %d classes in the result", g.name, len(seen))
					}
				}
			}
		}
	}
	// On the host: beside the source, and a lattice with a NaN node.
	beside := &classrule.Window{W: 30, H: 20, Beside: true, HasNoData: true, NoData: 7}
	buf := make([]uint8, 600)
	if err := d.Classes(beside, buf); err != nil || buf[0] != 7 || buf[599] != 7 {
		t.Errorf("beside: %v, pixels %d and %d, want 7", err, buf[0], buf[599])
	}
	wild := ruleWindow(rng, 100, 90, 1.5, 1.1, 0, 0, 0, 0, 160, 110, true, false)
	wild.U[3] = math.NaN()
	want, got := make([]uint8, 9000), make([]uint8, 9000)
	wild.Apply(want)
	if err := d.Classes(wild, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("a lattice with a NaN node: the device's bytes are not Apply's")
	}
	if err := d.Classes(wild, got[:10]); err == nil {
		t.Error("a buffer of 10 pixels for a 100 × 90 grid: no error")
	}
}
