package raster

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/classrule"
)

// TestReprojectClassesExact reads a 5 m class raster onto a 10 m grid of
// the same CRS, half a 10 m pixel off its origin, and checks every pixel
// against the rule worked out directly: the mode of the 2×2 source pixels
// under the footprint without nodata (255), ties to the smaller value,
// nodata where none votes or outside the source.
func TestReprojectClassesExact(t *testing.T) {
	// Classes that change from pixel to pixel, and patches of one class
	// (most footprints in one value, as land cover has them) with patches
	// of nodata.
	t.Run("mixed", func(t *testing.T) {
		testReprojectClasses(t, func(x, y int) uint8 {
			if (x+2*y)%11 == 0 {
				return 255
			}
			return uint8(1 + (x*7+y*3+x*y)%5)
		})
	})
	t.Run("patches", func(t *testing.T) {
		testReprojectClasses(t, func(x, y int) uint8 {
			if (x/7+y/5)%6 == 0 {
				return 255
			}
			return uint8(1 + (x/5*3+y/3)%4)
		})
	})
}

// openClasses writes classes src on grid sg as a COG with nodata 255 and
// opens it, closed when the test ends.
func openClasses(t *testing.T, sg geo.Grid, src []uint8) *Source {
	t.Helper()
	path := filepath.Join(t.TempDir(), "classes.tif")
	nd := 255.0
	if err := WriteCOG(path, sg, src, COGOptions{NoData: &nd}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testReprojectClasses(t *testing.T, class func(x, y int) uint8) {
	const sw, sh = 90, 70
	sg := geo.Grid{EPSG: 32631, Width: sw, Height: sh, Transform: [6]float64{500000, 5, 0, 4000000, 0, -5}}
	src := make([]uint8, sw*sh)
	for i := range src {
		src[i] = class(i%sw, i/sw)
	}
	s := openClasses(t, sg, src)
	// 10 m pixels starting 5 m (one source pixel) east and south of the
	// source's corner, running 10 m past its far edges.
	dst := geo.Grid{EPSG: 32631, Width: 46, Height: 36, Transform: [6]float64{500005, 10, 0, 3999995, 0, -10}}
	for _, alg := range []string{"mode", "nearest"} {
		got := make([]uint8, dst.Width*dst.Height)
		if err := s.Read(dst, alg, got); err != nil {
			t.Fatal(err)
		}
		for y := range dst.Height {
			for x := range dst.Width {
				want := uint8(255)
				if alg == "nearest" {
					// The centre lies on a source pixel corner: pixel 2x+2.
					if c, r := 2*x+2, 2*y+2; c < sw && r < sh {
						want = src[r*sw+c]
					}
				} else {
					var n [256]int
					for r := 2*y + 1; r < 2*y+3 && r < sh; r++ {
						for c := 2*x + 1; c < 2*x+3 && c < sw; c++ {
							if v := src[r*sw+c]; v != 255 {
								n[v]++
							}
						}
					}
					// The most votes win, a tie the value met first
					// reading the 2×2 pixels row by row.
					for r := 2*y + 1; r < 2*y+3 && r < sh; r++ {
						for c := 2*x + 1; c < 2*x+3 && c < sw; c++ {
							if v := src[r*sw+c]; v != 255 && (want == 255 || n[v] > n[want]) {
								want = v
							}
						}
					}
				}
				if g := got[y*dst.Width+x]; g != want {
					t.Fatalf("%s: pixel (%d, %d) = %d, want %d", alg, x, y, g, want)
				}
			}
		}
	}
}

// TestReprojectClassesRealWorldCover reads the real WorldCover crop
// (EPSG:4326) onto UTM: nearest equals a direct lookup at the pixel
// centres, mode agrees with GDAL's warper at nearly every pixel, and a
// grid read whole or in four windows gives the same classes.
func TestReprojectClassesRealWorldCover(t *testing.T) {
	src, sg, s := worldCoverCrop(t)
	dst := geo.Grid{EPSG: 32632, Width: 600, Height: 600, Transform: [6]float64{240000, 10, 0, 38000, 0, -10}}
	n := dst.Width * dst.Height
	near := make([]uint8, n)
	if err := s.Read(dst, "nearest", near); err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransformer(32632, 4326)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	x, y := make([]float64, n), make([]float64, n)
	for i := range n {
		x[i] = dst.Transform[0] + (float64(i%dst.Width)+0.5)*10
		y[i] = dst.Transform[3] - (float64(i/dst.Width)+0.5)*10
	}
	if err := tr.Transform(x, y); err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range n {
		col := int((x[i] - sg.Transform[0]) / sg.Transform[1])
		row := int((y[i] - sg.Transform[3]) / sg.Transform[5])
		if src[row*sg.Width+col] != near[i] {
			differ++
		}
	}
	// Interpolating the lattice moves a centre by far less than a
	// thousandth of a pixel: only centres that close to an edge may
	// change pixel.
	if differ > n/10000 {
		t.Errorf("nearest differs from a direct lookup at %d of %d pixels", differ, n)
	}

	mode := make([]uint8, n)
	if err := s.Read(dst, "mode", mode); err != nil {
		t.Fatal(err)
	}
	gdal := make([]uint8, n)
	if err := s.warp(dst, "mode", gdal); err != nil {
		t.Fatal(err)
	}
	agree := 0
	for i := range n {
		if mode[i] == gdal[i] {
			agree++
		}
	}
	t.Logf("mode agrees with GDAL's warper at %.2f %% of pixels", 100*float64(agree)/float64(n))
	if float64(agree) < 0.95*float64(n) {
		t.Errorf("mode agrees with GDAL's warper at only %d of %d pixels", agree, n)
	}

	parts := 0
	for _, q := range [][2]int{{0, 0}, {300, 0}, {0, 300}, {300, 300}} {
		g := geo.Grid{EPSG: 32632, Width: 300, Height: 300, Transform: dst.Transform}
		g.Transform[0] += float64(q[0]) * 10
		g.Transform[3] -= float64(q[1]) * 10
		part := make([]uint8, 300*300)
		if err := s.Read(g, "mode", part); err != nil {
			t.Fatal(err)
		}
		for i, v := range part {
			if v != mode[(q[1]+i/300)*dst.Width+q[0]+i%300] {
				parts++
			}
		}
	}
	if parts > n/10000 {
		t.Errorf("read in four windows, %d of %d pixels differ from the whole read", parts, n)
	}
}

// BenchmarkReadClasses reads a 1024² UTM window of the real WorldCover
// crop in mode by lulc's rule (through Read; then the rule alone, and as
// the plain reference computes it) and by GDAL's warper.
func BenchmarkReadClasses(b *testing.B) {
	_, _, s := worldCoverCrop(b)
	dst := geo.Grid{EPSG: 32632, Width: 1024, Height: 1024, Transform: [6]float64{236000, 10, 0, 40000, 0, -10}}
	buf := make([]uint8, 1024*1024)
	b.Run("lulc", func(b *testing.B) {
		for b.Loop() {
			if err := s.Read(dst, "mode", buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The rule as reprojectClasses computes it, and written plainly
	// (reprojectClassesRef), side by side.
	b.Run("rule", func(b *testing.B) {
		for b.Loop() {
			if err := s.reprojectClasses(dst, "mode", buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rule-plain", func(b *testing.B) {
		for b.Loop() {
			if err := s.reprojectClassesRef(dst, "mode", buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gdal", func(b *testing.B) {
		for b.Loop() {
			if err := s.warp(dst, "mode", buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reprojectClassesRef is the rule of classrule.Window.Apply written plainly, as it
// was before the run lengths and the lattice lines: from the same window
// (readClassWindow), every edge interpolated from its four lattice nodes,
// every box's pixels compared one by one before they vote.
// reprojectClasses must give its bytes.
func (s *Source) reprojectClassesRef(dst geo.Grid, alg string, buf []uint8) error {
	w, h := dst.Width, dst.Height
	cw, err := s.readClassWindow(dst, alg)
	if err != nil {
		return err
	}
	if cw.Beside {
		for i := range buf {
			buf[i] = cw.NoData
		}
		return nil
	}
	src, sw, sh, u, v := cw.Src, cw.SW, cw.SH, cw.U, cw.V
	nx, _ := classrule.LatticeSize(w, h)
	lxs, fxs := classrule.Edges(w)
	edge := func(j int, ue, ve []float64) {
		ly := min(j/classrule.Step, (h-1)/classrule.Step)
		fy := float64(j-ly*classrule.Step) / float64(min((ly+1)*classrule.Step, h)-ly*classrule.Step)
		for i, lx := range lxs {
			k, fx := ly*nx+int(lx), fxs[i]
			ue[i] = bilerp(u[k], u[k+1], u[k+nx], u[k+nx+1], fx, fy)
			ve[i] = bilerp(v[k], v[k+1], v[k+nx], v[k+nx+1], fx, fy)
		}
	}
	floor, ceil := classrule.Floor, classrule.Ceil
	ua, va := make([]float64, w+1), make([]float64, w+1)
	ub, vb := make([]float64, w+1), make([]float64, w+1)
	edge(0, ua, va)
	var counts [256]int32
	var touched []uint8
	for y := range h {
		if y > 0 {
			ua, va, ub, vb = ub, vb, ua, va
		}
		edge(y+1, ub, vb)
		for x := range w {
			if alg == "nearest" {
				cu := (ua[x] + ua[x+1] + ub[x] + ub[x+1]) / 4
				cv := (va[x] + va[x+1] + vb[x] + vb[x+1]) / 4
				val := cw.NoData
				if c, r := floor(cu), floor(cv); c >= 0 && c < sw && r >= 0 && r < sh {
					val = src[r*sw+c]
				}
				buf[y*w+x] = val
				continue
			}
			c0 := max(min(floor(min(ua[x], ub[x])+1e-10), floor(min(ua[x+1], ub[x+1])+1e-10)), 0)
			c1 := min(max(ceil(max(ua[x], ub[x])-1e-10), ceil(max(ua[x+1], ub[x+1])-1e-10)), sw)
			r0 := max(min(floor(min(va[x], vb[x])+1e-10), floor(min(va[x+1], vb[x+1])+1e-10)), 0)
			r1 := min(max(ceil(max(va[x], vb[x])-1e-10), ceil(max(va[x+1], vb[x+1])-1e-10)), sh)
			if c0 >= c1 {
				r1 = r0
			}
			if r0 < r1 {
				first, same := src[r0*sw+c0], true
				for r := r0; r < r1 && same; r++ {
					for _, val := range src[r*sw+c0 : r*sw+c1] {
						same = same && val == first
					}
				}
				if same {
					buf[y*w+x] = first
					continue
				}
			}
			buf[y*w+x], touched = cw.Vote(c0, c1, r0, r1, &counts, touched)
		}
	}
	return nil
}

func bilerp(a, b, c, d, fx, fy float64) float64 {
	top := a + (b-a)*fx
	bot := c + (d-c)*fx
	return top + (bot-top)*fy
}

// TestReprojectClassesPlain: reprojectClasses gives reprojectClassesRef's
// bytes, in mode and nearest, for the real WorldCover crop onto UTM
// grids (whole, windows inside it, windows over its edges) and for
// random classes with nodata onto grids whose footprints cover one
// pixel, a few, and more than 255 columns of the source.
func TestReprojectClassesPlain(t *testing.T) {
	compare := func(t *testing.T, s *Source, dst geo.Grid) {
		t.Helper()
		for _, alg := range []string{"mode", "nearest"} {
			got, want := make([]uint8, dst.Width*dst.Height), make([]uint8, dst.Width*dst.Height)
			if err := s.reprojectClasses(dst, alg, got); err != nil {
				t.Fatal(err)
			}
			if err := s.reprojectClassesRef(dst, alg, want); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s onto %+v: pixel (%d, %d) = %d, the plain rule gives %d", alg, dst, i%dst.Width, i/dst.Width, got[i], want[i])
				}
			}
		}
	}
	t.Run("worldcover", func(t *testing.T) {
		_, _, s := worldCoverCrop(t)
		for _, g := range [][5]float64{{240000, 38000, 10, 600, 600}, {236000, 40000, 10, 1024, 1024}, {241230, 37010, 10, 333, 517},
			{230000, 50000, 10, 700, 400}, {240000, 38000, 20, 300, 300}, {240005, 37995, 3, 257, 199}} {
			compare(t, s, geo.Grid{EPSG: 32632, Width: int(g[3]), Height: int(g[4]), Transform: [6]float64{g[0], g[2], 0, g[1], 0, -g[2]}})
		}
	})
	t.Run("random", func(t *testing.T) {
		const sw, sh = 700, 500
		sg := geo.Grid{EPSG: 32631, Width: sw, Height: sh, Transform: [6]float64{500000, 1, 0, 4000000, 0, -1}}
		r := rand.New(rand.NewPCG(7, 8))
		src := make([]uint8, sw*sh)
		for i := range src {
			// Patches of a class, some of nodata (255), speckled.
			x, y := i%sw, i/sw
			src[i] = uint8(1 + (x/9*5+y/7*3)%6)
			if (x/13+y/11)%9 == 0 {
				src[i] = 255
			}
			if r.IntN(10) == 0 {
				src[i] = uint8(r.IntN(8))
			}
		}
		s := openClasses(t, sg, src)
		for _, g := range [][5]float64{{500000.3, 3999999.6, 1, 600, 450}, {499990.5, 4000010.25, 2.5, 300, 220}, {500013.7, 3999987.1, 0.7, 400, 300},
			{499950, 4000050, 300, 4, 3}, {500000.5, 3999999.5, 280.25, 3, 2}} {
			compare(t, s, geo.Grid{EPSG: 32631, Width: int(g[3]), Height: int(g[4]), Transform: [6]float64{g[0], g[2], 0, g[1], 0, -g[2]}})
		}
		// Onto another CRS, as labels are read: the lattice interpolated,
		// from a corner inside the source.
		tr, err := NewTransformer(32631, 32630)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		x, y := []float64{500050}, []float64{3999950}
		if err := tr.Transform(x, y); err != nil {
			t.Fatal(err)
		}
		compare(t, s, geo.Grid{EPSG: 32630, Width: 700, Height: 500, Transform: [6]float64{x[0], 1, 0, y[0], 0, -1}})
	})
}

// TestClassesBeside: a window that ClassWindow finds beside the source
// (far beside by the lattice's rim, farBeside, or by the whole lattice's
// reach) is beside by the whole lattice too (nothing read, all nodata),
// and one beside by the whole lattice with room to spare is found by the
// rim; windows slide out of the source on every side, in its CRS and in
// another (the lattice through PROJ).
func TestClassesBeside(t *testing.T) {
	const sw, sh = 700, 500
	sg := geo.Grid{EPSG: 32631, Width: sw, Height: sh, Transform: [6]float64{500000, 1, 0, 4000000, 0, -1}}
	src := make([]uint8, sw*sh)
	for i := range src {
		src[i] = uint8(1 + (i%sw/9+i/sw/7)%5)
	}
	s := openClasses(t, sg, src)
	tr, err := NewTransformer(32631, 32630)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const w, h, px = 64, 48, 1.3
	var far, near int
	for _, epsg := range []int{32631, 32630} {
		for _, d := range []float64{-300, -40, -5, 0, 1, 2, 3, 4, 6, 9, 15, 40, 300} {
			// Windows whose nearest edge lies d metres beyond each of the
			// source's edges (negative: inside).
			for _, o := range [][2]float64{
				{500000 - d - w*px, 3999800}, {500700 + d, 3999800},
				{500300, 4000000 + d + h*px}, {500300, 3999500 - d},
			} {
				x, y := []float64{o[0]}, []float64{o[1]}
				if epsg != 32631 {
					if err := tr.Transform(x, y); err != nil {
						t.Fatal(err)
					}
				}
				dst := geo.Grid{EPSG: epsg, Width: w, Height: h, Transform: [6]float64{x[0], px, 0, y[0], 0, -px}}
				u, v, err := s.cornerLattice(dst)
				if err != nil {
					t.Fatal(err)
				}
				umin, umax, vmin, vmax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
				for k := range u {
					umin, umax = min(umin, u[k]), max(umax, u[k])
					vmin, vmax = min(vmin, v[k]), max(vmax, v[k])
				}
				// How far the whole lattice's reach lies beyond the source,
				// in pixels (≤ 0: it reaches in).
				spare := max(-(int(math.Ceil(umax)) + 1), int(math.Floor(umin))-1-sw, -(int(math.Ceil(vmax)) + 1), int(math.Floor(vmin))-1-sh)
				cw, rule, err := s.ClassWindow(dst, "mode")
				if err != nil || !rule {
					t.Fatalf("EPSG:%d, %g m beyond %v: the rule %v, %v", epsg, d, o, rule, err)
				}
				got, fill := cw.Beside, cw.NoData
				if got && spare < 0 {
					t.Fatalf("EPSG:%d, %g m beyond %v: far beside by the rim, but the lattice reaches %d px into the source", epsg, d, o, -spare)
				}
				if !got && spare >= 5 {
					t.Fatalf("EPSG:%d, %g m beyond %v: the lattice lies %d px beside, the rim found it not far", epsg, d, o, spare)
				}
				if got {
					far++
					if fill != 255 {
						t.Fatalf("fill %d, want the nodata 255", fill)
					}
					buf := make([]uint8, w*h)
					if err := s.Read(dst, "mode", buf); err != nil {
						t.Fatal(err)
					}
					for i, c := range buf {
						if c != 255 {
							t.Fatalf("EPSG:%d, %g m beyond %v: far beside, yet pixel %d reads %d", epsg, d, o, i, c)
						}
					}
				} else if spare < 0 {
					near++
				}
			}
		}
	}
	if far == 0 || near == 0 {
		t.Fatalf("%d windows far beside, %d reaching in: the slide should give both", far, near)
	}
}
