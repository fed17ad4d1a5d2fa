package resample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// whole resamples the whole raster in one window.
func whole(t *testing.T, src []uint16, rw, rh, k int, nodata uint16, has bool) []uint16 {
	t.Helper()
	w := Window{W: rw * k, H: rh * k, K: k, RasterW: rw, RasterH: rh}
	out := make([]uint16, w.W*w.H)
	if err := Bilinear(out, w, Plane[uint16]{W: rw, H: rh, Pix: src}, nodata, has); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBilinearByHand(t *testing.T) {
	t.Parallel()
	got := whole(t, []uint16{100, 200}, 2, 1, 2, 0, false)
	want := []uint16{100, 125, 175, 200}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// Two rows: the middle output rows blend ¾·row + ¼·other row.
	got = whole(t, []uint16{0, 0, 160, 160}, 2, 2, 2, 65535, true)
	if got[0] != 0 || got[4] != 40 || got[8] != 120 || got[12] != 160 {
		t.Fatalf("column 0 = %d %d %d %d, want 0 40 120 160", got[0], got[4], got[8], got[12])
	}
	// Rounding: 0.75·1 + 0.25·2 = 1.25 → 1; 0.25·1 + 0.75·2 = 1.75 → 2;
	// 0.5 rounds up (k = 1 blends nothing, so use three pixels at k = 2:
	// 9/16·1 + 3/16·2 + 3/16·2 + 1/16·1 = 1.375 → 1).
	got = whole(t, []uint16{1, 2}, 2, 1, 2, 0, false)
	if got[1] != 1 || got[2] != 2 {
		t.Fatalf("rounding: got %v", got)
	}
}

// reference computes the documented rule in float64, independently of the
// integer code: neighbours by coordinate, edge and nodata excluded,
// renormalised, rounded half up.
func reference(src []uint16, rw, rh, k int, nodata uint16, has bool) []uint16 {
	out := make([]uint16, rw*k*rh*k)
	for J := range rh * k {
		for I := range rw * k {
			px := (float64(I)+0.5)/float64(k) - 0.5
			py := (float64(J)+0.5)/float64(k) - 0.5
			bx, by := int(math.Floor(px)), int(math.Floor(py))
			fx, fy := px-float64(bx), py-float64(by)
			var s, wt float64
			for dy := 0; dy < 2; dy++ {
				for dx := 0; dx < 2; dx++ {
					x, y := bx+dx, by+dy
					w := (1 - fx) * (1 - fy)
					if dx == 1 {
						w = fx * (1 - fy)
					}
					if dy == 1 {
						w = (1 - fx) * fy
						if dx == 1 {
							w = fx * fy
						}
					}
					if x < 0 || y < 0 || x >= rw || y >= rh || w == 0 {
						continue
					}
					v := src[y*rw+x]
					if has && v == nodata {
						continue
					}
					s += w * float64(v)
					wt += w
				}
			}
			if wt == 0 {
				out[J*rw*k+I] = nodata
				continue
			}
			// Weights such as 5/12 are inexact in float64: treat a value
			// within 1e-9 of a half as the exact half it stands for.
			v := s / wt
			if math.Abs(v-math.Floor(v)-0.5) < 1e-9 {
				v = math.Floor(v) + 0.5
			}
			out[J*rw*k+I] = uint16(math.Floor(v + 0.5))
		}
	}
	return out
}

func randomRaster(r *rand.Rand, n int, nodataShare float64) []uint16 {
	src := make([]uint16, n)
	for i := range src {
		src[i] = uint16(r.IntN(65535) + 1)
		if r.Float64() < nodataShare {
			src[i] = 0
		}
	}
	return src
}

func TestBilinearMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 6} {
		for _, nd := range []float64{0, 0.3} {
			rw, rh := 7, 5
			src := randomRaster(r, rw*rh, nd)
			got := whole(t, src, rw, rh, k, 0, nd > 0)
			want := reference(src, rw, rh, k, 0, nd > 0)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("k=%d nodata=%v pixel %d: got %d, reference %d", k, nd, i, got[i], want[i])
				}
			}
		}
	}
}

func TestBilinearNoData(t *testing.T) {
	t.Parallel()
	// A nodata pixel never bleeds into its neighbours, and an output whose
	// neighbours are all nodata is nodata.
	src := []uint16{500, 0, 0, 0}
	got := whole(t, src, 2, 2, 2, 0, true)
	for J := range 4 {
		for I := range 4 {
			v := got[J*4+I]
			if I < 2 && J < 2 {
				if v != 500 {
					t.Fatalf("pixel (%d,%d) = %d, want 500", I, J, v)
				}
			} else if I >= 3 || J >= 3 {
				if v != 0 {
					t.Fatalf("pixel (%d,%d) = %d, want nodata", I, J, v)
				}
			} else if v != 500 {
				t.Fatalf("pixel (%d,%d) = %d, want 500 (its only valid neighbour)", I, J, v)
			}
		}
	}
}

// TestWindowsAgree cuts the same raster into windows of several sizes and
// offsets: with planes covering Need, every window gives the pixels of the
// whole-raster result.
func TestWindowsAgree(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{2, 6} {
		rw, rh := 23, 17
		src := randomRaster(r, rw*rh, 0.1)
		full := whole(t, src, rw, rh, k, 0, true)
		fw := rw * k
		for _, size := range []int{1, 5, 16, 64} {
			for y := 0; y < rh*k; y += size {
				for x := 0; x < fw; x += size {
					w := Window{X: x, Y: y, W: min(size, fw-x), H: min(size, rh*k-y), K: k, RasterW: rw, RasterH: rh}
					px, py, pw, ph := w.Need(true)
					p := Plane[uint16]{X0: px, Y0: py, W: pw, H: ph, Pix: make([]uint16, pw*ph)}
					for j := range ph {
						copy(p.Pix[j*pw:(j+1)*pw], src[(py+j)*rw+px:])
					}
					out := make([]uint16, w.W*w.H)
					if err := Bilinear(out, w, p, 0, true); err != nil {
						t.Fatal(err)
					}
					for j := range w.H {
						for i := range w.W {
							if out[j*w.W+i] != full[(y+j)*fw+x+i] {
								t.Fatalf("k=%d window %d at (%d,%d): pixel (%d,%d) differs", k, size, x, y, i, j)
							}
						}
					}
				}
			}
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	src := []uint8{1, 2, 3, 4, 5, 6}
	w := Window{X: 1, Y: 1, W: 4, H: 3, K: 2, RasterW: 3, RasterH: 2}
	px, py, pw, ph := w.Need(false)
	if px != 0 || py != 0 || pw != 3 || ph != 2 {
		t.Fatalf("Need = %d %d %d %d", px, py, pw, ph)
	}
	out := make([]uint8, 12)
	if err := Nearest(out, w, Plane[uint8]{W: 3, H: 2, Pix: src}); err != nil {
		t.Fatal(err)
	}
	want := []uint8{1, 2, 2, 3, 4, 5, 5, 6, 4, 5, 5, 6}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("got %v, want %v", out, want)
		}
	}
}

func TestPlaneMustCover(t *testing.T) {
	t.Parallel()
	w := Window{X: 4, Y: 4, W: 4, H: 4, K: 2, RasterW: 8, RasterH: 8}
	p := Plane[uint16]{X0: 2, Y0: 2, W: 2, H: 2, Pix: make([]uint16, 4)} // lacks the halo
	if err := Bilinear(make([]uint16, 16), w, p, 0, false); err == nil {
		t.Fatal("a plane without the halo was accepted")
	}
	if err := Bilinear(make([]uint16, 15), w, p, 0, false); err == nil {
		t.Fatal("a short output was accepted")
	}
}

func BenchmarkBilinear2x(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	src := randomRaster(r, 514*514, 0.01)
	w := Window{X: 1024, Y: 1024, W: 1024, H: 1024, K: 2, RasterW: 5490, RasterH: 5490}
	p := Plane[uint16]{X0: 511, Y0: 511, W: 514, H: 514, Pix: src}
	out := make([]uint16, 1024*1024)
	b.SetBytes(int64(len(out) * 2))
	for b.Loop() {
		if err := Bilinear(out, w, p, 0, true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDividerExact checks the reciprocal division against the hardware
// division for every numerator Bilinear can produce, for each zoom that
// Sentinel-2's grids use and a few more.
func TestDividerExact(t *testing.T) {
	t.Parallel()
	for _, k := range []uint32{1, 2, 3, 6, 12} {
		full := 4 * k * k
		d := 2 * full
		v := newDivider(d)
		top := 2*65535*full + full
		for x := uint32(0); x <= top; x++ {
			if v.div(x) != x/d {
				t.Fatalf("k=%d: %d/%d = %d, divider says %d", k, x, d, x/d, v.div(x))
			}
		}
	}
}
