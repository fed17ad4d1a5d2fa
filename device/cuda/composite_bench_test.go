package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/pixel/composite"
)

// TestCompositeBlock: every date count up to the kernel's 255 gets a block
// of whole warps, 32 to 256 threads, whose sorting slots fit the shared
// memory a block may take without opting in to more.
func TestCompositeBlock(t *testing.T) {
	for nd := 1; nd <= 255; nd++ {
		block, shared := compositeBlock(nd)
		if block < 32 || block > 256 || block%32 != 0 {
			t.Fatalf("%d dates: block of %d threads", nd, block)
		}
		if shared != block*nd*5 || shared > compositeShared {
			t.Fatalf("%d dates: %d bytes of shared memory for %d threads", nd, shared, block)
		}
	}
	if b, _ := compositeBlock(24); b != 256 {
		t.Errorf("24 dates: block of %d threads, want 256", b)
	}
}

// TestGPUCompositeReport times the composite kernel with the temporal
// planes of configs/ingest-full-temporal.yaml (10 bands; NDVI, NDWI, B08
// and B11 each with 3 percentiles and 3 seasonal medians) on a 1024²
// window of 2 to 70 dates, the kernel alone (its inputs already on the
// device), and composite.WindowTemporal on the host's cores over a part
// of the window, and prints the cost per date. LULC_PTX picks the kernels
// to time (for the committed against a candidate, in one call).
func TestGPUCompositeReport(t *testing.T) {
	if os.Getenv("LULC_GPU_BENCH") != "1" {
		t.Skip("set LULC_GPU_BENCH=1 to measure")
	}
	d := gpu(t)
	defer d.Close()
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	month := func(m time.Month, day int) composite.MonthDay { return composite.MonthDay{Month: m, Day: day} }
	tp, err := composite.NewTemporal([]string{"ndvi", "ndwi", "B08", "B11"}, bands, []int{10, 50, 90}, []composite.Season{
		{Name: "spring", From: month(time.March, 1), To: month(time.May, 31)},
		{Name: "summer", From: month(time.June, 1), To: month(time.August, 31)},
		{Name: "autumn", From: month(time.September, 1), To: month(time.November, 30)}})
	must(t, err)
	const side = 1024
	const n = side * side
	const cpuPixels = n / 16
	nb, np := len(bands), len(bands)+len(tp.Planes())
	tileWindows := float64(10980*10980) / float64(n)
	fmt.Printf("device %s, %d host cores; PTX %q\n", d.Name, runtime.NumCPU(), os.Getenv("LULC_PTX"))
	var prevMS, prevCPU float64
	prevND := 0
	for _, nd := range []int{2, 6, 12, 24, 48, 70} {
		r := rand.New(rand.NewPCG(uint64(nd), 38))
		dates := make([]composite.Date, nd)
		for di := range dates {
			// A date every 5 days from March: the seasons all hold some.
			at := time.Date(2024, time.March, 1, 10, 0, 0, 0, time.UTC).AddDate(0, 0, 5*di)
			cd := composite.Date{SCL: make([]uint8, n), Time: at}
			for range nb {
				dn := make([]uint16, n)
				for i := range dn {
					dn[i] = uint16(1000 + r.IntN(4000))
					if r.IntN(50) == 0 {
						dn[i] = 0
					}
				}
				cd.DN, cd.NoData = append(cd.DN, dn), append(cd.NoData, 0)
				cd.Scale, cd.Offset = append(cd.Scale, 0.0001), append(cd.Offset, -0.1)
			}
			for i := range cd.SCL {
				cd.SCL[i] = 4 // vegetation
				if r.IntN(5) == 0 {
					cd.SCL[i] = 9 // cloud: dropped
				}
			}
			dates[di] = cd
		}
		out := make([][]uint16, np)
		for b := range out {
			out[b] = make([]uint16, n)
		}
		count := make([]uint8, n)
		must(t, CompositeMirrored(d, dates, composite.Spec{Drop: composite.DefaultDropSCL, Temporal: tp, Scale: 0.0001, Offset: -0.1}, out, count, nil))
		var ms float64
		must(t, d.Do(func() error {
			var err error
			ms, err = driver.TimeIt(5, func() error { return relaunchComposite(d, nd, nb, n, tp) })
			return err
		}))
		// The host's twin over a sixteenth of the window.
		part := make([]composite.Date, nd)
		for di, cd := range dates {
			p := composite.Date{SCL: cd.SCL[:cpuPixels], Time: cd.Time, Scale: cd.Scale, Offset: cd.Offset, NoData: cd.NoData}
			for _, dn := range cd.DN {
				p.DN = append(p.DN, dn[:cpuPixels])
			}
			part[di] = p
		}
		pout := make([][]uint16, np)
		for b := range pout {
			pout[b] = make([]uint16, cpuPixels)
		}
		pcount := make([]uint8, cpuPixels)
		var cpuTimes []float64
		for range 3 {
			t0 := time.Now()
			must(t, composite.WindowTemporal(part, composite.Spec{Drop: composite.DefaultDropSCL, Temporal: tp, Scale: 0.0001, Offset: -0.1}, pout, pcount))
			cpuTimes = append(cpuTimes, time.Since(t0).Seconds()*1e9/cpuPixels)
		}
		cpu := medianOf(cpuTimes)
		for b := range pout {
			for i := range cpuPixels {
				if pout[b][i] != out[b][i] {
					t.Fatalf("%d dates: plane %d pixel %d: CPU %d, GPU %d", nd, b, i, pout[b][i], out[b][i])
				}
			}
		}
		block, shared := compositeBlock(nd)
		line := fmt.Sprintf("%3d dates: kernel %8.2f ms a 1024² window (%.3f ms/date), %6.2f s a 10980² tile; block %d, %d B shared; CPU %7.1f ns/pixel (%.2f ns/pixel/date)",
			nd, ms, ms/float64(nd), ms*tileWindows/1e3, block, shared, cpu, cpu/float64(nd))
		if prevND > 0 {
			line += fmt.Sprintf("; added dates: GPU %.3f ms/date, CPU %.2f ns/pixel/date", (ms-prevMS)/float64(nd-prevND), (cpu-prevCPU)/float64(nd-prevND))
		}
		fmt.Println(line)
		prevMS, prevCPU, prevND = ms, cpu, nd
		if math.IsNaN(ms) {
			t.Fatal("no time")
		}
	}
}

// relaunchComposite runs the composite kernel again on the inputs that the
// last CompositeMirrored left in the device's pool.
func relaunchComposite(d *Device, nd, nb, n int, tp *composite.Temporal) error {
	m := d.Pool()
	buf := func(name string) uint64 { return m[name].Ptr }
	grid, block, shared := d.compositeLaunch(nd, n)
	return d.LaunchGrid(0, "composite", [3]uint32{grid, 1, 1}, block, shared, buf("composite.dn"), buf("composite.scl"), int32(nd), int32(nb), int64(n),
		buf("composite.drop"), buf("composite.scale"), buf("composite.offset"), buf("composite.nodata"),
		math.Float64bits(0.0001), math.Float64bits(-0.1), buf("composite.out"), buf("composite.count"),
		buf("composite.tprog"), int32(len(tp.Sources)), buf("composite.pcts"), int32(len(tp.Percentiles)), buf("composite.smask"), int32(len(tp.Seasons)))
}
