package raster

import (
	"fmt"
	"github.com/lulc/lulc/geo"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// coarse writes a 20 m UInt16 COG of n×n pixels with nodata 0 in a corner
// region and returns it opened, with its pixels.
func coarse(t *testing.T, n, block int) (*Source, []uint16) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]uint16, n*n)
	for i := range src {
		src[i] = uint16(500 + r.IntN(6000))
		if x, y := i%n, i/n; x < n/5 && y < n/4 {
			src[i] = 0
		}
	}
	path := filepath.Join(t.TempDir(), "b20.tif")
	nd := 0.0
	g20 := geo.Grid{EPSG: 32631, Width: n, Height: n, Transform: [6]float64{500000, 20, 0, 5000000, 0, -20}}
	if err := WriteCOG(path, g20, src, COGOptions{BlockSize: block, NoData: &nd}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, src
}

func fine(x, y, w, h int) geo.Grid {
	return geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000 + float64(x)*10, 10, 0, 5000000 - float64(y)*10, 0, -10}}
}

// TestUpsampleWindowsAndCache reads a 20 m band onto 10 m windows of
// several sizes, through a shared block cache from several goroutines
// (each with its own handle) and without one: every way gives the pixels
// of one whole-grid read.
func TestUpsampleWindowsAndCache(t *testing.T) {
	const n = 300
	s, _ := coarse(t, n, 256)
	whole := make([]uint16, 4*n*n)
	if err := s.Upsample(fine(0, 0, 2*n, 2*n), "bilinear", whole, nil); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{64, 100, 256} {
		cache := NewBlockCache(1 << 20) // small: forces eviction
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for worker := range 4 {
			wg.Go(func() {
				h, err := Open(s.Href)
				if err != nil {
					errs <- err
					return
				}
				defer h.Close()
				k := 0
				for y := 0; y < 2*n; y += size {
					for x := 0; x < 2*n; x += size {
						if k++; k%4 != worker {
							continue
						}
						w, hh := min(size, 2*n-x), min(size, 2*n-y)
						// Nested reads need even sizes and offsets at k = 2.
						w, hh = w&^1, hh&^1
						part := make([]uint16, w*hh)
						c := cache
						if k%3 == 0 {
							c = nil
						}
						if err := h.Upsample(fine(x, y, w, hh), "bilinear", part, c); err != nil {
							errs <- err
							return
						}
						for j := range hh {
							if !slices.Equal(part[j*w:(j+1)*w], whole[(y+j)*2*n+x:(y+j)*2*n+x+w]) {
								errs <- errorf("window %d at (%d,%d) row %d differs from the whole read", size, x, y, j)
								return
							}
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// TestUpsampleAgainstGDAL compares lulc's resampling with GDAL's: nearest
// is the same; bilinear differs by at most 1 DN away from nodata (GDAL
// rounds its floating-point blend; lulc blends in integers) and never
// lets nodata bleed into a valid pixel.
func TestUpsampleAgainstGDAL(t *testing.T) {
	const n = 200
	s, src := coarse(t, n, 128)
	g := fine(0, 0, 2*n, 2*n)
	for _, alg := range []string{"nearest", "bilinear"} {
		ours := make([]uint16, 4*n*n)
		gdal := make([]uint16, 4*n*n)
		if err := s.Upsample(g, alg, ours, NewBlockCache(1<<30)); err != nil {
			t.Fatal(err)
		}
		if err := s.Read(g, alg, gdal); err != nil {
			t.Fatal(err)
		}
		maxDiff, diffs := 0, 0
		for i := range ours {
			x, y := i%(2*n), i/(2*n)
			if alg == "bilinear" && src[(y/2)*n+x/2] != 0 && ours[i] == 0 {
				t.Fatalf("bilinear: valid pixel (%d,%d) became nodata", x, y)
			}
			// Skip the pixels whose neighbourhood touches nodata: GDAL's
			// RasterIO blends nodata in as a value.
			if x < 2*n/5+4 && y < 2*n/4+4 {
				continue
			}
			d := int(ours[i]) - int(gdal[i])
			if d != 0 {
				diffs++
			}
			maxDiff = max(maxDiff, d, -d)
		}
		t.Logf("%s: %d of %d pixels differ from GDAL, by at most %d DN", alg, diffs, len(ours), maxDiff)
		if (alg == "nearest" && maxDiff != 0) || maxDiff > 1 {
			t.Fatalf("%s differs from GDAL by %d DN", alg, maxDiff)
		}
	}
}

// TestUpsampleFallsBack leaves what lulc's resampling does not cover to
// GDAL: cubic, and reads at the source's own resolution.
func TestUpsampleFallsBack(t *testing.T) {
	s, src := coarse(t, 128, 128)
	native := geo.Grid{EPSG: 32631, Width: 128, Height: 128, Transform: s.Transform}
	buf := make([]uint16, 128*128)
	if err := s.Upsample(native, "bilinear", buf, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(buf, src) {
		t.Fatal("a read at the source's resolution changed pixels")
	}
	ours, gdal := make([]uint16, 256*256), make([]uint16, 256*256)
	if err := s.Upsample(fine(0, 0, 256, 256), "cubic", ours, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(fine(0, 0, 256, 256), "cubic", gdal); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ours, gdal) {
		t.Fatal("cubic did not go to GDAL")
	}
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// TestCoarseThenBilinear: the plane Coarse reads, resampled later (as the
// composite does, on either engine), gives Upsample's pixels; grids that
// lulc's bilinear does not cover give no plane.
func TestCoarseThenBilinear(t *testing.T) {
	s, _ := coarse(t, 150, 128)
	cache := NewBlockCache(1 << 24)
	for _, q := range [][4]int{{0, 0, 300, 300}, {100, 60, 120, 80}, {200, 200, 100, 100}} {
		g := fine(q[0], q[1], q[2], q[3])
		want := make([]uint16, q[2]*q[3])
		if err := s.Upsample(g, "bilinear", want, nil); err != nil {
			t.Fatal(err)
		}
		c, err := s.Coarse(g, cache)
		if err != nil || c == nil {
			t.Fatalf("Coarse: %v, %v", c, err)
		}
		got, err := c.Bilinear()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("window %v: coarse plane resampled differs from Upsample", q)
		}
	}
	native := geo.Grid{EPSG: 32631, Width: 150, Height: 150, Transform: s.Transform}
	if c, err := s.Coarse(native, cache); c != nil || err != nil {
		t.Fatalf("a read at the source's resolution gave a plane (%v)", err)
	}
}
