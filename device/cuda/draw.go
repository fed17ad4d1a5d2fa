package cuda

import (
	"fmt"
	"math"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/features"
)

// Mirror is a tile's composite (its bands' digital numbers, a plane each)
// and its labels in device memory, filled window by window as the device
// composites them (CompositeMirrored), so that the tile's samples are
// drawn on the device (DrawCount, DrawCollect) without sending the tile
// up again.
type Mirror struct {
	dev                  *Device
	width, height, bands int
	dn, labels           driver.Buffer
}

// NewMirror allocates a mirror of a width × height tile of bands bands.
func NewMirror(dev *Device, width, height, bands int) (*Mirror, error) {
	return newMirror(dev, width, height, bands, true)
}

// NewPlanesMirror allocates a mirror of a width × height tile's bands
// planes without labels: the predictor's (classifier's MirrorBlock),
// which reads windows of the composite from it; MirrorWindow.Labels is
// then not placed.
func NewPlanesMirror(dev *Device, width, height, bands int) (*Mirror, error) {
	return newMirror(dev, width, height, bands, false)
}

func newMirror(dev *Device, width, height, bands int, labeled bool) (*Mirror, error) {
	if width <= 0 || height <= 0 || bands <= 0 || width >= 1<<20 || height >= 1<<20 {
		return nil, fmt.Errorf("cuda mirror: a %d × %d tile of %d bands", width, height, bands)
	}
	m := &Mirror{dev: dev, width: width, height: height, bands: bands}
	err := dev.Do(func() error {
		var err error
		if m.dn, err = driver.Alloc(m.Bytes()); err != nil || !labeled {
			return err
		}
		if m.labels, err = driver.Alloc(uint64(width) * uint64(height)); err != nil {
			m.dn.Free()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda mirror of %d × %d × %d: %w", width, height, bands, err)
	}
	return m, nil
}

// SpareMirror is a planes mirror of a width × height tile of bands planes
// that a tile mapped before gave back (Recycle), or nil. Its pixels are
// that tile's until a composite places its own.
func SpareMirror(dev *Device, width, height, bands int) *Mirror {
	dev.mirrorsMu.Lock()
	defer dev.mirrorsMu.Unlock()
	for i, m := range dev.spareMirrors {
		if m.width == width && m.height == height && m.bands == bands {
			dev.spareMirrors = append(dev.spareMirrors[:i], dev.spareMirrors[i+1:]...)
			return m
		}
	}
	return nil
}

// Recycle gives a planes mirror back to its device for the next tile of
// its shape (SpareMirror), once no work on the device reads or writes it;
// the device frees it when it closes. A mirror with labels is closed.
func (m *Mirror) Recycle() {
	if m.labels.Ptr != 0 {
		m.Close()
		return
	}
	m.dev.mirrorsMu.Lock()
	defer m.dev.mirrorsMu.Unlock()
	m.dev.spareMirrors = append(m.dev.spareMirrors, m)
}

// SparesMirror says whether dev has a mirror of bytes free and an eighth
// of its memory besides (for the rows read ahead, the predictor's
// buffers, another lane's tile): lulc run keeps a tile's copy on the
// device only then.
func SparesMirror(dev *Device, bytes uint64) (bool, error) {
	free, total, err := dev.MemInfo()
	if err != nil {
		return false, err
	}
	return free >= bytes+total/8, nil
}

// MirrorBytes is the device memory a planes mirror of a width × height
// tile of bands planes takes.
func MirrorBytes(width, height, bands int) uint64 {
	return uint64(width) * uint64(height) * uint64(bands) * 2
}

// Device is the device the mirror lives on.
func (m *Mirror) Device() *Device { return m.dev }

// Bytes is the device memory the mirror's planes take.
func (m *Mirror) Bytes() uint64 { return MirrorBytes(m.width, m.height, m.bands) }

// Bands is how many planes the mirror holds.
func (m *Mirror) Bands() int { return m.bands }

// Block queues on stream s (owner goroutine) the copy of the w × h block
// at column x and row y of the planes used names (ascending stack plane
// indices, at most 32) into dst, one plane after the other (mirror_block).
func (m *Mirror) Block(s uintptr, dst uint64, used []int, x, y, w, h int) error {
	var mask uint32
	last := -1
	for _, p := range used {
		if p <= last || p >= m.bands || p >= 32 {
			return fmt.Errorf("cuda mirror: planes %v of a mirror of %d", used, m.bands)
		}
		mask |= 1 << p
		last = p
	}
	if err := m.inside(x, y, w, h); err != nil {
		return err
	}
	plane := int64(m.width) * int64(m.height)
	return m.dev.LaunchAsync(s, "mirror_block", int64(w)*int64(h)*int64(len(used)), m.dn.Ptr, int32(m.width), plane,
		int32(mask), int32(x), int32(y), int32(w), int32(h), dst)
}

// Valid queues on stream s (owner goroutine) the validity of the w × h
// window at column x and row y into dst (a byte a pixel): 1 where each of
// the first planes planes holds data (DN 0 is nodata), else 0
// (mirror_valid).
func (m *Mirror) Valid(s uintptr, dst uint64, planes, x, y, w, h int) error {
	if planes <= 0 || planes > m.bands {
		return fmt.Errorf("cuda mirror: the validity of %d planes of a mirror of %d", planes, m.bands)
	}
	if err := m.inside(x, y, w, h); err != nil {
		return err
	}
	plane := int64(m.width) * int64(m.height)
	return m.dev.LaunchAsync(s, "mirror_valid", int64(w)*int64(h), m.dn.Ptr, int32(m.width), plane,
		int32(planes), int32(x), int32(y), int32(w), int32(h), dst)
}

// inside checks that a w × h block at (x, y) lies in the tile.
func (m *Mirror) inside(x, y, w, h int) error {
	if w <= 0 || h <= 0 || x < 0 || y < 0 || x+w > m.width || y+h > m.height {
		return fmt.Errorf("cuda mirror: a %d × %d block at (%d, %d) of a %d × %d tile", w, h, x, y, m.width, m.height)
	}
	return nil
}

// Close frees the mirror's device memory.
func (m *Mirror) Close() {
	m.dev.Do(func() error {
		m.dn.Free()
		if m.labels.Ptr != 0 {
			m.labels.Free()
		}
		return nil
	})
}

// MirrorWindow is where a window of the composite goes in a mirror: its
// place (column X, row Y), its width (CompositeMirrored's; Mirror.Write
// takes its own) and its labels (W × H).
type MirrorWindow struct {
	Mirror *Mirror
	X, Y   int
	Width  int
	Labels []uint8
}

// place copies a window's composite, at device address out (nplanes
// planes of n pixels one after the other: the mirror's first), by stream
// s, and its labels into the mirror, if it keeps labels (owner
// goroutine).
func (w *MirrorWindow) place(s uintptr, out uint64, width, n, nplanes int) error {
	m := w.Mirror
	h := 0
	if width > 0 {
		h = n / width
	}
	labeled := m.labels.Ptr != 0
	if width <= 0 || n != width*h || w.X < 0 || w.Y < 0 || w.X+width > m.width || w.Y+h > m.height || labeled && len(w.Labels) != n {
		return fmt.Errorf("cuda mirror: a %d × %d window at (%d, %d) with %d labels in a %d × %d tile", width, h, w.X, w.Y, len(w.Labels), m.width, m.height)
	}
	plane := int64(m.width) * int64(m.height)
	if err := m.dev.LaunchAsync(s, "place_u16", int64(n*nplanes), out, int32(width), int32(h), int32(nplanes),
		m.dn.Ptr, int32(m.width), plane, int32(w.X), int32(w.Y)); err != nil {
		return err
	}
	if !labeled {
		return nil
	}
	lab, err := driver.Put(m.dev.Pool(), "mirror.labels", w.Labels)
	if err != nil {
		return err
	}
	return m.dev.Launch("place_u8", int64(n), lab, int32(width), int32(h), m.labels.Ptr, int32(m.width), int32(w.X), int32(w.Y))
}

// DrawNone marks a code outside the scheme in a rule's Reservoir.
const DrawNone = math.MaxUint16

// rule stages a rule's tables on the device (owner goroutine).
func (m *Mirror) rule(r *sampling.DeviceRule) (res, missing uint64, err error) {
	var st driver.Staging
	res = st.Ptr(driver.Put(m.dev.Pool(), "draw.reservoir", r.Reservoir[:]))
	missing = st.Ptr(driver.Put(m.dev.Pool(), "draw.missing", r.Missing[:]))
	if r.Block <= 0 || r.Bits == 0 || r.Bits > 16 || r.Buffer < 0 || r.Buffer >= r.Block {
		return 0, 0, fmt.Errorf("cuda draw: block %d, buffer %d, %d key bits", r.Block, r.Buffer, r.Bits)
	}
	return res, missing, st.Err
}

// DrawCount is the draw's first pass over the mirrored tile: it adds
// every candidate's key to hist (reservoir k's bin b at k<<r.Bits|b), a
// histogram of nres reservoirs, counts in off, by code, the pixels whose
// code is outside the scheme, and in buffered the training candidates
// the buffer drops.
func (m *Mirror) DrawCount(r *sampling.DeviceRule, nres int, hist []uint32, off *[256]int64, buffered *int64) error {
	if len(hist) != nres<<r.Bits {
		return fmt.Errorf("cuda draw: a histogram of %d bins for %d reservoirs of %d bits", len(hist), nres, r.Bits)
	}
	return m.dev.Do(func() error {
		res, missing, err := m.rule(r)
		if err != nil {
			return err
		}
		var st driver.Staging
		dh := st.Ptr(m.dev.Pool().Zeroed("draw.hist", uint64(4*len(hist))))
		// The outside counts by code, then the buffered count.
		doff := st.Ptr(m.dev.Pool().Zeroed("draw.off", 257*8))
		if st.Err != nil {
			return st.Err
		}
		n := int64(m.width) * int64(m.height)
		if err := m.dev.Launch("draw_count", n, m.labels.Ptr, m.dn.Ptr, int32(m.bands), int32(m.width), n, res, missing,
			r.SplitBase, r.KeyBase, int32(r.Block), int32(r.Buffer), math.Float64bits(r.ValidationFraction), int32(r.Bits), dh, doff); err != nil {
			return err
		}
		if err := driver.Download(hist, driver.Buffer{Ptr: dh, Bytes: uint64(4 * len(hist))}); err != nil {
			return err
		}
		var counts [257]uint64
		if err := driver.Download(counts[:], driver.Buffer{Ptr: doff, Bytes: 257 * 8}); err != nil {
			return err
		}
		for code, c := range counts[:256] {
			off[code] = int64(c)
		}
		*buffered = int64(counts[256])
		return nil
	})
}

// DrawCollect is the second pass: every candidate whose key is at most
// its reservoir's bound, in no particular order. count[k] is how many
// reservoir k has under its bound (from the first pass's histogram); a
// pass that finds another number fails.
func (m *Mirror) DrawCollect(r *sampling.DeviceRule, bound []uint64, count []int) (sampling.Collected, error) {
	if len(bound) != len(count) {
		return sampling.Collected{}, fmt.Errorf("cuda draw: %d bounds for %d counts", len(bound), len(count))
	}
	start := make([]uint32, len(count))
	total := 0
	for k, c := range count {
		start[k] = uint32(total)
		total += c
	}
	if total >= math.MaxUint32 {
		return sampling.Collected{}, fmt.Errorf("cuda draw: %d candidates", total)
	}
	d := sampling.Collected{Key: make([]uint64, total), ID: make([]uint64, total), Reservoir: make([]uint16, total), DN: make([]uint16, total*m.bands)}
	err := m.dev.Do(func() error {
		res, missing, err := m.rule(r)
		if err != nil {
			return err
		}
		var st driver.Staging
		dbound := st.Ptr(driver.Put(m.dev.Pool(), "draw.bound", bound))
		dstart := st.Ptr(driver.Put(m.dev.Pool(), "draw.start", start))
		dfill := st.Ptr(m.dev.Pool().Zeroed("draw.fill", uint64(4*((len(count)+1)&^1))))
		key := st.Buf(m.dev.Pool().Get("draw.key", uint64(8*max(total, 1))))
		id := st.Buf(m.dev.Pool().Get("draw.id", uint64(8*max(total, 1))))
		rs := st.Buf(m.dev.Pool().Get("draw.res", uint64(2*max(total, 1))))
		dn := st.Buf(m.dev.Pool().Get("draw.dn", uint64(2*max(total*m.bands, 1))))
		if st.Err != nil {
			return st.Err
		}
		n := int64(m.width) * int64(m.height)
		if err := m.dev.Launch("draw_collect", n, m.labels.Ptr, m.dn.Ptr, int32(m.bands), int32(m.width), n, res, missing,
			r.SplitBase, r.KeyBase, int32(r.Block), int32(r.Buffer), math.Float64bits(r.ValidationFraction), r.Input, dbound, dstart, dfill,
			key.Ptr, id.Ptr, rs.Ptr, dn.Ptr); err != nil {
			return err
		}
		fill := make([]uint32, len(count))
		if err := driver.Download(fill, driver.Buffer{Ptr: dfill, Bytes: uint64(4 * len(fill))}); err != nil {
			return err
		}
		for k, c := range count {
			if int(fill[k]) != c {
				return fmt.Errorf("cuda draw: reservoir %d collected %d candidates, counted %d", k, fill[k], c)
			}
		}
		for _, f := range []error{driver.Download(d.Key, key), driver.Download(d.ID, id), driver.Download(d.Reservoir, rs), driver.Download(d.DN, dn)} {
			if f != nil {
				return f
			}
		}
		return nil
	})
	return d, err
}

// Write places a window of a composite made on the host, and its labels,
// into the mirror: the tile sink of inputs that the device does not
// composite (CompositeMirrored places its own windows). The planes are
// the mirror's first; any after them (a stack's layers) come whole, by
// WritePlanes.
func (m *Mirror) Write(x, y, w, h int, planes [][]uint16, labels []uint8) error {
	n := w * h
	if len(planes) > m.bands {
		return fmt.Errorf("cuda mirror: %d bands into a mirror of %d", len(planes), m.bands)
	}
	return m.dev.Do(func() error {
		buf, err := m.dev.Pool().Get("mirror.window", uint64(2*n*len(planes)))
		if err != nil {
			return err
		}
		for b, p := range planes {
			if len(p) != n {
				return fmt.Errorf("cuda mirror: band %d has %d pixels for a %d × %d window", b, len(p), w, h)
			}
			if err := driver.PutAt(buf.Ptr+uint64(2*b*n), p); err != nil {
				return err
			}
		}
		win := MirrorWindow{Mirror: m, X: x, Y: y, Labels: labels}
		if err := win.place(0, buf.Ptr, w, n, len(planes)); err != nil {
			return err
		}
		// A mirror without labels placed its planes asynchronously: the
		// window is in it when this returns, as with labels.
		return driver.SyncStream(0)
	})
}

// WritePlanes places whole planes of the tile into the mirror, from plane
// first on: a stack's layers, made apart from its windows.
func (m *Mirror) WritePlanes(first int, planes [][]uint16) error {
	plane := m.width * m.height
	if first < 0 || first+len(planes) > m.bands {
		return fmt.Errorf("cuda mirror: planes %d to %d of a mirror of %d", first, first+len(planes), m.bands)
	}
	return m.dev.Do(func() error {
		for k, p := range planes {
			if len(p) != plane {
				return fmt.Errorf("cuda mirror: a plane of %d pixels for a %d × %d tile", len(p), m.width, m.height)
			}
			if err := driver.PutAt(m.dn.Ptr+uint64(2*(first+k)*plane), p); err != nil {
				return err
			}
		}
		return nil
	})
}

// Context computes the set's context features at chosen pixels of the
// mirrored tile, straight from their windows (context_at): the twin of
// features.Set.ContextAt, refl being every DN's reflectance. dst gets the
// context features of pixel (xs[p], ys[p]) at p×their count.
func (m *Mirror) Context(set *features.Set, refl *[65536]float32, xs, ys []int, dst []float32) error {
	ctx := set.ContextFeatures()
	if len(xs) != len(ys) || len(dst) != len(xs)*len(ctx) {
		return fmt.Errorf("cuda context: %d values for %d×%d pixels and %d context features", len(dst), len(xs), len(ys), len(ctx))
	}
	if len(set.Bands) != m.bands {
		return fmt.Errorf("cuda context: a set of %d bands for a mirror of %d", len(set.Bands), m.bands)
	}
	var prog []int32
	for _, fi := range ctx {
		f := set.Features[fi]
		op, ok := opCodes[f.Base.Op]
		if !ok {
			return fmt.Errorf("cuda: feature %s has no GPU operation %q", f.Base.Name, f.Base.Op)
		}
		p := [7]int32{op, 0, 0, 0, 0, int32(f.Size / 2), map[string]int32{"mean": 0, "std": 1, "range": 2}[f.Stat]}
		for k, pos := range set.Inputs(fi) {
			p[1+k] = int32(pos)
		}
		prog = append(prog, p[:]...)
	}
	px, py := make([]int32, len(xs)), make([]int32, len(ys))
	for i := range xs {
		if xs[i] < 0 || xs[i] >= m.width || ys[i] < 0 || ys[i] >= m.height {
			return fmt.Errorf("cuda context: pixel (%d, %d) outside the %d×%d tile", xs[i], ys[i], m.width, m.height)
		}
		px[i], py[i] = int32(xs[i]), int32(ys[i])
	}
	if len(xs) == 0 || len(ctx) == 0 {
		return nil
	}
	return m.dev.Do(func() error {
		mem := m.dev.Pool()
		var st driver.Staging
		table := st.Ptr(driver.Put(mem, "context.table", refl[:]))
		dx := st.Ptr(driver.Put(mem, "context.xs", px))
		dy := st.Ptr(driver.Put(mem, "context.ys", py))
		dp := st.Ptr(driver.Put(mem, "context.prog", prog))
		out := st.Buf(mem.Get("context.out", uint64(len(dst))*4))
		if st.Err != nil {
			return st.Err
		}
		if err := m.dev.Launch("context_at", int64(len(dst)), m.dn.Ptr, int32(m.width), int32(m.height), table, dx, dy, int64(len(xs)), dp, int32(len(ctx)), out.Ptr); err != nil {
			return err
		}
		if err := driver.Download(dst, driver.Buffer{Ptr: out.Ptr, Bytes: uint64(len(dst)) * 4}); err != nil {
			return err
		}
		// A drawn pixel's few values: layers' context features are mapped
		// to their units on the host, by ContextAt's own code.
		set.MapContextAt(dst)
		return nil
	})
}
