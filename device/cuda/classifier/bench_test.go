package classifier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
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
}

// TestGPUForestReport measures the forest's walk over a full tile of
// binned pixels (120.6 M rows), kernel time with the codes on the device,
// median of three after a warm-up: forest_predict (a row a thread, every
// node from L2), forest_walk (the trees' tops in shared memory) and
// forest_sweep (each tree whole in shared memory over a block's rows) at
// the share of shared memory lulc picks and at the other one, each
// checked against forest_predict bit for bit; then the CPU walk on every
// core on 2 % of the tile for scale. The forest is 100 trees of depth 16
// trained on 200,000 Gaussian rows of 20 features and 11 classes, over
// random codes; or, with LULC_WALK_MODEL (a model.lulcrf) and
// LULC_WALK_SAMPLES (its samples.lulcs), that model over its validation
// samples' codes repeated to a tile. Run with LULC_GPU_BENCH=1
// (LULC_WALK_ROWS: fewer rows than a tile's).
func TestGPUForestReport(t *testing.T) {
	if os.Getenv("LULC_GPU_BENCH") != "1" {
		t.Skip("set LULC_GPU_BENCH=1 to measure")
	}
	d := gpu(t)
	defer d.Close()
	n := 10980 * 10980
	if v, err := strconv.Atoi(os.Getenv("LULC_WALK_ROWS")); err == nil && v > 0 {
		n = v // fewer rows, for a profiler's replays
	}
	r := rand.New(rand.NewPCG(7, 8))
	var comp *forest.Compiled
	var codes []uint8
	var nf int
	if mp := os.Getenv("LULC_WALK_MODEL"); mp != "" {
		comp, codes, nf = realWalk(t, mp, os.Getenv("LULC_WALK_SAMPLES"), n, r)
	} else {
		const k = 11
		nf = 20
		xt, yt := gaussianRows(r, 250_000, nf, k)
		p := forest.Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
		bins, _ := forest.QuantileBins(xt[:200_000*nf], nf, p.Bins, 200_000, p.Seed)
		xb, _ := bins.Bin(xt[:200_000*nf], nf)
		fo, err := forest.Train(context.Background(), xb, yt[:200_000], k, p, 0)
		must(t, err)
		comp = fo.Compile()
		codes = make([]uint8, n*nf)
		for i := range codes {
			codes[i] = uint8(r.IntN(129))
		}
	}
	nodes, nodeOff, probs, probOff := comp.Packed()
	s, _ := sweepNodes(nodes, nodeOff, probs, probOff, comp.Classes())
	fmt.Printf("forest: %d trees, %d classes, %d features, %d nodes (longest tree %d), %d of %d leaves as pairs, %d leaf words\n",
		comp.Trees(), comp.Classes(), comp.Features(), len(s.words), s.longest, s.pairs, s.leaves, len(s.leafWords))
	gf, err := NewForest(d, comp)
	must(t, err)
	defer gf.Close()
	perBlock, perSM, err := gf.Dev.SharedMemory()
	must(t, err)
	fmt.Printf("shared memory: %d B a block, %d B a multiprocessor; forest_sweep holds %d nodes a tree (%s)\n", perBlock, perSM, gf.sweepCap, gf.sweepKernel)
	must(t, d.Do(func() error {
		cb, err := driver.Upload(codes)
		if err != nil {
			return err
		}
		defer cb.Free()
		cls, err := driver.Alloc(uint64(n))
		if err != nil {
			return err
		}
		defer cls.Free()
		conf, err := driver.Alloc(uint64(n) * 4)
		if err != nil {
			return err
		}
		defer conf.Free()
		outs := func() ([]uint8, []float32, error) {
			c, p := make([]uint8, n), make([]float32, n)
			if err := driver.Download(c, cls); err != nil {
				return nil, nil, err
			}
			return c, p, driver.Download(p, conf)
		}
		ms, err := driver.TimeIt(3, func() error {
			return d.Launch("forest_predict", int64(n), cb.Ptr, int32(nf), int64(n), gf.nodes.Ptr, gf.nodeOff.Ptr, int32(1), gf.probs.Ptr, gf.probOff.Ptr,
				int32(gf.trees), int32(gf.classes), float32(1/float32(gf.trees)), cls.Ptr, conf.Ptr)
		})
		if err != nil {
			return err
		}
		wantCls, wantConf, err := outs()
		if err != nil {
			return err
		}
		fmt.Printf("forest_predict: %.0f ms = %.0f M rows/s\n", ms, float64(n)/(ms/1e3)/1e6)
		chosen := gf.sweepCap
		var walkMs float64
		variants := []struct {
			name string
			cap  int
		}{{"forest_walk", 0}, {"forest_sweep (lulc's share)", chosen}}
		// The other share: one block a multiprocessor when lulc picked two,
		// else a share for two.
		rows := gf.features * sweepStride
		other := min((s.longest+3)&^3, (min(perBlock, perSM-1024)-rows)/4&^3)
		if other == chosen {
			other = min(chosen, max(0, perSM/2-1024-rows)/4&^3)
		}
		if other > 0 && other != chosen {
			variants = append(variants, struct {
				name string
				cap  int
			}{fmt.Sprintf("forest_sweep (%d nodes)", other), other})
		}
		for _, v := range variants {
			gf.sweepCap = v.cap
			if v.cap > 0 {
				if err := gf.Dev.AllowShared(gf.sweepKernel, gf.sweepShared()); err != nil {
					return err
				}
			}
			vms, err := driver.TimeIt(3, func() error { return gf.launch(0, false, n, cb.Ptr, cls.Ptr, conf.Ptr) })
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			if v.cap == 0 {
				walkMs = vms
			}
			gotCls, gotConf, err := outs()
			if err != nil {
				return err
			}
			same := true
			for i := range gotCls {
				if gotCls[i] != wantCls[i] || math.Float32bits(gotConf[i]) != math.Float32bits(wantConf[i]) {
					same = false
					break
				}
			}
			fmt.Printf("%s: %.0f ms = %.0f M rows/s, %.2f× forest_walk, %.2f× forest_predict; same outputs %v\n",
				v.name, vms, float64(n)/(vms/1e3)/1e6, walkMs/vms, ms/vms, same)
			if !same {
				return fmt.Errorf("%s changed the predictions", v.name)
			}
		}
		gf.sweepCap = chosen
		return gf.Dev.AllowShared(gf.sweepKernel, gf.sweepShared())
	}))
	sub := &forest.Binned{N: n / 50, F: nf, Codes: make([]uint8, n/50*nf)}
	for f := range nf {
		copy(sub.Codes[f*sub.N:(f+1)*sub.N], codes[f*n:f*n+sub.N])
	}
	t0 := time.Now()
	comp.Classify(sub)
	cs := time.Since(t0).Seconds()
	fmt.Printf("forest predict on the CPU (%d cores): %.2f M rows/s, a full tile in %.0f s\n", runtime.NumCPU(), float64(sub.N)/cs/1e6, cs*50)
}

// realWalk loads a model and its samples and repeats the validation
// samples' codes, shuffled, to n rows.
func realWalk(t *testing.T, modelPath, samplesPath string, n int, r *rand.Rand) (*forest.Compiled, []uint8, int) {
	mb, err := os.ReadFile(modelPath)
	must(t, err)
	m, err := forest.Decode(mb)
	must(t, err)
	sb, err := os.ReadFile(samplesPath)
	must(t, err)
	set, err := sampleset.Decode(sb)
	must(t, err)
	x, _ := set.Subset(1)
	nf := len(set.Features)
	xb, err := m.Bins.Bin(x, nf)
	must(t, err)
	perm := r.Perm(xb.N)
	codes := make([]uint8, n*nf)
	for f := range nf {
		col, src := codes[f*n:(f+1)*n], xb.Codes[f*xb.N:(f+1)*xb.N]
		for i := range col {
			col[i] = src[perm[i%xb.N]]
		}
	}
	return m.Forest.Compile(), codes, nf
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

// BenchmarkAOADI measures one window's area-of-applicability pass as a
// full tile's job makes it: 10,000 pixels (a 1024² window's cells) of 56
// features against aoa.DefaultMaxPoints training points, with the points
// split across blocks (lulc's way) and unsplit (LULC_AOA_SPLIT=off).
func BenchmarkAOADI(b *testing.B) {
	const nf, n = 56, 10_000
	r := rand.New(rand.NewPCG(5, 6))
	np := aoa.DefaultMaxPoints
	ref := &aoa.Reference{N: np, Points: make([]float64, np*nf), MeanDistance: 9.5,
		Mean: make([]float64, nf), SD: make([]float64, nf), Weight: make([]float64, nf), Scale: make([]float64, nf)}
	for f := range nf {
		ref.Mean[f], ref.SD[f], ref.Weight[f], ref.Scale[f] = 0.5, 0.2, 1, 5
	}
	for i := range ref.Points {
		ref.Points[i] = r.NormFloat64()
	}
	feats := make([][]float32, nf)
	for f := range feats {
		feats[f] = make([]float32, n)
		for i := range feats[f] {
			feats[f][i] = float32(0.5 + 0.2*r.NormFloat64())
		}
	}
	for _, unsplit := range []bool{false, true} {
		name := "split"
		if unsplit {
			name = "unsplit"
		}
		b.Run(name, func(b *testing.B) {
			d := gpuWith(b, cuda.Options{AOAUnsplit: unsplit})
			defer d.Close()
			g, err := NewAOA(d, ref)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			di := make([]float32, n)
			for b.Loop() {
				if err := g.DI(feats, di); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
