package classifier

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/forest"
)

// blobs makes n rows of nf features from k classes with Gaussian centres,
// a share of NaNs and of flipped labels, binned with nbins quantile bins.
func blobs(n, nf, k, nbins int, seed uint64) (*forest.Binned, *forest.Bins, []uint8) {
	r := rand.New(rand.NewPCG(seed, 11))
	centres := make([]float64, k*nf)
	for i := range centres {
		centres[i] = r.NormFloat64() * 1.2
	}
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		c := r.IntN(k)
		for f := range nf {
			v := float32(centres[c*nf+f] + r.NormFloat64())
			if r.IntN(50) == 0 {
				v = float32(math.NaN())
			}
			x[i*nf+f] = v
		}
		if r.IntN(10) == 0 {
			c = r.IntN(k)
		}
		y[i] = uint8(c)
	}
	b, err := forest.QuantileBins(x, nf, nbins, 200000, seed)
	if err != nil {
		panic(err)
	}
	xb, err := b.Bin(x, nf)
	if err != nil {
		panic(err)
	}
	return xb, b, y
}

func modelBytes(t *testing.T, f *forest.Forest, b *forest.Bins, p forest.Params, n int) []byte {
	t.Helper()
	m := &forest.Model{Params: p, Samples: n, Bins: b, Forest: f, Scale: 1}
	for k := range f.Features {
		m.Features = append(m.Features, fmt.Sprintf("f%d", k))
		m.Bands = append(m.Bands, fmt.Sprintf("b%d", k))
	}
	for c := range f.Classes {
		m.Classes = append(m.Classes, forest.Class{Code: uint8(c + 1), Name: fmt.Sprintf("c%d", c), Color: "#000000"})
	}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestTrainSameModel checks that the GPU grows the CPU's forest: the same
// model file, byte for byte, over datasets of several sizes, feature and
// class counts, depths, bin counts, leaf sizes, with and without
// bootstrap, and in several batches.
func TestTrainSameModel(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	cases := []struct {
		n, nf, k, bins int
		p              forest.Params
		batch          int
	}{
		{500, 4, 2, 16, forest.Params{Trees: 5, MaxDepth: 4, MinSamplesLeaf: 1, Bins: 16, Bootstrap: true, Seed: 1}, 0},
		{5000, 8, 5, 64, forest.Params{Trees: 12, MaxDepth: 12, MinSamplesLeaf: 3, Bins: 64, Bootstrap: true, Seed: 2}, 5},
		{30000, 16, 11, 128, forest.Params{Trees: 10, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 3}, 0},
		{120000, 12, 7, 255, forest.Params{Trees: 6, MaxDepth: 30, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 4}, 4},
		{40000, 6, 3, 32, forest.Params{Trees: 4, MaxDepth: 20, MinSamplesLeaf: 5, MaxFeatures: 6, Bins: 32, Bootstrap: false, Seed: 5}, 0},
		{20000, 32, 32, 128, forest.Params{Trees: 8, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 6}, 3},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n%d_f%d_k%d_d%d", c.n, c.nf, c.k, c.p.MaxDepth), func(t *testing.T) {
			xb, b, y := blobs(c.n, c.nf, c.k, c.bins, c.p.Seed)
			cpu, err := forest.Train(context.Background(), xb, y, c.k, c.p, 0)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := driver.DeviceMemory()
			g, err := train(context.Background(), []*cuda.Device{d}, trainSet{x: xb, y: y, classes: c.k, maxBatch: c.batch}, c.p, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := driver.DeviceMemory(); after != before {
				t.Errorf("device memory held: %d bytes before training, %d after", before, after)
			}
			for i := range cpu.Trees {
				ct, gt := cpu.Trees[i], g.Trees[i]
				if len(ct.Feature) != len(gt.Feature) {
					t.Errorf("tree %d: CPU %d nodes, GPU %d", i, len(ct.Feature), len(gt.Feature))
					continue
				}
				for j := range ct.Feature {
					if ct.Feature[j] != gt.Feature[j] || ct.Bin[j] != gt.Bin[j] || ct.Left[j] != gt.Left[j] || ct.Leaf[j] != gt.Leaf[j] {
						t.Errorf("tree %d node %d: CPU f%d<=%d, GPU f%d<=%d", i, j, ct.Feature[j], ct.Bin[j], gt.Feature[j], gt.Bin[j])
						break
					}
				}
			}
			nodes, _ := cpu.Nodes()
			if !bytes.Equal(modelBytes(t, cpu, b, c.p, c.n), modelBytes(t, g, b, c.p, c.n)) {
				t.Fatalf("GPU model file differs from the CPU's (%d nodes)", nodes)
			}
			t.Logf("%d nodes: same model bytes", nodes)
		})
	}
}

// every opens every GPU the driver sees. With one, the list holds it
// twice: two engines on one device share the trees out just as two
// devices do, so the multi-device path is tested on any GPU host.
func every(t *testing.T) []*cuda.Device {
	t.Helper()
	first := gpu(t)
	devs := []*cuda.Device{first}
	infos, err := driver.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(infos); i++ {
		d, err := cuda.Open(i, devs[0].Options())
		if err != nil {
			t.Fatalf("GPU %d: %v", i, err)
		}
		devs = append(devs, d)
	}
	if len(devs) == 1 {
		devs = append(devs, first)
	}
	t.Cleanup(func() {
		for _, d := range devs[:len(infos)] {
			d.Close()
		}
	})
	return devs
}

// TestTrainSeveralDevices checks that trees shared out over several
// devices make the CPU's model byte for byte: with more trees than
// devices, fewer, and in batches on each device.
func TestTrainSeveralDevices(t *testing.T) {
	devs := every(t)
	t.Logf("%d devices (%d distinct)", len(devs), len(slices.Compact(slices.Clone(devs))))
	cases := []struct {
		n, nf, k int
		p        forest.Params
		batch    int
	}{
		{30000, 16, 11, forest.Params{Trees: 9, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 3}, 0},
		{20000, 8, 5, forest.Params{Trees: 7, MaxDepth: 12, MinSamplesLeaf: 2, Bins: 64, Bootstrap: true, Seed: 7}, 2},
		{5000, 6, 3, forest.Params{Trees: 1, MaxDepth: 8, MinSamplesLeaf: 1, Bins: 32, Bootstrap: true, Seed: 8}, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("trees%d_batch%d", c.p.Trees, c.batch), func(t *testing.T) {
			xb, b, y := blobs(c.n, c.nf, c.k, c.p.Bins, c.p.Seed)
			cpu, err := forest.Train(context.Background(), xb, y, c.k, c.p, 0)
			if err != nil {
				t.Fatal(err)
			}
			g, err := train(context.Background(), devs, trainSet{x: xb, y: y, classes: c.k, maxBatch: c.batch}, c.p, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(modelBytes(t, cpu, b, c.p, c.n), modelBytes(t, g, b, c.p, c.n)) {
				t.Fatalf("model from %d devices differs from the CPU's", len(devs))
			}
		})
	}
	if _, err := Train(context.Background(), nil, &forest.Binned{N: 1, F: 1, Codes: []uint8{0}}, []uint8{0}, 1, forest.Params{Trees: 1, MaxDepth: 1, MinSamplesLeaf: 1, Bins: 2}, nil); err == nil {
		t.Error("training on no device: no error")
	}
}

// TestGPUTrainSpeed times GPU training against the CPU forest on all
// cores over synthetic blobs (LULC_TRAIN_BENCH=1; sizes in
// LULC_TRAIN_SIZES, default 1000000; the CPU runs only up to
// LULC_TRAIN_CPU_MAX rows, default 1000000). With LULC_TRAIN_DEVICES=all
// it also times every GPU together against the first alone.
func TestGPUTrainSpeed(t *testing.T) {
	if os.Getenv("LULC_TRAIN_BENCH") != "1" {
		t.Skip("set LULC_TRAIN_BENCH=1 to measure")
	}
	d := gpu(t)
	defer d.Close()
	sizes := []int{1_000_000}
	if s := os.Getenv("LULC_TRAIN_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	cpuMax := 1_000_000
	if s := os.Getenv("LULC_TRAIN_CPU_MAX"); s != "" {
		cpuMax, _ = strconv.Atoi(s)
	}
	p := forest.Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
	for _, n := range sizes {
		xb, _, y := blobs(n, 16, 11, 128, 9)
		t0 := time.Now()
		g, err := Train(context.Background(), []*cuda.Device{d}, xb, y, 11, p, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		gs := time.Since(t0).Seconds()
		nodes, _ := g.Nodes()
		fmt.Printf("train %d×16: gpu %.2f s (%d nodes)", n, gs, nodes)
		if n <= cpuMax {
			t0 = time.Now()
			c, err := forest.Train(context.Background(), xb, y, 11, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			cs := time.Since(t0).Seconds()
			fmt.Printf(", cpu %d cores %.2f s (%.1f×), same trees %v", runtime.NumCPU(), cs, cs/gs, reflect.DeepEqual(c, g))
		}
		fmt.Println()
	}
}

// TestGPUTrainLarge trains 100 trees of depth 16 on LULC_TRAIN_LARGE rows
// × 32 features (codes drawn directly, class-dependent, in parallel) and
// reports time and peak device memory: the memory test for 100 M × 32.
func TestGPUTrainLarge(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("LULC_TRAIN_LARGE"))
	if rows <= 0 {
		t.Skip("set LULC_TRAIN_LARGE=rows to run")
	}
	d := gpu(t)
	defer d.Close()
	const nf, k = 32, 11
	x := &forest.Binned{N: rows, F: nf, Codes: make([]uint8, rows*nf)}
	y := make([]uint8, rows)
	parts := runtime.NumCPU()
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 3))
			lo, hi := rows*p/parts, rows*(p+1)/parts
			for i := lo; i < hi; i++ {
				c := r.IntN(k)
				y[i] = uint8(c)
				for f := range nf {
					v := 1 + (c*37+f*11)%100 + r.IntN(40)
					x.Codes[f*rows+i] = uint8(v)
				}
			}
		})
	}
	wg.Wait()
	p := forest.Params{Trees: 100, MaxDepth: 16, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 1}
	driver.ResetPeakMemory()
	t0 := time.Now()
	f, err := Train(context.Background(), []*cuda.Device{d}, x, y, k, p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	_, peak := driver.DeviceMemory()
	nodes, depth := f.Nodes()
	fmt.Printf("train %d×%d: gpu %.2f s, %d nodes, depth %d, peak device memory %.1f GB\n", rows, nf, time.Since(t0).Seconds(), nodes, depth, float64(peak)/1e9)
}
