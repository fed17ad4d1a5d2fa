package classifier

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/features"
)

// predictChunk is the pixels per chunk of Predictor.Predict (and of the
// area of applicability's DI): 1 M pixels of 20 features stage 80 MB of
// pinned memory per slot. Tests ask for less (limit, a Predictor's or
// an AOA's maxChunk, when set).
func predictChunk(limit int) int {
	if limit > 0 {
		return limit
	}
	return 1 << 20
}

// Predictor classifies feature planes on the GPU: binning with the
// model's edges and the forest walk run back to back on the device, so
// the codes never cross PCIe. It gives the classes and confidences (bits)
// of forest.Bins.Bin followed by forest.Compiled.Classify.
type Predictor struct {
	Dev    *cuda.Device
	forest *Forest
	nf     int
	// bin edges, back to back, with each feature's offset and length
	edges, offsets, lengths driver.Buffer
	// two slots: device buffers, pinned buffers and a stream each; hostIn
	// (feature staging) only once Predict has streamed
	hostIn, hostCls, hostConf [2]unsafe.Pointer
	dIn, dCodes, dCls, dConf  [2]driver.Buffer
	streams                   [2]uintptr
	chunk                     int
	// digital-number planes for PredictDN: pinned staging, device DNs and
	// device reflectance, nb planes of chunk pixels per slot
	hostDN      [2]unsafe.Pointer
	dDN, dBands [2]driver.Buffer
	bandPixels  uint64
	// blocks are device buffers for context windows' DN planes: a
	// window takes one, fills it beside the owner goroutine
	// (Device.CopyAside; on the owner with Options.OwnerCopies) while
	// the owner works on other windows, and gives it back after its
	// pass.
	blocks chan *driver.Buffer
	// settled are the Features and AOAs whose uploads a window's pass
	// has waited for: their buffers went up by the null stream, which
	// the pass's own stream does not wait for, so the first pass with
	// each waits for the null stream once (owner goroutine).
	settled map[any]bool
	// window serializes context windows' passes, each from its queueing
	// to its results' copy (see predictDNContext), with the slots' other
	// users (Predict, PredictDN, Close); aoaIdx, aoaOut and
	// aoaBest are their AOA pixels, DIs and nearest distances on the
	// device, hostDI the DIs' pinned staging, for aoaCap pixels: the
	// predictor's own, not the device pool's, as the pass is waited for
	// beside the owner, where other work may take the pool's.
	window                  sync.Mutex
	aoaIdx, aoaOut, aoaBest driver.Buffer
	hostDI                  unsafe.Pointer
	aoaCap                  int
	// dValid and hostValid are a mirrored window's validity on the
	// device and its pinned staging, for validCap pixels (as the AOA's
	// buffers: the predictor's own).
	dValid    driver.Buffer
	hostValid unsafe.Pointer
	validCap  int
	// maxChunk, when set, is the pixels per chunk instead of
	// predictChunk's: tests lower it to run the chunked paths on small
	// inputs.
	maxChunk int
}

// contextBlocks is how many context windows' DN blocks a predictor holds
// on the device at once (about 21 MB each for a 1024² window of ten bands
// with a 7-px halo): one in the owner's pass, the others filling beside
// it.
const contextBlocks = 3

// NewPredictor uploads a model's forest and bin edges.
func NewPredictor(dev *cuda.Device, m *forest.Model) (*Predictor, error) {
	f, err := NewForest(dev, m.Forest.Compile())
	if err != nil {
		return nil, err
	}
	p := &Predictor{Dev: dev, forest: f, nf: len(m.Bins.Edges), blocks: make(chan *driver.Buffer, contextBlocks)}
	for range contextBlocks {
		p.blocks <- new(driver.Buffer)
	}
	var edges []float32
	var offsets, lengths []int32
	for _, e := range m.Bins.Edges {
		offsets = append(offsets, int32(len(edges)))
		lengths = append(lengths, int32(len(e)))
		edges = append(edges, e...)
	}
	edges = append(edges, float32(math.NaN())) // never empty
	err = dev.Do(func() error {
		var err error
		if p.edges, err = driver.Upload(edges); err != nil {
			return err
		}
		if p.offsets, err = driver.Upload(offsets); err != nil {
			return err
		}
		p.lengths, err = driver.Upload(lengths)
		return err
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Predict classifies the pixels of feature planes (one per model feature)
// into cls and conf. Chunks alternate between two streams: while one
// chunk's features go up, are binned and walked and its classes come
// down, the host stages the next chunk into pinned memory.
func (p *Predictor) Predict(feats [][]float32, cls []uint8, conf []float32) error {
	if len(feats) != p.nf {
		return fmt.Errorf("cuda predict: %d feature planes for a model of %d features", len(feats), p.nf)
	}
	n := len(cls)
	if err := samePixels(feats, cls, conf); err != nil || n == 0 {
		return err
	}
	chunk := predictChunk(p.maxChunk)
	if n <= chunk {
		return p.predictOnce(feats, cls, conf)
	}
	nf := p.nf
	// The slots are a context window's too, which may still be waited
	// for beside the owner.
	p.window.Lock()
	defer p.window.Unlock()
	return p.Dev.Do(func() error {
		reserve := func(chunk int) error { return p.reserve(chunk, true) }
		return p.stream(n, chunk, reserve, func(s, lo, hi int) error {
			m := hi - lo
			in := unsafe.Slice((*float32)(p.hostIn[s]), nf*m)
			parallelPlanes(nf, func(i int) { copy(in[i*m:(i+1)*m], feats[i][lo:hi]) })
			return driver.CopyToDeviceAsync(p.dIn[s].Ptr, p.hostIn[s], uint64(m)*4*uint64(nf), p.streams[s])
		}, cls, conf)
	})
}

// samePixels checks that every input plane has as many pixels as cls,
// and conf as many as cls.
func samePixels[T float32 | uint16](planes [][]T, cls []uint8, conf []float32) error {
	n := len(cls)
	if len(conf) != n {
		return fmt.Errorf("cuda predict: %d classes and %d confidences", n, len(conf))
	}
	for _, p := range planes {
		if len(p) != n {
			return fmt.Errorf("cuda predict: planes of %d and %d pixels", n, len(p))
		}
	}
	return nil
}

// stream classifies n pixels in chunks alternating between the two
// slots (owner goroutine): fill queues, on slot s's stream, what puts
// pixels [lo, hi)'s features into dIn[s]; walk bins and walks them and
// the classes and confidences are collected once the stream is done.
// reserve sizes the slots for a chunk; out of device memory, the chunks
// halve: more round trips, the same result.
func (p *Predictor) stream(n, chunk int, reserve func(chunk int) error, fill func(s, lo, hi int) error, cls []uint8, conf []float32) error {
	for {
		err := reserve(chunk)
		if err == nil {
			break
		}
		if !errors.Is(err, driver.ErrorOutOfMemory) || chunk <= 1<<16 {
			return fmt.Errorf("cuda predict: chunks of %d pixels: %w", chunk, err)
		}
		p.freeSlots()
		chunk /= 2
	}
	return streamChunks(p.streams, n, chunk, func(s, lo, hi int) error {
		if err := fill(s, lo, hi); err != nil {
			return err
		}
		return p.walk(s, hi-lo)
	}, func(s, lo, hi int) {
		copy(cls[lo:hi], unsafe.Slice((*uint8)(p.hostCls[s]), hi-lo))
		copy(conf[lo:hi], unsafe.Slice((*float32)(p.hostConf[s]), hi-lo))
	})
}

// predictOnce is Predict for a batch of at most one chunk (a training
// run's validation rows): the planes are copied from Go memory straight
// into the device's pooled buffers and the results straight back, with
// no pinned staging to allocate, which for a single batch costs more than
// it saves.
func (p *Predictor) predictOnce(feats [][]float32, cls []uint8, conf []float32) error {
	n, nf, f := len(cls), p.nf, p.forest
	return p.Dev.Do(func() error {
		m := p.Dev.Pool()
		var st driver.Staging
		in := st.Buf(m.Get("predict.in", uint64(n*nf)*4))
		codes := st.Buf(m.Get("predict.codes", uint64(n*nf)))
		dcls := st.Buf(m.Get("predict.cls", uint64(n)))
		dconf := st.Buf(m.Get("predict.conf", uint64(n)*4))
		if st.Err != nil {
			return st.Err
		}
		for i, plane := range feats {
			if err := driver.PutAt(in.Ptr+uint64(i*n*4), plane); err != nil {
				return err
			}
		}
		if err := p.Dev.LaunchAsync(0, "bin", int64(n), in.Ptr, int32(nf), int64(n), p.edges.Ptr, p.offsets.Ptr, p.lengths.Ptr, codes.Ptr); err != nil {
			return err
		}
		if err := f.launch(0, false, n, codes.Ptr, dcls.Ptr, dconf.Ptr); err != nil {
			return err
		}
		if err := driver.Download(cls, dcls); err != nil {
			return err
		}
		return driver.Download(conf, dconf)
	})
}

// PredictDN is composite.Reflectance, Features.Compute and Predict in one
// pass on the device: a window's digital-number planes go up (two bytes a
// band and pixel, half what reflectance would be), reflectance, features,
// bin codes and the forest walk stay on the device, and only classes and
// confidences come back. The results are those of the CPU's reflectance,
// features and walk, bit for bit: the same arithmetic on the same values.
// DNs equal to b.NoData become NaN reflectance. b's planes are the
// window's, without a halo (b.Rect is not read).
func (p *Predictor) PredictDN(fe *Features, b features.DN, cls []uint8, conf []float32) error {
	nodata, scale, offset := b.NoData, b.Scale, b.Offset
	dn, err := p.dnPlanes(fe, b.Planes)
	if err != nil {
		return err
	}
	nb, nf := len(dn), p.nf
	if fe.Set.Radius() > 0 {
		return fmt.Errorf("cuda predict: context features need their window's halo: predict them from planes")
	}
	n := len(cls)
	if err := samePixels(dn, cls, conf); err != nil || n == 0 {
		return err
	}
	p.window.Lock()
	defer p.window.Unlock()
	return p.Dev.Do(func() error {
		prog, err := fe.program()
		if err != nil {
			return err
		}
		reserve := func(chunk int) error {
			if err := p.reserve(chunk, false); err != nil {
				return err
			}
			return p.reserveBands(chunk, nb)
		}
		return p.stream(n, min(n, predictChunk(p.maxChunk)), reserve, func(s, lo, hi int) error {
			m, st := hi-lo, p.streams[s]
			in := unsafe.Slice((*uint16)(p.hostDN[s]), nb*m)
			parallelPlanes(nb, func(b int) { copy(in[b*m:(b+1)*m], dn[b][lo:hi]) })
			if err := driver.CopyToDeviceAsync(p.dDN[s].Ptr, p.hostDN[s], uint64(m)*2*uint64(nb), st); err != nil {
				return err
			}
			if err := p.Dev.LaunchAsync(st, "reflectance", int64(m*nb), p.dDN[s].Ptr, int64(m*nb), int32(nodata), scale, offset, p.dBands[s].Ptr); err != nil {
				return err
			}
			return p.Dev.LaunchAsync(st, fe.kernel(), int64(m), p.dBands[s].Ptr, int32(nb), int64(m), prog, int32(nf), p.dIn[s].Ptr)
		}, cls, conf)
	})
}

// dnPlanes checks a window's DN planes (one per band of fe's set) and the
// set's features against the model, and returns the planes the set uses.
func (p *Predictor) dnPlanes(fe *Features, dn [][]uint16) ([][]uint16, error) {
	if len(dn) != len(fe.Set.Bands) || len(fe.Set.Features) != p.nf {
		return nil, fmt.Errorf("cuda predict: %d band planes for %d bands, %d features for a model of %d", len(dn), len(fe.Set.Bands), len(fe.Set.Features), p.nf)
	}
	if p.nf > 64 {
		return nil, fmt.Errorf("cuda predict: %d features (at most 64)", p.nf)
	}
	return usedPlanes(fe, dn), nil
}

// walk queues, on slot s's stream, the binning of m pixels' features in
// dIn[s], the forest walk and the copies of the classes and confidences
// into the slot's pinned buffers.
func (p *Predictor) walk(s, m int) error {
	st, f, nf := p.streams[s], p.forest, p.nf
	if err := p.Dev.LaunchAsync(st, "bin", int64(m), p.dIn[s].Ptr, int32(nf), int64(m), p.edges.Ptr, p.offsets.Ptr, p.lengths.Ptr, p.dCodes[s].Ptr); err != nil {
		return err
	}
	if err := f.launch(st, true, m, p.dCodes[s].Ptr, p.dCls[s].Ptr, p.dConf[s].Ptr); err != nil {
		return err
	}
	if err := driver.CopyToHostAsync(p.hostCls[s], p.dCls[s].Ptr, uint64(m), st); err != nil {
		return err
	}
	return driver.CopyToHostAsync(p.hostConf[s], p.dConf[s].Ptr, uint64(m)*4, st)
}

// reserveBands makes the band buffers hold nb planes of chunk pixels:
// pinned DN staging, device DNs and device reflectance (owner goroutine;
// reserve has sized the rest).
func (p *Predictor) reserveBands(chunk, nb int) error {
	px := uint64(chunk) * uint64(nb)
	if px <= p.bandPixels {
		return nil
	}
	p.freeBands()
	for s := range 2 {
		var err error
		if p.dBands[s], err = driver.Alloc(px * 4); err != nil {
			return err
		}
		if p.dDN[s], err = driver.Alloc(px * 2); err != nil {
			return err
		}
		if err := driver.AllocHost(&p.hostDN[s], px*2); err != nil {
			return err
		}
	}
	p.bandPixels = px
	return nil
}

func (p *Predictor) freeBands() {
	for s := range 2 {
		for _, b := range []*driver.Buffer{&p.dBands[s], &p.dDN[s]} {
			if b.Ptr != 0 {
				b.Free()
				*b = driver.Buffer{}
			}
		}
		if p.hostDN[s] != nil {
			driver.FreeHost(p.hostDN[s])
			p.hostDN[s] = nil
		}
	}
	p.bandPixels = 0
}

// reserve makes the per-slot buffers hold chunk pixels and creates the
// streams (owner goroutine); with staging, also the pinned buffers that
// stage feature planes (Predict's, not PredictDN's).
func (p *Predictor) reserve(chunk int, staging bool) error {
	for s := range 2 {
		if p.streams[s] == 0 {
			// CU_STREAM_NON_BLOCKING (1): no implicit sync with stream 0.
			if err := driver.CreateStream(&p.streams[s]); err != nil {
				return err
			}
		}
	}
	m, nf := uint64(chunk), uint64(p.nf)
	if chunk > p.chunk {
		p.freeSlots()
		for s := range 2 {
			for _, b := range []struct {
				buf   *driver.Buffer
				bytes uint64
			}{{&p.dIn[s], m * 4 * nf}, {&p.dCodes[s], m * nf}, {&p.dCls[s], m}, {&p.dConf[s], m * 4}} {
				var err error
				if *b.buf, err = driver.Alloc(b.bytes); err != nil {
					return err
				}
			}
			for _, h := range []struct {
				ptr   *unsafe.Pointer
				bytes uint64
			}{{&p.hostCls[s], m}, {&p.hostConf[s], m * 4}} {
				if err := driver.AllocHost(h.ptr, h.bytes); err != nil {
					return err
				}
			}
		}
		p.chunk = chunk
	}
	if staging {
		for s := range 2 {
			if p.hostIn[s] == nil {
				if err := driver.AllocHost(&p.hostIn[s], uint64(p.chunk)*4*nf); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// reserveAOA makes the AOA buffers of context windows hold k pixels
// (owner goroutine, with p.window held: no pass is in flight).
func (p *Predictor) reserveAOA(k int) error {
	if k <= p.aoaCap {
		return nil
	}
	p.freeAOA()
	k = max(k, 1<<16)
	var st driver.Staging
	p.aoaIdx = st.Buf(driver.Alloc(uint64(k) * 4))
	p.aoaOut = st.Buf(driver.Alloc(uint64(k) * 4))
	p.aoaBest = st.Buf(driver.Alloc(uint64(k) * 8))
	if st.Err == nil {
		st.Err = driver.AllocHost(&p.hostDI, uint64(k)*4)
	}
	if st.Err != nil {
		p.freeAOA()
		return st.Err
	}
	p.aoaCap = k
	return nil
}

func (p *Predictor) freeAOA() {
	for _, b := range []*driver.Buffer{&p.aoaIdx, &p.aoaOut, &p.aoaBest} {
		if b.Ptr != 0 {
			b.Free()
			*b = driver.Buffer{}
		}
	}
	if p.hostDI != nil {
		driver.FreeHost(p.hostDI)
		p.hostDI = nil
	}
	p.aoaCap = 0
}

// reserveValid makes a mirrored window's validity buffers hold n pixels
// (owner goroutine, with p.window held).
func (p *Predictor) reserveValid(n int) error {
	if n <= p.validCap {
		return nil
	}
	p.freeValid()
	n = max(n, 1<<20)
	var err error
	if p.dValid, err = driver.Alloc(uint64(n)); err != nil {
		p.dValid = driver.Buffer{}
		return err
	}
	if err := driver.AllocHost(&p.hostValid, uint64(n)); err != nil {
		p.freeValid()
		return err
	}
	p.validCap = n
	return nil
}

func (p *Predictor) freeValid() {
	if p.dValid.Ptr != 0 {
		p.dValid.Free()
		p.dValid = driver.Buffer{}
	}
	if p.hostValid != nil {
		driver.FreeHost(p.hostValid)
		p.hostValid = nil
	}
	p.validCap = 0
}

func (p *Predictor) freeSlots() {
	p.freeBands()
	for s := range 2 {
		for _, b := range []*driver.Buffer{&p.dIn[s], &p.dCodes[s], &p.dCls[s], &p.dConf[s]} {
			if b.Ptr != 0 {
				b.Free()
				*b = driver.Buffer{}
			}
		}
		for _, h := range []*unsafe.Pointer{&p.hostIn[s], &p.hostCls[s], &p.hostConf[s]} {
			if *h != nil {
				driver.FreeHost(*h)
				*h = nil
			}
		}
	}
	p.chunk = 0
}

// Close frees the predictor's device and pinned memory and streams.
func (p *Predictor) Close() {
	// No window is then waited for beside the owner.
	p.window.Lock()
	defer p.window.Unlock()
	p.forest.Close()
	p.Dev.Do(func() error {
		p.freeSlots()
		p.freeAOA()
		p.freeValid()
		// Only the blocks no window holds: the owner must not wait for
		// one (a second Close finds none).
		for len(p.blocks) > 0 {
			if b := <-p.blocks; b.Ptr != 0 {
				b.Free()
			}
		}
		for s := range 2 {
			if p.streams[s] != 0 {
				driver.DestroyStream(p.streams[s])
				p.streams[s] = 0
			}
		}
		for _, b := range []*driver.Buffer{&p.edges, &p.offsets, &p.lengths} {
			if b.Ptr != 0 {
				b.Free()
				*b = driver.Buffer{}
			}
		}
		return nil
	})
}
