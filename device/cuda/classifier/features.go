// Package classifier runs the classifier's stages on a GPU (a cuda.Device,
// with lulc's kernels loaded), each behind the same interface as its CPU
// reference and tested against it bit for bit: the fused features
// (package features' twin), from feature planes or from a window's digital
// numbers with its context features; binning, forest training and
// prediction (package forest's); and the area of applicability's
// dissimilarity index (package aoa's).
package classifier

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/features"
)

// Features computes a feature set on the GPU in one fused pass; it
// implements features.Computer and gives the same bits as features.CPU.
type Features struct {
	Dev *cuda.Device
	Set *features.Set
	// used are the stack planes any feature reads, in stack order: only
	// they go to the device (a stack with temporal planes may hold more
	// than the kernels' 16 and more than a model reads), and the
	// programs address them by their place in it.
	used      []int
	progCodes []int32
	prog      driver.Buffer
	// ctx computes the context features of PredictDNContext
	ctx contextPlan
	// two slots: device buffers, pinned host buffers and a stream each
	dIn, dOut       [2]driver.Buffer
	hostIn, hostOut [2]unsafe.Pointer
	streams         [2]uintptr
	// maxChunk, when set, is the pixels per chunk instead of
	// featureChunk's: tests lower it to run the chunked path on small
	// inputs.
	maxChunk int
}

// program returns the kernel's program on the device, uploading it on
// first use (owner goroutine).
func (f *Features) program() (uint64, error) {
	if f.prog.Ptr == 0 {
		b, err := driver.Upload(f.progCodes)
		if err != nil {
			return 0, err
		}
		f.prog = b
	}
	return f.prog.Ptr, nil
}

// NewFeatures compiles the set into the kernel's program.
func NewFeatures(dev *cuda.Device, set *features.Set) (*Features, error) {
	f := &Features{Dev: dev, Set: set}
	slot := map[int]int32{}
	for i := range set.Features {
		for _, pos := range set.Inputs(i) {
			slot[pos] = 0
		}
	}
	for b := range set.Bands {
		if _, ok := slot[b]; ok {
			slot[b] = int32(len(f.used))
			f.used = append(f.used, b)
		}
	}
	if len(set.Features) > 64 {
		return nil, fmt.Errorf("cuda features: %d features (at most 64)", len(set.Features))
	}
	for i, ft := range set.Features {
		op, ok := cuda.FeatureOp(ft.Op)
		if !ok {
			return nil, fmt.Errorf("cuda: feature %s has no GPU operation %q", ft.Name, ft.Op)
		}
		p := [5]int32{op, 0, 0, 0, 0}
		if ft.Kind != "context" {
			for k, pos := range set.Inputs(i) {
				p[1+k] = slot[pos]
			}
		}
		if ft.Op == "affine" {
			// A layer's one input leaves two words for its map.
			p[2], p[3] = int32(math.Float32bits(ft.Map.Scale)), int32(math.Float32bits(ft.Map.Offset))
		}
		f.progCodes = append(f.progCodes, p[:]...)
	}
	var err error
	f.ctx, err = newContextPlan(set, slot)
	return f, err
}

// kernel is the features kernel for the set: features, which stages each
// pixel's planes in shared memory, for up to 16 planes; features_wide,
// which reads them from device memory, for more.
func (f *Features) kernel() string {
	if len(f.used) > 16 {
		return "features_wide"
	}
	return "features"
}

// usedPlanes picks the planes the features read from the stack's.
func usedPlanes[T any](f *Features, planes [][]T) [][]T {
	out := make([][]T, len(f.used))
	for k, b := range f.used {
		out[k] = planes[b]
	}
	return out
}

// Compute implements features.Computer. Pixels go through in chunks, two
// at a time on two streams: while the GPU copies and computes chunk k on
// one stream, goroutines stage chunk k+1 into pinned host memory and unstage
// chunk k−1's features, so PCIe transfers run at pinned speed and overlap
// the kernel and the host copies.
//
// Context features come in as planes after the bands (features.Computer):
// the kernel leaves their planes, which take them from src afterwards.
func (f *Features) Compute(dst, src [][]float32) error {
	if len(src) != f.Set.Planes() || len(dst) != len(f.Set.Features) {
		return fmt.Errorf("cuda features: %d input planes and %d feature planes for %d bands, %d context features and %d features", len(src), len(dst), len(f.Set.Bands), f.Set.Planes()-len(f.Set.Bands), len(f.Set.Features))
	}
	nb := len(f.Set.Bands)
	if err := f.compute(dst, usedPlanes(f, src[:nb])); err != nil {
		return err
	}
	for k, fi := range f.Set.ContextFeatures() {
		copy(dst[fi], src[nb+k])
	}
	return nil
}

// compute is Compute of the per-pixel features from the planes they read
// (Features.used).
func (f *Features) compute(dst, src [][]float32) error {
	if len(dst) > 64 {
		return fmt.Errorf("cuda features: %d features (at most 64)", len(dst))
	}
	n := len(src[0])
	for _, p := range append(append([][]float32{}, src...), dst...) {
		if len(p) != n {
			return fmt.Errorf("cuda features: planes of %d and %d pixels", n, len(p))
		}
	}
	if n == 0 {
		return nil
	}
	chunk := f.featureChunk()
	if n <= chunk {
		return f.computeOnce(dst, src)
	}
	nb, nf := len(src), len(dst)
	return f.Dev.Do(func() error {
		if err := f.reserve(uint64(chunk)*4*uint64(nb), uint64(chunk)*4*uint64(nf)); err != nil {
			return err
		}
		return streamChunks(f.streams, n, chunk, func(s, lo, hi int) error {
			m := hi - lo
			in := unsafe.Slice((*float32)(f.hostIn[s]), nb*chunk)
			parallelPlanes(nb, func(b int) { copy(in[b*m:(b+1)*m], src[b][lo:hi]) })
			bytes := uint64(m) * 4
			st := f.streams[s]
			if err := driver.CopyToDeviceAsync(f.dIn[s].Ptr, f.hostIn[s], bytes*uint64(nb), st); err != nil {
				return err
			}
			if err := f.Dev.LaunchAsync(st, f.kernel(), int64(m), f.dIn[s].Ptr, int32(nb), int64(m), f.prog.Ptr, int32(nf), f.dOut[s].Ptr); err != nil {
				return err
			}
			return driver.CopyToHostAsync(f.hostOut[s], f.dOut[s].Ptr, bytes*uint64(nf), st)
		}, func(s, lo, hi int) {
			m := hi - lo
			out := unsafe.Slice((*float32)(f.hostOut[s]), nf*chunk)
			parallelPlanes(nf, func(i int) { copy(dst[i][lo:hi], out[i*m:(i+1)*m]) })
		})
	})
}

// computeOnce is Compute for at most one chunk of pixels (a training
// run's samples): planes are copied from Go memory straight into the
// device's pooled buffers and the features straight back, with no pinned
// staging to allocate, which for a single batch costs more than it saves.
func (f *Features) computeOnce(dst, src [][]float32) error {
	n, nb, nf := len(src[0]), len(src), len(dst)
	return f.Dev.Do(func() error {
		prog, err := f.program()
		if err != nil {
			return err
		}
		m := f.Dev.Pool()
		var st driver.Staging
		in := st.Buf(m.Get("features.in", uint64(n*nb)*4))
		out := st.Buf(m.Get("features.out", uint64(n*nf)*4))
		if st.Err != nil {
			return st.Err
		}
		for b, plane := range src {
			if err := driver.PutAt(in.Ptr+uint64(b*n*4), plane); err != nil {
				return err
			}
		}
		if err := f.Dev.Launch(f.kernel(), int64(n), in.Ptr, int32(nb), int64(n), prog, int32(nf), out.Ptr); err != nil {
			return err
		}
		for i, plane := range dst {
			if err := driver.Download(plane, driver.Buffer{Ptr: out.Ptr + uint64(i*n*4), Bytes: uint64(n) * 4}); err != nil {
				return err
			}
		}
		return nil
	})
}

// streamChunks runs n items through two slots in chunks of chunk, on the
// owner goroutine: issue(s, lo, hi) stages items lo…hi into slot s's pinned
// buffer and queues its copies and kernels on streams[s]; collect(s, lo,
// hi) copies the slot's results out once its stream has finished. While
// one slot's chunk is on the GPU the host stages the next chunk into the
// other, so transfers, kernels and host copies overlap.
func streamChunks(streams [2]uintptr, n, chunk int, issue func(s, lo, hi int) error, collect func(s, lo, hi int)) error {
	type slot struct {
		lo, hi int
		busy   bool
	}
	var slots [2]slot
	finish := func(s int) error {
		if !slots[s].busy {
			return nil
		}
		if err := driver.SyncStream(streams[s]); err != nil {
			return err
		}
		collect(s, slots[s].lo, slots[s].hi)
		slots[s].busy = false
		return nil
	}
	for k, lo := 0, 0; lo < n; k, lo = k+1, lo+chunk {
		s := k % 2
		if err := finish(s); err != nil {
			return err
		}
		hi := min(n, lo+chunk)
		if err := issue(s, lo, hi); err != nil {
			return err
		}
		slots[s] = slot{lo, hi, true}
	}
	if err := finish(0); err != nil {
		return err
	}
	return finish(1)
}

// featureChunk is the pixels per chunk: 4 M pixels of 10 bands and 20
// features stage 480 MB of pinned memory per slot. Tests ask for less
// (Features.maxChunk).
func (f *Features) featureChunk() int {
	if f.maxChunk > 0 {
		return f.maxChunk
	}
	return 4 << 20
}

// parallelPlanes runs f over planes on separate goroutines: host staging
// copies are memory-bound and one core cannot saturate memory.
func parallelPlanes(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// reserve makes the per-slot device and pinned buffers at least this large
// and creates the streams (owner goroutine).
func (f *Features) reserve(in, out uint64) error {
	if _, err := f.program(); err != nil {
		return err
	}
	for s := range 2 {
		if f.streams[s] == 0 {
			// CU_STREAM_NON_BLOCKING (1): no implicit sync with stream 0.
			if err := driver.CreateStream(&f.streams[s]); err != nil {
				return err
			}
		}
		if f.dIn[s].Bytes < in {
			f.freeSlot(s)
			var err error
			if f.dIn[s], err = driver.Alloc(in); err != nil {
				return err
			}
			if f.dOut[s], err = driver.Alloc(out); err != nil {
				return err
			}
			if err := driver.AllocHost(&f.hostIn[s], in); err != nil {
				return err
			}
			if err := driver.AllocHost(&f.hostOut[s], out); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *Features) freeSlot(s int) {
	for _, b := range []*driver.Buffer{&f.dIn[s], &f.dOut[s]} {
		if b.Ptr != 0 {
			b.Free()
			*b = driver.Buffer{}
		}
	}
	for _, h := range []*unsafe.Pointer{&f.hostIn[s], &f.hostOut[s]} {
		if *h != nil {
			driver.FreeHost(*h)
			*h = nil
		}
	}
}

// Close frees the device and pinned buffers and the streams.
func (f *Features) Close() {
	f.Dev.Do(func() error {
		for s := range 2 {
			f.freeSlot(s)
			if f.streams[s] != 0 {
				driver.DestroyStream(f.streams[s])
			}
		}
		if f.prog.Ptr != 0 {
			f.prog.Free()
		}
		for _, b := range []driver.Buffer{f.ctx.base, f.ctx.baseDev, f.ctx.pairDev} {
			if b.Ptr != 0 {
				b.Free()
			}
		}
		return nil
	})
}

// Bin codes feature planes with the model's edges on the GPU, as
// forest.Bins.Code does, into a column-major Binned.
func Bin(dev *cuda.Device, b *forest.Bins, planes [][]float32) (*forest.Binned, error) {
	if len(planes) != len(b.Edges) {
		return nil, fmt.Errorf("cuda bin: %d planes for %d features", len(planes), len(b.Edges))
	}
	n := len(planes[0])
	flat := make([]float32, 0, n*len(planes))
	for _, p := range planes {
		flat = append(flat, p...)
	}
	var edges []float32
	var offsets, lengths []int32
	for _, e := range b.Edges {
		offsets = append(offsets, int32(len(edges)))
		lengths = append(lengths, int32(len(e)))
		edges = append(edges, e...)
	}
	edges = append(edges, float32(math.NaN())) // never empty
	out := &forest.Binned{N: n, F: len(planes), Codes: make([]uint8, n*len(planes))}
	err := dev.Do(func() error {
		bufs := make([]driver.Buffer, 0, 5)
		defer func() {
			for _, x := range bufs {
				x.Free()
			}
		}()
		up := func(b driver.Buffer, err error) (uint64, error) {
			bufs = append(bufs, b)
			return b.Ptr, err
		}
		x, err := up(driver.Upload(flat))
		if err != nil {
			return err
		}
		e, err := up(driver.Upload(edges))
		if err != nil {
			return err
		}
		off, err := up(driver.Upload(offsets))
		if err != nil {
			return err
		}
		ln, err := up(driver.Upload(lengths))
		if err != nil {
			return err
		}
		c, err := up(driver.Alloc(uint64(len(out.Codes))))
		if err != nil {
			return err
		}
		if err := dev.Launch("bin", int64(n), x, int32(len(planes)), int64(n), e, off, ln, c); err != nil {
			return err
		}
		return driver.Download(out.Codes, driver.Buffer{Ptr: c, Bytes: uint64(len(out.Codes))})
	})
	return out, err
}

// Forest classifies rows on the GPU with a packed forest: the same classes
// and confidences (bits) as forest.Compiled.Classify. The trees stay on the
// device between calls.
type Forest struct {
	Dev                                     *cuda.Device
	c                                       *forest.Compiled
	nodes, nodeOff, nodeLen, probs, probOff driver.Buffer
	classes, features, trees                int
	// The trees in forest_sweep's words, when they fit them and a block
	// can hold at least sweepMinCap of a tree's nodes beside its rows;
	// sweepCap is the nodes a block holds (forest_walk serves otherwise).
	sweepWords, sweepOff, sweepLen, sweepLeaves driver.Buffer
	sweepCap                                    int
	sweepKernel                                 string
}

// sweepMinCap is the fewest nodes of a tree forest_sweep must hold in
// shared memory to be worth its copies: below it, forest_walk serves.
const sweepMinCap = 2048

// NewForest uploads a compiled forest.
func NewForest(dev *cuda.Device, c *forest.Compiled) (*Forest, error) {
	if c.Classes() > 32 || c.Features() > 64 {
		return nil, fmt.Errorf("cuda forest: %d classes and %d features (at most 32 and 64)", c.Classes(), c.Features())
	}
	f := &Forest{Dev: dev, c: c, classes: c.Classes(), features: c.Features(), trees: c.Trees()}
	nodes, nodeOff, probs, probOff := c.Packed()
	// Each tree's node count, for forest_walk's shared copy of its top.
	nodeLen := make([]int32, len(nodeOff))
	for t := range nodeOff {
		end := int32(len(nodes) / 8)
		if t+1 < len(nodeOff) {
			end = nodeOff[t+1]
		}
		nodeLen[t] = end - nodeOff[t]
	}
	err := dev.Do(func() error {
		var err error
		if f.nodes, err = driver.Upload(nodes); err != nil {
			return err
		}
		if f.nodeOff, err = driver.Upload(nodeOff); err != nil {
			return err
		}
		if f.nodeLen, err = driver.Upload(nodeLen); err != nil {
			return err
		}
		if f.probs, err = driver.Upload(probs); err != nil {
			return err
		}
		if f.probOff, err = driver.Upload(probOff); err != nil {
			return err
		}
		return f.uploadSweep(nodes, nodeOff, probs, probOff)
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// uploadSweep packs the trees (forest.Compiled.Packed's arrays) for
// forest_sweep and sizes its share of shared memory: the rows' codes,
// then as much of a tree as fits, at most the longest tree, aiming at two
// blocks a multiprocessor so that one block's copy of its next tree
// overlaps the other's walk; one block with a larger share when two
// would hold fewer than sweepMinCap nodes each (owner goroutine).
func (f *Forest) uploadSweep(nodes []byte, nodeOff []int32, probs []float32, probOff []int32) error {
	if f.Dev.Options().TopsOnly {
		return nil
	}
	s, ok := sweepNodes(nodes, nodeOff, probs, probOff, f.classes)
	if !ok {
		return nil
	}
	perBlock, perSM, err := f.Dev.SharedMemory()
	if err != nil {
		return err
	}
	rows := f.features * sweepStride
	longest := (s.longest + 3) &^ 3
	// The driver keeps 1 KiB of a multiprocessor's shared memory per block.
	capFor := func(blocks int) int {
		share := min(perBlock, perSM/blocks-1024)
		return min(longest, max(0, share-rows)/4&^3)
	}
	f.sweepCap = capFor(2)
	if f.sweepCap < min(longest, sweepMinCap) {
		f.sweepCap = capFor(1)
	}
	if f.sweepCap < min(longest, sweepMinCap) {
		f.sweepCap = 0
		return nil
	}
	// The kernel whose class sums fit the forest's classes most closely.
	for _, k := range []int{8, 12, 16, 32} {
		if f.classes <= k {
			f.sweepKernel = fmt.Sprintf("forest_sweep%d", k)
			break
		}
	}
	if err := f.Dev.AllowShared(f.sweepKernel, f.sweepShared()); err != nil {
		return err
	}
	if f.sweepWords, err = driver.Upload(s.words); err != nil {
		return err
	}
	if f.sweepOff, err = driver.Upload(s.off); err != nil {
		return err
	}
	if f.sweepLen, err = driver.Upload(s.lens); err != nil {
		return err
	}
	// A forest of pairs only has no records; the kernel still takes an
	// address.
	f.sweepLeaves, err = driver.Upload(append(s.leafWords, 0))
	return err
}

// sweepShared is forest_sweep's dynamic shared memory in bytes.
func (f *Forest) sweepShared() int { return f.sweepCap*4 + f.features*sweepStride }

// launch queues the forest's walk of n rows' codes (column-major, at
// device address codes) into their classes and confidences, on stream st
// (async) or synchronously: forest_sweep, every tree over a block's rows
// from shared memory, or forest_walk, its trees' top levels in shared
// memory, for forests the sweep does not take.
func (f *Forest) launch(st uintptr, async bool, n int, codes, cls, conf uint64) error {
	if f.sweepCap > 0 {
		args := []any{codes, int32(f.features), int64(n), f.sweepWords.Ptr, f.sweepOff.Ptr, f.sweepLen.Ptr, int32(f.sweepCap),
			f.sweepLeaves.Ptr, int32(f.trees), int32(f.classes), float32(1 / float32(f.trees)), cls, conf}
		grid := uint32((n + sweepRows - 1) / sweepRows)
		if err := f.Dev.LaunchGrid(st, f.sweepKernel, [3]uint32{grid, 1, 1}, sweepBlock, uint32(f.sweepShared()), args...); err != nil || async {
			return err
		}
		return driver.Synchronize()
	}
	args := []any{codes, int32(f.features), int64(n), f.nodes.Ptr, f.nodeOff.Ptr, f.nodeLen.Ptr,
		f.probs.Ptr, f.probOff.Ptr, int32(f.trees), int32(f.classes), float32(1 / float32(f.trees)), cls, conf}
	if async {
		return f.Dev.LaunchAsync(st, "forest_walk", int64(n), args...)
	}
	return f.Dev.Launch("forest_walk", int64(n), args...)
}

// Classify predicts class indices and confidences for binned rows.
func (f *Forest) Classify(x *forest.Binned) ([]uint8, []float32, error) {
	if x.F != f.features {
		return nil, nil, fmt.Errorf("cuda forest: %d features, the forest has %d", x.F, f.features)
	}
	cls := make([]uint8, x.N)
	conf := make([]float32, x.N)
	err := f.Dev.Do(func() error {
		codes, err := driver.Upload(x.Codes)
		if err != nil {
			return err
		}
		defer codes.Free()
		c, err := driver.Alloc(uint64(x.N))
		if err != nil {
			return err
		}
		defer c.Free()
		p, err := driver.Alloc(uint64(x.N) * 4)
		if err != nil {
			return err
		}
		defer p.Free()
		if err := f.launch(0, false, x.N, codes.Ptr, c.Ptr, p.Ptr); err != nil {
			return err
		}
		if err := driver.Download(cls, c); err != nil {
			return err
		}
		return driver.Download(conf, p)
	})
	return cls, conf, err
}

// Close frees the forest on the device.
func (f *Forest) Close() {
	f.Dev.Do(func() error {
		for _, b := range []driver.Buffer{f.nodes, f.nodeOff, f.nodeLen, f.probs, f.probOff, f.sweepWords, f.sweepOff, f.sweepLen, f.sweepLeaves} {
			if b.Ptr != 0 {
				b.Free()
			}
		}
		return nil
	})
}
