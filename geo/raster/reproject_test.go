package raster

import (
	"github.com/lulc/lulc/geo"
	"path/filepath"
	"testing"
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

func testReprojectClasses(t *testing.T, class func(x, y int) uint8) {
	const sw, sh = 90, 70
	sg := geo.Grid{EPSG: 32631, Width: sw, Height: sh, Transform: [6]float64{500000, 5, 0, 4000000, 0, -5}}
	src := make([]uint8, sw*sh)
	for i := range src {
		src[i] = class(i%sw, i/sw)
	}
	path := filepath.Join(t.TempDir(), "classes.tif")
	nd := 255.0
	if err := WriteCOG(path, sg, src, COGOptions{NoData: &nd}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
// crop in mode by lulc's rule and by GDAL's warper.
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
	b.Run("gdal", func(b *testing.B) {
		for b.Loop() {
			if err := s.warp(dst, "mode", buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
