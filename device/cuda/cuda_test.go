package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/pixel/composite"
)

// TestPTXUpToDate fails when lulc.cu changed without gen.sh being rerun,
// or when the PTX needs a newer driver than CUDA 13.0's (ISA 9.0).
func TestPTXUpToDate(t *testing.T) {
	src, err := os.ReadFile("kernels/lulc.cu")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if !strings.Contains(ptx, "// lulc.cu sha256: "+hex.EncodeToString(sum[:])) {
		t.Fatal("kernels/lulc.ptx was not generated from the current lulc.cu: run go generate ./cuda/... on a GPU host")
	}
	v := versionRE.FindStringSubmatch(ptx)
	if v == nil {
		t.Fatal("no .version in lulc.ptx")
	}
	if major := v[1]; major > "9" || major == "9" && v[2] > "0" {
		t.Fatalf("PTX ISA %s.%s is newer than the 9.0 that CUDA 13.0 drivers load", v[1], v[2])
	}
}

// gpu opens GPU 0, skipping without one unless LULC_REQUIRE_GPU=1, with
// the kernels of the PTX file LULC_PTX names when set (the GPU host's
// reports time a candidate against the committed ones that way).
func gpu(t testing.TB) *Device {
	return gpuWith(t, Options{})
}

// gpuWith is gpu with opt (its PTX from LULC_PTX when unset).
func gpuWith(t testing.TB, opt Options) *Device {
	t.Helper()
	if p := os.Getenv("LULC_PTX"); p != "" && opt.PTX == "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("LULC_PTX: %v", err)
		}
		opt.PTX = string(b)
	}
	d, err := Open(0, opt)
	if err != nil {
		if os.Getenv("LULC_REQUIRE_GPU") == "1" {
			t.Fatalf("LULC_REQUIRE_GPU=1 but no usable GPU: %v", err)
		}
		t.Skipf("no usable GPU: %v", err)
	}
	return d
}

// hard values: NaN, zeros of both signs, denormals, exact opposites
// (zero denominators), huge and tiny magnitudes.
var hard = []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 0.5, -0.5, 3e38, -3e38, 1e-30, 0.1, -0.1}

func randomPlanes(r *rand.Rand, planes, n int) [][]float32 {
	out := make([][]float32, planes)
	for p := range out {
		out[p] = make([]float32, n)
		for i := range out[p] {
			switch r.IntN(20) {
			case 0:
				out[p][i] = hard[r.IntN(len(hard))]
			case 1:
				out[p][i] = float32(math.NaN())
			default:
				out[p][i] = float32(r.Float64()*1.3 - 0.1)
			}
		}
	}
	return out
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func TestMedianBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for _, dates := range []int{1, 2, 3, 4, 7, 12, 24} {
		const n = 1 << 18
		planes := randomPlanes(r, dates, n)
		for i := 0; i < n; i += 13 { // ties and signed zeros
			planes[0][i] = planes[dates-1][i]
			if i%26 == 0 {
				planes[0][i] = float32(math.Copysign(0, -1))
				planes[dates-1][i] = 0
			}
		}
		want := make([]float32, n)
		if err := composite.Median(want, planes); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		count := make([]uint8, n)
		if err := Median(d, got, count, planes); err != nil {
			t.Fatal(err)
		}
		if i := sameBits(want, got); i >= 0 {
			var in []float32
			for _, p := range planes {
				in = append(in, p[i])
			}
			t.Fatalf("%d dates: pixel %d CPU %v GPU %v from %v", dates, i, want[i], got[i], in)
		}
		for i := range n {
			k := 0
			for _, p := range planes {
				if p[i] == p[i] {
					k++
				}
			}
			if int(count[i]) != k {
				t.Fatalf("%d dates: pixel %d count %d, want %d", dates, i, count[i], k)
			}
		}
	}
}

func TestReport(t *testing.T) {
	r, ok := Report()
	if os.Getenv("LULC_REQUIRE_GPU") == "1" && !ok {
		t.Fatalf("LULC_REQUIRE_GPU=1 but:\n%s", r)
	}
	if !ok && !strings.Contains(r, "not usable") {
		t.Errorf("a report without a usable GPU must say why:\n%s", r)
	}
	t.Log("\n" + r)
}

// TestCompositeBitExact checks the fused composite (masking, reflectance,
// median, quantisation, counts) against composite.Window over random
// windows: nodata, dropped and kept scene classes, extreme DNs, two
// processing baselines' scalings, 1 to 255 dates.
func TestCompositeBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(13, 14))
	const n, nb = 70_001, 4
	for _, nd := range []int{1, 2, 3, 5, 12, 24, 70, 255} {
		dates := make([]composite.Date, nd)
		for di := range dates {
			cd := composite.Date{SCL: make([]uint8, n)}
			for range nb {
				dn := make([]uint16, n)
				for i := range dn {
					switch r.IntN(30) {
					case 0:
						dn[i] = 0
					case 1:
						dn[i] = 65535
					case 2:
						dn[i] = uint16(r.IntN(3))
					default:
						dn[i] = uint16(r.IntN(12000))
					}
				}
				off := -0.1
				if di%2 == 1 {
					off = 0
				}
				cd.DN, cd.NoData = append(cd.DN, dn), append(cd.NoData, uint16(di%2))
				cd.Scale, cd.Offset = append(cd.Scale, 0.0001), append(cd.Offset, off)
			}
			for i := range cd.SCL {
				cd.SCL[i] = uint8(r.IntN(12))
			}
			dates[di] = cd
		}
		want, got := make([][]uint16, nb), make([][]uint16, nb)
		for b := range nb {
			want[b], got[b] = make([]uint16, n), make([]uint16, n)
		}
		wc, gc := make([]uint8, n), make([]uint8, n)
		if err := composite.Window(dates, composite.DefaultDropSCL, 0.0001, -0.1, want, wc); err != nil {
			t.Fatal(err)
		}
		if err := Composite(d, dates, composite.DefaultDropSCL, 0.0001, -0.1, got, gc); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if wc[i] != gc[i] {
				t.Fatalf("%d dates, pixel %d: count CPU %d, GPU %d", nd, i, wc[i], gc[i])
			}
			for b := range nb {
				if want[b][i] != got[b][i] {
					t.Fatalf("%d dates, pixel %d band %d: CPU %d, GPU %d", nd, i, b, want[b][i], got[b][i])
				}
			}
		}
	}
}

// TestCompositeTemporalBitExact checks the temporal planes (percentiles
// and seasonal medians of bands and indices, composite.WindowTemporal)
// with the medians and counts, over random series of 1 to 255 dates with
// gaps, ties and seasons that wrap over new year.
func TestCompositeTemporalBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(31, 32))
	bands := []string{"B02", "B04", "B08", "B11"}
	tp, err := composite.NewTemporal([]string{"ndvi", "B08", "evi", "nd(B11,B08)", "bsi"}, bands, []int{1, 10, 50, 90, 99},
		[]composite.Season{{Name: "winter", From: composite.MonthDay{Month: time.December, Day: 1}, To: composite.MonthDay{Month: time.February, Day: 28}},
			{Name: "summer", From: composite.MonthDay{Month: time.June, Day: 1}, To: composite.MonthDay{Month: time.August, Day: 31}},
			{Name: "all", From: composite.MonthDay{Month: time.January, Day: 1}, To: composite.MonthDay{Month: time.December, Day: 31}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30_011
	nb, np := len(bands), len(bands)+len(tp.Planes())
	for _, nd := range []int{1, 2, 7, 12, 70, 255} {
		dates := make([]composite.Date, nd)
		for di := range dates {
			cd := composite.Date{SCL: make([]uint8, n), Time: time.Date(2020+r.IntN(3), time.Month(1+r.IntN(12)), 1+r.IntN(28), 10, 0, 0, 0, time.UTC)}
			for range nb {
				dn := make([]uint16, n)
				for i := range dn {
					switch r.IntN(40) {
					case 0:
						dn[i] = 0
					case 1:
						dn[i] = 1000 // reflectance 0 at offset −0.1: zero denominators
					default:
						dn[i] = uint16(r.IntN(60)) * 100 // ties
					}
				}
				cd.DN, cd.NoData = append(cd.DN, dn), append(cd.NoData, 0)
				cd.Scale, cd.Offset = append(cd.Scale, 0.0001), append(cd.Offset, -0.1)
			}
			for i := range cd.SCL {
				cd.SCL[i] = uint8(r.IntN(12))
			}
			dates[di] = cd
		}
		want, got := make([][]uint16, np), make([][]uint16, np)
		for b := range np {
			want[b], got[b] = make([]uint16, n), make([]uint16, n)
		}
		wc, gc := make([]uint8, n), make([]uint8, n)
		if err := composite.WindowTemporal(dates, composite.Spec{Drop: composite.DefaultDropSCL, Temporal: tp, Scale: 0.0001, Offset: -0.1}, want, wc); err != nil {
			t.Fatal(err)
		}
		if err := CompositeMirrored(d, dates, composite.Spec{Drop: composite.DefaultDropSCL, Temporal: tp, Scale: 0.0001, Offset: -0.1}, got, gc, nil); err != nil {
			t.Fatal(err)
		}
		names := append(slices.Clone(bands), tp.Planes()...)
		for i := range n {
			if wc[i] != gc[i] {
				t.Fatalf("%d dates, pixel %d: count CPU %d, GPU %d", nd, i, wc[i], gc[i])
			}
			for b := range np {
				if want[b][i] != got[b][i] {
					t.Fatalf("%d dates, pixel %d, %s: CPU %d, GPU %d", nd, i, names[b], want[b][i], got[b][i])
				}
			}
		}
	}
}

// TestCompositeCoarseBitExact checks the composite with bands that arrive
// at a coarser resolution (k = 2 and 6, windows inside the raster and at
// its edges, nodata in the planes) against composite.Resample and
// composite.Window on the CPU.
func TestCompositeCoarseBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(21, 22))
	// One date shows every resampled value as it is; three go through the
	// median.
	for _, tc := range []struct{ k, x, y, w, h, rw, rh, nd int }{
		{2, 0, 0, 96, 64, 48, 40, 1},   // at the raster's origin
		{2, 40, 20, 56, 60, 48, 40, 1}, // at its far edges
		{2, 1000, 512, 512, 256, 5490, 5490, 3},
		{6, 12, 6, 120, 90, 40, 30, 1},
		{6, 12, 6, 120, 90, 40, 30, 3},
	} {
		win := resample.Window{X: tc.x, Y: tc.y, W: tc.w, H: tc.h, K: tc.k, RasterW: tc.rw, RasterH: tc.rh}
		n := tc.w * tc.h
		nd, nb := tc.nd, 3
		cpu, gpuDates := make([]composite.Date, nd), make([]composite.Date, nd)
		for di := range nd {
			cd := composite.Date{SCL: make([]uint8, n), Coarse: make([]*resample.Coarse, nb)}
			for b := range nb {
				cd.NoData = append(cd.NoData, 0)
				cd.Scale, cd.Offset = append(cd.Scale, 0.0001), append(cd.Offset, -0.1)
				if b == 0 { // a 10 m band
					dn := make([]uint16, n)
					for i := range dn {
						dn[i] = uint16(r.IntN(9000))
					}
					cd.DN = append(cd.DN, dn)
					continue
				}
				px, py, pw, ph := win.Need(true)
				pl := resample.Plane[uint16]{X0: px, Y0: py, W: pw, H: ph, Pix: make([]uint16, pw*ph)}
				for i := range pl.Pix {
					if r.IntN(10) > 0 {
						pl.Pix[i] = uint16(1 + r.IntN(12000))
					}
				}
				cd.DN = append(cd.DN, nil)
				cd.Coarse[b] = &resample.Coarse{Window: win, Plane: pl, NoData: 0, HasNoData: b == 1}
			}
			for i := range cd.SCL {
				cd.SCL[i] = uint8(r.IntN(12))
			}
			gpuDates[di] = cd
			c := cd
			c.DN = append([][]uint16(nil), cd.DN...)
			cpu[di] = c
		}
		want, got := make([][]uint16, nb), make([][]uint16, nb)
		for b := range nb {
			want[b], got[b] = make([]uint16, n), make([]uint16, n)
		}
		wc, gc := make([]uint8, n), make([]uint8, n)
		if err := composite.Resample(cpu); err != nil {
			t.Fatal(err)
		}
		if err := composite.Window(cpu, composite.DefaultDropSCL, 0.0001, -0.1, want, wc); err != nil {
			t.Fatal(err)
		}
		if err := Composite(d, gpuDates, composite.DefaultDropSCL, 0.0001, -0.1, got, gc); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if wc[i] != gc[i] {
				t.Fatalf("%+v pixel %d: count CPU %d, GPU %d", tc, i, wc[i], gc[i])
			}
			for b := range nb {
				if want[b][i] != got[b][i] {
					t.Fatalf("%+v pixel %d band %d: CPU %d, GPU %d", tc, i, b, want[b][i], got[b][i])
				}
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// medianOf returns the median of v (the upper one of an even count).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestFatbinUpToDate: the embedded fatbin was made from the committed PTX
// (its sidecar records the PTX's SHA-256) and holds machine code for
// sm_80 and sm_90 with the PTX as the fallback.
func TestFatbinUpToDate(t *testing.T) {
	side, err := os.ReadFile("kernels/lulc.fatbin.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(ptx))
	if !strings.Contains(string(side), "lulc.ptx sha256: "+hex.EncodeToString(sum[:])) {
		t.Fatal("kernels/lulc.fatbin was not made from the current lulc.ptx: run go generate ./device/cuda/... on a GPU host")
	}
	images, err := Images(fatbin)
	if err != nil {
		t.Fatal(err)
	}
	want := []Image{{Arch: 80}, {Arch: 90}, {PTX: true, Arch: 75}}
	if !slices.Equal(images, want) {
		t.Fatalf("fatbin images %v, want %v", images, want)
	}
	if !strings.Contains(ptx, "\n.target sm_75") {
		t.Error("the PTX does not target compute_75, which the fatbin says it holds")
	}
}

// TestMachineCode: machine code for sm_XY serves X.Y and later minors of
// major X; other GPUs get the PTX.
func TestMachineCode(t *testing.T) {
	images := []Image{{Arch: 80}, {Arch: 90}, {PTX: true, Arch: 75}}
	for _, tc := range []struct {
		major, minor int
		want         string
	}{{8, 0, "sm_80"}, {8, 6, "sm_80"}, {8, 9, "sm_80"}, {9, 0, "sm_90"}, {7, 5, ""}, {10, 0, ""}, {12, 0, ""}} {
		im, ok := MachineCode(images, tc.major, tc.minor)
		if got := map[bool]string{true: im.String(), false: ""}[ok]; got != tc.want {
			t.Errorf("compute %d.%d: %q, want %q", tc.major, tc.minor, got, tc.want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("not a fatbin at all"), fatbin[:40]} {
		if _, err := Images(bad); err == nil {
			t.Errorf("%d bytes read as a fatbin", len(bad))
		}
	}
}
