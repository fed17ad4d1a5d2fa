package cuda

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

var opCodes = map[string]int32{"band": 0, "nd": 1, "evi": 2, "savi": 3, "bsi": 4, "context": 5, "shift": 6}

// Features computes a feature set on the GPU in one fused pass; it
// implements features.Computer and gives the same bits as features.CPU.
type Features struct {
	Dev *Device
	Set *features.Set
	// used are the stack planes any feature reads, in stack order: only
	// they go to the device (a stack with temporal planes may hold more
	// than the kernels' 16 and more than a model reads), and the
	// programs address them by their place in it.
	used      []int
	progCodes []int32
	prog      Buffer
	// ctx computes the context features of PredictDNContext
	ctx contextPlan
	// two slots: device buffers, pinned host buffers and a stream each
	dIn, dOut       [2]Buffer
	hostIn, hostOut [2]unsafe.Pointer
	streams         [2]uintptr
}

// program returns the kernel's program on the device, uploading it on
// first use (owner goroutine).
func (f *Features) program() (uint64, error) {
	if f.prog.ptr == 0 {
		b, err := upload(f.progCodes)
		if err != nil {
			return 0, err
		}
		f.prog = b
	}
	return f.prog.ptr, nil
}

// NewFeatures compiles the set into the kernel's program.
func NewFeatures(dev *Device, set *features.Set) (*Features, error) {
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
		op, ok := opCodes[ft.Op]
		if !ok {
			return nil, fmt.Errorf("cuda: feature %s has no GPU operation %q", ft.Name, ft.Op)
		}
		p := [5]int32{op, 0, 0, 0, 0}
		if ft.Kind != "context" {
			for k, pos := range set.Inputs(i) {
				p[1+k] = slot[pos]
			}
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
	chunk := f.Dev.featureChunk()
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
			if err := check(api.memcpyHtoDAsync(f.dIn[s].ptr, f.hostIn[s], bytes*uint64(nb), st), "cuMemcpyHtoDAsync"); err != nil {
				return err
			}
			if err := f.Dev.launchAsync(st, f.kernel(), int64(m), f.dIn[s].ptr, int32(nb), int64(m), f.prog.ptr, int32(nf), f.dOut[s].ptr); err != nil {
				return err
			}
			return check(api.memcpyDtoHAsync(f.hostOut[s], f.dOut[s].ptr, bytes*uint64(nf), st), "cuMemcpyDtoHAsync")
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
		m := f.Dev.mem
		var st staging
		in := st.buf(m.get("features.in", uint64(n*nb)*4))
		out := st.buf(m.get("features.out", uint64(n*nf)*4))
		if st.err != nil {
			return st.err
		}
		for b, plane := range src {
			if err := putAt(in.ptr+uint64(b*n*4), plane); err != nil {
				return err
			}
		}
		if err := f.Dev.launch(f.kernel(), int64(n), in.ptr, int32(nb), int64(n), prog, int32(nf), out.ptr); err != nil {
			return err
		}
		for i, plane := range dst {
			if err := download(plane, Buffer{ptr: out.ptr + uint64(i*n*4), bytes: uint64(n) * 4}); err != nil {
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
		if err := check(api.streamSync(streams[s]), "cuStreamSynchronize"); err != nil {
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
// (Options.featureChunk).
func (d *Device) featureChunk() int {
	if d.opt.featureChunk > 0 {
		return d.opt.featureChunk
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
			if err := check(api.streamCreate(&f.streams[s], 1), "cuStreamCreate"); err != nil {
				return err
			}
		}
		if f.dIn[s].bytes < in {
			f.freeSlot(s)
			var err error
			if f.dIn[s], err = alloc(in); err != nil {
				return err
			}
			if f.dOut[s], err = alloc(out); err != nil {
				return err
			}
			if err := check(api.memAllocHost(&f.hostIn[s], in), "cuMemAllocHost"); err != nil {
				return err
			}
			if err := check(api.memAllocHost(&f.hostOut[s], out), "cuMemAllocHost"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *Features) freeSlot(s int) {
	for _, b := range []*Buffer{&f.dIn[s], &f.dOut[s]} {
		if b.ptr != 0 {
			b.free()
			*b = Buffer{}
		}
	}
	for _, h := range []*unsafe.Pointer{&f.hostIn[s], &f.hostOut[s]} {
		if *h != nil {
			api.memFreeHost(*h)
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
				api.streamDestroy(f.streams[s])
			}
		}
		if f.prog.ptr != 0 {
			f.prog.free()
		}
		for _, b := range []Buffer{f.ctx.base, f.ctx.baseDev, f.ctx.pairDev} {
			if b.ptr != 0 {
				b.free()
			}
		}
		return nil
	})
}

// Median computes composite.Median and the valid counts on the GPU, with
// the same bits.
func Median(dev *Device, dst []float32, count []uint8, dates [][]float32) error {
	n := len(dst)
	if len(dates) > 64 {
		return fmt.Errorf("cuda median: %d dates (at most 64)", len(dates))
	}
	flat := make([]float32, 0, n*len(dates))
	for d, v := range dates {
		if len(v) != n {
			return fmt.Errorf("cuda median: date %d has %d pixels, want %d", d, len(v), n)
		}
		flat = append(flat, v...)
	}
	return dev.Do(func() error {
		var st staging
		in := st.ptr(put(dev.mem, "median.in", flat))
		o := st.buf(dev.mem.get("median.out", uint64(n)*4))
		c := st.buf(dev.mem.get("median.count", uint64(n)))
		if st.err != nil {
			return st.err
		}
		if err := dev.launch("median", int64(n), in, int32(len(dates)), int64(n), o.ptr, c.ptr); err != nil {
			return err
		}
		if err := download(dst, o); err != nil {
			return err
		}
		if count != nil {
			return download(count, c)
		}
		return nil
	})
}

// Bin codes feature planes with the model's edges on the GPU, as
// forest.Bins.Code does, into a column-major Binned.
func Bin(dev *Device, b *forest.Bins, planes [][]float32) (*forest.Binned, error) {
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
		bufs := make([]Buffer, 0, 5)
		defer func() {
			for _, x := range bufs {
				x.free()
			}
		}()
		up := func(b Buffer, err error) (uint64, error) {
			bufs = append(bufs, b)
			return b.ptr, err
		}
		x, err := up(upload(flat))
		if err != nil {
			return err
		}
		e, err := up(upload(edges))
		if err != nil {
			return err
		}
		off, err := up(upload(offsets))
		if err != nil {
			return err
		}
		ln, err := up(upload(lengths))
		if err != nil {
			return err
		}
		c, err := up(alloc(uint64(len(out.Codes))))
		if err != nil {
			return err
		}
		if err := dev.launch("bin", int64(n), x, int32(len(planes)), int64(n), e, off, ln, c); err != nil {
			return err
		}
		return download(out.Codes, Buffer{ptr: c, bytes: uint64(len(out.Codes))})
	})
	return out, err
}

// Forest classifies rows on the GPU with a packed forest: the same classes
// and confidences (bits) as forest.Compiled.Classify. The trees stay on the
// device between calls.
type Forest struct {
	Dev                            *Device
	c                              *forest.Compiled
	nodes, nodeOff, probs, probOff Buffer
	classes, features, trees       int
}

// NewForest uploads a compiled forest.
func NewForest(dev *Device, c *forest.Compiled) (*Forest, error) {
	if c.Classes() > 32 || c.Features() > 64 {
		return nil, fmt.Errorf("cuda forest: %d classes and %d features (at most 32 and 64)", c.Classes(), c.Features())
	}
	f := &Forest{Dev: dev, c: c, classes: c.Classes(), features: c.Features(), trees: c.Trees()}
	nodes, nodeOff, probs, probOff := c.Packed()
	err := dev.Do(func() error {
		var err error
		if f.nodes, err = upload(nodes); err != nil {
			return err
		}
		if f.nodeOff, err = upload(nodeOff); err != nil {
			return err
		}
		if f.probs, err = upload(probs); err != nil {
			return err
		}
		f.probOff, err = upload(probOff)
		return err
	})
	return f, err
}

// Classify predicts class indices and confidences for binned rows.
func (f *Forest) Classify(x *forest.Binned) ([]uint8, []float32, error) {
	if x.F != f.features {
		return nil, nil, fmt.Errorf("cuda forest: %d features, the forest has %d", x.F, f.features)
	}
	cls := make([]uint8, x.N)
	conf := make([]float32, x.N)
	err := f.Dev.Do(func() error {
		codes, err := upload(x.Codes)
		if err != nil {
			return err
		}
		defer codes.free()
		c, err := alloc(uint64(x.N))
		if err != nil {
			return err
		}
		defer c.free()
		p, err := alloc(uint64(x.N) * 4)
		if err != nil {
			return err
		}
		defer p.free()
		if err := f.Dev.launch("forest_predict", int64(x.N), codes.ptr, int32(x.F), int64(x.N), f.nodes.ptr, f.nodeOff.ptr, int32(1),
			f.probs.ptr, f.probOff.ptr, int32(f.trees), int32(f.classes), float32(1/float32(f.trees)), c.ptr, p.ptr); err != nil {
			return err
		}
		if err := download(cls, c); err != nil {
			return err
		}
		return download(conf, p)
	})
	return cls, conf, err
}

// Close frees the forest on the device.
func (f *Forest) Close() {
	f.Dev.Do(func() error {
		for _, b := range []Buffer{f.nodes, f.nodeOff, f.probs, f.probOff} {
			if b.ptr != 0 {
				b.free()
			}
		}
		return nil
	})
}

// coarseBand is a band that goes up at its source resolution: its plane
// starts at element at of the planes buffer (of the part decoded on the
// device when decoded is set) and is resampled into element slot of the
// DN buffer.
type coarseBand struct {
	c        *resample.Coarse
	at, slot int
	decoded  bool
}

// fullBand is a band at the window's resolution, for element slot of the
// DN buffer.
type fullBand struct {
	dn   []uint16
	slot int
}

// rawBand is a band that goes up compressed (composite.Date.Raw), to be
// decoded into element at of the planes buffer (a coarse band's plane,
// whose tiles the next windows share) or into element slot of the DN
// buffer.
type rawBand struct {
	r        *decode.Rect
	coarse   bool
	at, slot int
}

// compositeInputs sorts a window's bands by how they go up: host planes at
// the window's resolution, coarse planes (host ones first in the planes
// buffer, then those decoded on the device) and compressed rectangles.
type compositeInputs struct {
	full   []fullBand
	planes []uint16 // the host coarse planes, concatenated
	coarse []coarseBand
	raw    []rawBand
	rawAt  int // elements of the planes buffer that decoded planes take
	scl    []uint8
	scale  []float32
	offset []float32
	nodata []uint16
}

func gatherInputs(dates []composite.Date, nb, n int) (*compositeInputs, error) {
	in := &compositeInputs{full: make([]fullBand, 0, len(dates)*nb), scl: make([]uint8, 0, len(dates)*n)}
	for di, d := range dates {
		if len(d.DN) != nb || len(d.NoData) != nb || len(d.Scale) != nb || len(d.Offset) != nb || len(d.SCL) != n ||
			(d.Coarse != nil && len(d.Coarse) != nb) || (d.Raw != nil && len(d.Raw) != nb) {
			return nil, fmt.Errorf("cuda composite: date %d has %d bands and %d classes, want %d and %d", di, len(d.DN), len(d.SCL), nb, n)
		}
		for b, v := range d.DN {
			slot := (di*nb + b) * n
			var r *decode.Rect
			if d.Raw != nil {
				r = d.Raw[b]
			}
			switch {
			case d.Coarse != nil && d.Coarse[b] != nil:
				c := d.Coarse[b]
				if c.Window.W*c.Window.H != n {
					return nil, fmt.Errorf("cuda composite: date %d band %d: a %d×%d window for %d pixels", di, b, c.Window.W, c.Window.H, n)
				}
				p := c.Plane
				if r != nil {
					if r.X != p.X0 || r.Y != p.Y0 || r.W != p.W || r.H != p.H {
						return nil, fmt.Errorf("cuda composite: date %d band %d: compressed rectangle %d,%d %d×%d for plane %d,%d %d×%d", di, b, r.X, r.Y, r.W, r.H, p.X0, p.Y0, p.W, p.H)
					}
					in.raw = append(in.raw, rawBand{r: r, coarse: true, at: in.rawAt})
					in.coarse = append(in.coarse, coarseBand{c: c, at: in.rawAt, slot: slot, decoded: true})
					in.rawAt += p.W * p.H
					break
				}
				if len(p.Pix) != p.W*p.H {
					return nil, fmt.Errorf("cuda composite: date %d band %d: a %d×%d plane of %d pixels", di, b, p.W, p.H, len(p.Pix))
				}
				in.coarse = append(in.coarse, coarseBand{c: c, at: len(in.planes), slot: slot})
				in.planes = append(in.planes, p.Pix...)
			case r != nil:
				if r.W*r.H != n {
					return nil, fmt.Errorf("cuda composite: date %d band %d: a %d×%d rectangle for %d pixels", di, b, r.W, r.H, n)
				}
				in.raw = append(in.raw, rawBand{r: r, slot: slot})
			default:
				if len(v) != n {
					return nil, fmt.Errorf("cuda composite: date %d band %d has %d pixels, want %d", di, b, len(v), n)
				}
				in.full = append(in.full, fullBand{v, slot})
			}
			in.scale, in.offset = append(in.scale, float32(d.Scale[b])), append(in.offset, float32(d.Offset[b]))
		}
		in.nodata = append(in.nodata, d.NoData...)
		in.scl = append(in.scl, d.SCL...)
	}
	// Decoded planes follow the host ones in the planes buffer.
	for i := range in.coarse {
		if in.coarse[i].decoded {
			in.coarse[i].at += len(in.planes)
		}
	}
	for i := range in.raw {
		if in.raw[i].coarse {
			in.raw[i].at += len(in.planes)
		}
	}
	return in, nil
}

// compositeShared is the dynamic shared memory a block of the composite
// kernel may take without opting in to more: 48 KiB on every GPU lulc
// supports.
const compositeShared = 48 << 10

// compositeBlock returns the composite kernel's block size for nd dates
// and the dynamic shared memory it needs: each thread sorts a pixel's
// values there, nd floats and nd date bytes. Blocks are as large as fit,
// at most 256 threads and at least one warp (32 threads hold 255 dates
// in 40 KB).
func compositeBlock(nd int) (block, shared int) {
	block = min(256, compositeShared/(5*nd)/32*32)
	block = max(32, block)
	return block, block * nd * 5
}

// compositeLaunch is the composite kernel's launch over n pixels of nd
// dates: its grid (at most 32 blocks a multiprocessor; the kernel strides
// over the rest), block and dynamic shared memory.
func (d *Device) compositeLaunch(nd, n int) (grid, block, shared uint32) {
	b, sh := compositeBlock(nd)
	return uint32(max(1, min((n+b-1)/b, d.SMs*32))), uint32(b), uint32(sh)
}

// Composite is composite.Resample and composite.Window on the GPU, with
// the same bytes: decoding of compressed bands, upsampling of coarse ones,
// masking by scene class and nodata, reflectance, the per-band median over
// the valid dates, quantisation and the valid counts. The digital numbers
// go up as uint16 (half the bytes of reflectances), or compressed, and
// only the quantised medians and counts come back.
func Composite(dev *Device, dates []composite.Date, drop []uint8, qscale, qoffset float64, out [][]uint16, count []uint8) error {
	return CompositeMirrored(dev, dates, composite.Spec{Drop: drop, Scale: qscale, Offset: qoffset}, out, count, nil)
}

// CompositeMirrored is composite.WindowTemporal on the GPU (out holds
// the bands' planes, then s.Temporal's), that also places the window's
// composite and labels into a tile's mirror in device memory (into, when
// not nil), from the device's own output: the composite crosses the bus
// once, downwards.
func CompositeMirrored(dev *Device, dates []composite.Date, s composite.Spec, out [][]uint16, count []uint8, into *MirrorWindow) error {
	drop, tp, qscale, qoffset := s.Drop, s.Temporal, s.Scale, s.Offset
	width := 0
	if into != nil {
		width = into.Width
	}
	nd, nplanes, n := len(dates), len(out), len(count)
	nb := nplanes - len(tp.Planes())
	if nb < 1 {
		return fmt.Errorf("cuda composite: %d output planes for %d temporal planes", nplanes, len(tp.Planes()))
	}
	if into != nil && into.Mirror.bands != nplanes {
		return fmt.Errorf("cuda composite: %d planes into a mirror of %d", nplanes, into.Mirror.bands)
	}
	if nd == 0 || nd > 255 {
		return fmt.Errorf("cuda composite: %d dates (1–255)", nd)
	}
	in, err := gatherInputs(dates, nb, n)
	if err != nil {
		return err
	}
	for b := range out {
		if len(out[b]) != n {
			return fmt.Errorf("cuda composite: output band %d has %d pixels, want %d", b, len(out[b]), n)
		}
	}
	var dropped [8]uint32
	for _, c := range drop {
		dropped[c>>5] |= 1 << (c & 31)
	}
	// The temporal program: per source its operation and input bands, as
	// the features kernel's; the percentiles; each date's seasons. Empty
	// lists go up as one unused word.
	tprog, pcts, smask := []int32{0}, []int32{0}, []uint32{0}
	var nsrc, npct, nseason int
	if tp != nil {
		nsrc, npct, nseason = len(tp.Sources), len(tp.Percentiles), len(tp.Seasons)
		tprog, smask = nil, make([]uint32, nd)
		for si, f := range tp.Sources {
			op, ok := opCodes[f.Op]
			if !ok || f.Op == "context" || f.Op == "shift" {
				return fmt.Errorf("cuda composite: temporal source %s has no GPU operation %q", f.Name, f.Op)
			}
			code := []int32{op, 0, 0, 0, 0}
			for k, b := range tp.Inputs[si] {
				code[1+k] = int32(b)
			}
			tprog = append(tprog, code...)
		}
		if npct > 0 {
			pcts = pcts[:0]
			for _, p := range tp.Percentiles {
				pcts = append(pcts, int32(p))
			}
		}
		for di, d := range dates {
			smask[di] = tp.SeasonMask(d.Time)
		}
	}
	return dev.Do(func() error {
		m := dev.mem
		var st staging
		bdn := st.buf(m.get("composite.dn", uint64(nd*nb*n)*2))
		pdn := bdn.ptr
		pplanes := st.buf(m.get("composite.planes", uint64(len(in.planes)+in.rawAt)*2)).ptr
		pscl := st.ptr(put(m, "composite.scl", in.scl))
		pdrop := st.ptr(put(m, "composite.drop", dropped[:]))
		psc := st.ptr(put(m, "composite.scale", in.scale))
		pof := st.ptr(put(m, "composite.offset", in.offset))
		pnd := st.ptr(put(m, "composite.nodata", in.nodata))
		pout := st.buf(m.get("composite.out", uint64(nplanes*n)*2))
		pcount := st.buf(m.get("composite.count", uint64(n)))
		ptprog := st.ptr(put(m, "composite.tprog", tprog))
		ppcts := st.ptr(put(m, "composite.pcts", pcts))
		psmask := st.ptr(put(m, "composite.smask", smask))
		if st.err != nil {
			return st.err
		}
		if err := putAt(pplanes, in.planes); err != nil {
			return err
		}
		for _, fb := range in.full {
			if err := putAt(pdn+uint64(2*fb.slot), fb.dn); err != nil {
				return err
			}
		}
		rects := make([]rectOut, len(in.raw))
		for i, rb := range in.raw {
			rects[i] = rectOut{r: rb.r, dst: pdn + uint64(2*rb.slot), cache: rb.coarse}
			if rb.coarse {
				rects[i].dst = pplanes + uint64(2*rb.at)
			}
		}
		if err := dev.decodeRects(rects); err != nil {
			return err
		}
		for _, cb := range in.coarse {
			c := cb.c
			hasND := int32(0)
			if c.HasNoData {
				hasND = 1
			}
			w, p := c.Window, c.Plane
			if err := dev.launchAsync(0, "upsample_bilinear", int64(n), pplanes+uint64(2*cb.at), int32(p.X0), int32(p.Y0), int32(p.W), int32(p.H),
				int32(w.X), int32(w.Y), int32(w.W), int32(w.H), int32(w.K), int32(w.RasterW), int32(w.RasterH), int32(c.NoData), hasND,
				pdn+uint64(2*cb.slot)); err != nil {
				return err
			}
		}
		grid, block, shared := dev.compositeLaunch(nd, n)
		if err := dev.launchGrid(0, "composite", grid, 1, block, shared, pdn, pscl, int32(nd), int32(nb), int64(n), pdrop, psc, pof, pnd,
			math.Float64bits(qscale), math.Float64bits(qoffset), pout.ptr, pcount.ptr,
			ptprog, int32(nsrc), ppcts, int32(npct), psmask, int32(nseason)); err != nil {
			return err
		}
		if err := check(api.ctxSynchronize(), "run composite"); err != nil {
			return err
		}
		if into != nil {
			if err := into.place(pout.ptr, width, n); err != nil {
				return err
			}
		}
		// Each band comes straight into its output plane.
		for b := range out {
			if err := download(out[b], Buffer{ptr: pout.ptr + uint64(2*b*n), bytes: uint64(2 * n)}); err != nil {
				return err
			}
		}
		return download(count, pcount)
	})
}
