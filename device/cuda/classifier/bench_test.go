package classifier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// TestGPUReport measures, in one run on a GPU host, what docs/benchmarks.md
// records: the device's copy bandwidth, the fused features kernel on a full
// tile with data on the device, the median composite against the CPU
// path, pinned transfer rates and end-to-end features with copies against
// the CPU path. Run with LULC_GPU_BENCH=1 (it needs about 40 GB of host and
// 20 GB of GPU memory).
func TestGPUReport(t *testing.T) {
	if os.Getenv("LULC_GPU_BENCH") != "1" {
		t.Skip("set LULC_GPU_BENCH=1 to measure")
	}
	d := gpu(t)
	defer d.Close()
	drv, _ := driver.DriverVersion()
	fmt.Printf("device %s, %d SMs, %.1f GiB, driver CUDA %s, PTX %s; host %d CPUs\n", d.Name, d.SMs, float64(d.Memory)/(1<<30), drv, ptxVersion(d), runtime.NumCPU())
	const n = 10980 * 10980
	const reps = 10
	r := rand.New(rand.NewPCG(7, 8))

	// 1. Device-to-device copy, 2 GiB: bytes read + written.
	var copyGBs float64
	must(t, d.Do(func() error {
		const size = 2 << 30
		a, err := driver.Alloc(size)
		if err != nil {
			return err
		}
		defer a.Free()
		b, err := driver.Alloc(size)
		if err != nil {
			return err
		}
		defer b.Free()
		ms, err := driver.TimeIt(reps, func() error { return driver.CopyOnDevice(b.Ptr, a.Ptr, size) })
		copyGBs = 2 * size / (ms / 1e3) / 1e9
		fmt.Printf("device-to-device copy: %.2f ms for 2 GiB, %.0f GB/s (read + written)\n", ms, copyGBs)
		return err
	}))

	// 2. Fused features on a full tile, data resident on the device.
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	names := append(append([]string{}, bands...), "ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "evi", "savi", "bsi", "ndre1")
	set, _ := features.NewSet(names, bands)
	g, _ := NewFeatures(d, set)
	must(t, d.Do(func() error {
		in, err := driver.Alloc(uint64(n) * 4 * uint64(len(bands)))
		if err != nil {
			return err
		}
		defer in.Free()
		out, err := driver.Alloc(uint64(n) * 4 * uint64(len(names)))
		if err != nil {
			return err
		}
		defer out.Free()
		// Real-valued inputs: upload one random plane per band.
		plane := make([]float32, n)
		for b := range bands {
			for i := range plane {
				plane[i] = float32(r.Float64()*0.6 + 0.01)
			}
			if err := driver.PutAt(in.Ptr+uint64(b)*uint64(n)*4, plane[:n]); err != nil {
				return err
			}
		}
		prog, err := driver.Upload(g.progCodes)
		if err != nil {
			return err
		}
		defer prog.Free()
		ms, err := driver.TimeIt(reps, func() error {
			return d.Launch("features", int64(n), in.Ptr, int32(len(bands)), int64(n), prog.Ptr, int32(len(names)), out.Ptr)
		})
		bytes := float64(n) * 4 * float64(len(bands)+len(names))
		gbs := bytes / (ms / 1e3) / 1e9
		fmt.Printf("fused features, full tile (%d bands → %d features, float32): %.2f ms, %.0f GB/s = %.0f %% of copy\n", len(bands), len(names), ms, gbs, 100*gbs/copyGBs)
		return err
	}))

	// 3. Median composite of 4 dates: GPU kernel (device-resident) and the
	// CPU path on every core, same data.
	const dates = 4
	planes := make([][]float32, dates)
	for k := range planes {
		planes[k] = make([]float32, n)
		for i := range planes[k] {
			if r.IntN(4) == 0 {
				planes[k][i] = float32NaN()
			} else {
				planes[k][i] = float32(r.Float64())
			}
		}
	}
	must(t, d.Do(func() error {
		in, err := driver.Alloc(uint64(n) * 4 * dates)
		if err != nil {
			return err
		}
		defer in.Free()
		for k := range planes {
			if err := driver.PutAt(in.Ptr+uint64(k)*uint64(n)*4, planes[k][:n]); err != nil {
				return err
			}
		}
		out, err := driver.Alloc(uint64(n) * 4)
		if err != nil {
			return err
		}
		defer out.Free()
		cnt, err := driver.Alloc(uint64(n))
		if err != nil {
			return err
		}
		defer cnt.Free()
		ms, err := driver.TimeIt(reps, func() error {
			return d.Launch("median", int64(n), in.Ptr, int32(dates), int64(n), out.Ptr, cnt.Ptr)
		})
		fmt.Printf("median composite, full tile × %d dates: GPU %.2f ms = %.1f G pixel·dates/s\n", dates, ms, float64(n)*dates/(ms/1e3)/1e9)
		return err
	}))
	dst := make([]float32, n)
	var cpuTimes []float64
	for range 3 {
		t0 := time.Now()
		composite.Median(dst, planes)
		cpuTimes = append(cpuTimes, time.Since(t0).Seconds()*1e3)
	}
	cms := medianOf(cpuTimes)
	fmt.Printf("median composite, full tile × %d dates: CPU (%d cores) %.0f ms = %.2f G pixel·dates/s\n", dates, runtime.NumCPU(), cms, float64(n)*dates/(cms/1e3)/1e9)

	// 4. Pinned host ↔ device, 1 GiB.
	must(t, d.Do(func() error {
		const size = 1 << 30
		var host unsafe.Pointer
		if err := driver.AllocHost(&host, size); err != nil {
			return err
		}
		defer driver.FreeHost(host)
		dev, err := driver.Alloc(size)
		if err != nil {
			return err
		}
		defer dev.Free()
		pinned := unsafe.Slice((*byte)(host), size)
		h2d, err := driver.TimeIt(reps, func() error { return driver.PutAt(dev.Ptr, pinned) })
		if err != nil {
			return err
		}
		d2h, err := driver.TimeIt(reps, func() error { return driver.Download(pinned, dev) })
		fmt.Printf("pinned 1 GiB: host→device %.1f GB/s, device→host %.1f GB/s\n", size/(h2d/1e3)/1e9, size/(d2h/1e3)/1e9)
		return err
	}))

	// 5. End-to-end features for a full tile from Go memory, copies
	// included, against the CPU path on every core.
	src := make([][]float32, len(bands))
	for b := range src {
		src[b] = make([]float32, n)
		for i := range src[b] {
			src[b][i] = float32(r.Float64()*0.6 + 0.01)
		}
	}
	dstG := make([][]float32, len(names))
	dstC := make([][]float32, len(names))
	for f := range names {
		dstG[f], dstC[f] = make([]float32, n), make([]float32, n)
	}
	must(t, g.Compute(dstG, src)) // warm-up
	var gt, ct []float64
	for range 3 {
		t0 := time.Now()
		must(t, g.Compute(dstG, src))
		gt = append(gt, time.Since(t0).Seconds())
		t0 = time.Now()
		must(t, features.CPU{Set: set}.Compute(dstC, src))
		ct = append(ct, time.Since(t0).Seconds())
	}
	fmt.Printf("features end to end, full tile from Go memory: GPU with copies %.2f s, CPU (%d cores) %.2f s, speed-up %.1f×\n", medianOf(gt), runtime.NumCPU(), medianOf(ct), medianOf(ct)/medianOf(gt))
	for f := range names {
		if i := sameBits(dstC[f], dstG[f]); i >= 0 {
			t.Errorf("%s: GPU and CPU differ at %d", names[f], i)
		}
	}
	dstG, dstC, src = nil, nil, nil

	// 6. Forest inference: 100 trees of depth 16 (trained on 200,000 rows
	// of 20 features, 11 classes) over a full tile of binned pixels, kernel
	// time with the codes on the device; the CPU walk on every core on 2 %
	// of the tile for scale.
	const nf, k = 20, 11
	xt, yt := gaussianRows(r, 250_000, nf, k)
	p := forest.Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
	bins, _ := forest.QuantileBins(xt[:200_000*nf], nf, p.Bins, 200_000, p.Seed)
	xb, _ := bins.Bin(xt[:200_000*nf], nf)
	t0 := time.Now()
	fo, err := forest.Train(context.Background(), xb, yt[:200_000], k, p, 0)
	must(t, err)
	nodes, depth := fo.Nodes()
	fmt.Printf("forest: trained in %.1f s on %d cores, %d nodes (%d per tree), depth %d\n", time.Since(t0).Seconds(), runtime.NumCPU(), nodes, nodes/p.Trees, depth)
	comp := fo.Compile()
	gf, err := NewForest(d, comp)
	must(t, err)
	defer gf.Close()
	codes := make([]uint8, n*nf)
	for i := range codes {
		codes[i] = uint8(r.IntN(129))
	}
	must(t, d.Do(func() error {
		cb, err := driver.Upload(codes)
		if err != nil {
			return err
		}
		defer cb.Free()
		cls, err := driver.Alloc(n)
		if err != nil {
			return err
		}
		defer cls.Free()
		conf, err := driver.Alloc(n * 4)
		if err != nil {
			return err
		}
		defer conf.Free()
		ms, err := driver.TimeIt(3, func() error {
			return d.Launch("forest_predict", n, cb.Ptr, int32(nf), int64(n), gf.nodes.Ptr, gf.nodeOff.Ptr, int32(1), gf.probs.Ptr, gf.probOff.Ptr,
				int32(p.Trees), int32(k), float32(1/float32(p.Trees)), cls.Ptr, conf.Ptr)
		})
		fmt.Printf("forest predict, full tile (%d px, %d trees): GPU %.0f ms = %.0f M rows/s\n", n, p.Trees, ms, float64(n)/(ms/1e3)/1e6)
		if err != nil {
			return err
		}
		wantCls, wantConf := make([]uint8, n), make([]float32, n)
		if err := driver.Download(wantCls, cls); err != nil {
			return err
		}
		if err := driver.Download(wantConf, conf); err != nil {
			return err
		}
		// forest_walk, the trees' top levels in shared memory: what lulc
		// runs, against forest_predict above, same outputs.
		wms, err := driver.TimeIt(3, func() error { return gf.launch(0, false, n, cb.Ptr, cls.Ptr, conf.Ptr) })
		if err != nil {
			return err
		}
		walkCls, walkConf := make([]uint8, n), make([]float32, n)
		if err := driver.Download(walkCls, cls); err != nil {
			return err
		}
		if err := driver.Download(walkConf, conf); err != nil {
			return err
		}
		sameWalk := true
		for i := range walkCls {
			if walkCls[i] != wantCls[i] || math.Float32bits(walkConf[i]) != math.Float32bits(wantConf[i]) {
				sameWalk = false
				break
			}
		}
		fmt.Printf("forest walk, top levels in shared memory: GPU %.0f ms = %.0f M rows/s (forest_predict %.0f ms: %.2fx); same outputs %v\n",
			wms, float64(n)/(wms/1e3)/1e6, ms, ms/wms, sameWalk)
		if !sameWalk {
			return fmt.Errorf("forest_walk changed the predictions")
		}
		// The same forest interleaved node by node (FIL's other layout):
		// node k of tree t at k × trees + t, short trees padded.
		nodes, nodeOff, _, _ := comp.Packed()
		trees := p.Trees
		lens, most := make([]int, trees), 0
		for t := range trees {
			end := len(nodes) / 8
			if t+1 < trees {
				end = int(nodeOff[t+1])
			}
			lens[t] = end - int(nodeOff[t])
			most = max(most, lens[t])
		}
		il := make([]byte, most*trees*8)
		for t := range trees {
			for k := range lens[t] {
				src := (int(nodeOff[t]) + k) * 8
				copy(il[(k*trees+t)*8:], nodes[src:src+8])
			}
		}
		ilOff := make([]int32, trees)
		for t := range ilOff {
			ilOff[t] = int32(t)
		}
		ib, err := driver.Upload(il)
		if err != nil {
			return err
		}
		defer ib.Free()
		ob, err := driver.Upload(ilOff)
		if err != nil {
			return err
		}
		defer ob.Free()
		ims, err := driver.TimeIt(3, func() error {
			return d.Launch("forest_predict", n, cb.Ptr, int32(nf), int64(n), ib.Ptr, ob.Ptr, int32(trees), gf.probs.Ptr, gf.probOff.Ptr,
				int32(p.Trees), int32(k), float32(1/float32(p.Trees)), cls.Ptr, conf.Ptr)
		})
		if err != nil {
			return err
		}
		gotCls, gotConf := make([]uint8, n), make([]float32, n)
		if err := driver.Download(gotCls, cls); err != nil {
			return err
		}
		if err := driver.Download(gotConf, conf); err != nil {
			return err
		}
		same := true
		for i := range gotCls {
			if gotCls[i] != wantCls[i] || math.Float32bits(gotConf[i]) != math.Float32bits(wantConf[i]) {
				same = false
				break
			}
		}
		fmt.Printf("forest predict, interleaved layout (%.1f MB padded vs %.1f MB): GPU %.0f ms = %.0f M rows/s (tree-major %.0f ms); same outputs %v\n",
			float64(len(il))/1e6, float64(len(nodes))/1e6, ims, float64(n)/(ims/1e3)/1e6, ms, same)
		if !same {
			return fmt.Errorf("the interleaved layout changed the predictions")
		}
		return nil
	}))
	sub := &forest.Binned{N: n / 50, F: nf, Codes: make([]uint8, n/50*nf)}
	for f := range nf {
		copy(sub.Codes[f*sub.N:(f+1)*sub.N], codes[f*n:f*n+sub.N])
	}
	t0 = time.Now()
	comp.Classify(sub)
	cs := time.Since(t0).Seconds()
	fmt.Printf("forest predict on the CPU (%d cores): %.2f M rows/s, a full tile in %.0f s\n", runtime.NumCPU(), float64(sub.N)/cs/1e6, cs*50)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func float32NaN() float32 { return float32(math.NaN()) }

// BenchmarkAOAPairs measures the area of applicability's training points
// among themselves at the default cap (aoa.DefaultMaxPoints points) and a
// full feature set (56), on the GPU and with the CPU's specification on
// every core, side by side.
func BenchmarkAOAPairs(b *testing.B) {
	d := gpu(b)
	defer d.Close()
	const nf = 56
	n := aoa.DefaultMaxPoints
	r := rand.New(rand.NewPCG(3, 4))
	p := make([]float64, n*nf)
	for i := range p {
		p[i] = r.NormFloat64()
	}
	fold := make([]uint64, n)
	for i := range fold {
		fold[i] = uint64(r.IntN(40))
	}
	ctx := context.Background()
	b.Run("gpu", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := AOAPairs(ctx, d, p, nf, fold); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("cpu-%d-cores", runtime.GOMAXPROCS(0)), func(b *testing.B) {
		for b.Loop() {
			aoa.CPUPairs(ctx, p, nf, fold)
		}
	})
}
