package cuda

import (
	"fmt"
	"math"

	"github.com/lulc/lulc/learn/sampling"
)

// Mirror is a tile's composite (its bands' digital numbers, a plane each)
// and its labels in device memory, filled window by window as the device
// composites them (CompositeMirrored), so that the tile's samples are
// drawn on the device (DrawCount, DrawCollect) without sending the tile
// up again.
type Mirror struct {
	dev                  *Device
	width, height, bands int
	dn, labels           Buffer
}

// NewMirror allocates a mirror of a width × height tile of bands bands.
func NewMirror(dev *Device, width, height, bands int) (*Mirror, error) {
	if width <= 0 || height <= 0 || bands <= 0 || width >= 1<<20 || height >= 1<<20 {
		return nil, fmt.Errorf("cuda mirror: a %d × %d tile of %d bands", width, height, bands)
	}
	m := &Mirror{dev: dev, width: width, height: height, bands: bands}
	n := uint64(width) * uint64(height)
	err := dev.Do(func() error {
		var err error
		if m.dn, err = alloc(n * uint64(bands) * 2); err != nil {
			return err
		}
		if m.labels, err = alloc(n); err != nil {
			m.dn.free()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda mirror of %d × %d × %d: %w", width, height, bands, err)
	}
	return m, nil
}

// Close frees the mirror's device memory.
func (m *Mirror) Close() {
	m.dev.Do(func() error {
		m.dn.free()
		m.labels.free()
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

// place copies a window's composite, at device address out (the bands'
// planes of n pixels one after the other), and its labels into the
// mirror (owner goroutine).
func (w *MirrorWindow) place(out uint64, width, n int) error {
	m := w.Mirror
	h := n / width
	if width <= 0 || n != width*h || w.X < 0 || w.Y < 0 || w.X+width > m.width || w.Y+h > m.height || len(w.Labels) != n {
		return fmt.Errorf("cuda mirror: a %d × %d window at (%d, %d) with %d labels in a %d × %d tile", width, h, w.X, w.Y, len(w.Labels), m.width, m.height)
	}
	plane := int64(m.width) * int64(m.height)
	if err := m.dev.launchAsync(0, "place_u16", int64(n*m.bands), out, int32(width), int32(h), int32(m.bands),
		m.dn.ptr, int32(m.width), plane, int32(w.X), int32(w.Y)); err != nil {
		return err
	}
	lab, err := put(m.dev.mem, "mirror.labels", w.Labels)
	if err != nil {
		return err
	}
	return m.dev.launch("place_u8", int64(n), lab, int32(width), int32(h), m.labels.ptr, int32(m.width), int32(w.X), int32(w.Y))
}

// DrawNone marks a code outside the scheme in a rule's Reservoir.
const DrawNone = math.MaxUint16

// rule stages a rule's tables on the device (owner goroutine).
func (m *Mirror) rule(r *sampling.DeviceRule) (res, missing uint64, err error) {
	var st staging
	res = st.ptr(put(m.dev.mem, "draw.reservoir", r.Reservoir[:]))
	missing = st.ptr(put(m.dev.mem, "draw.missing", r.Missing[:]))
	if r.Block <= 0 || r.Bits == 0 || r.Bits > 16 || r.Buffer < 0 || r.Buffer >= r.Block {
		return 0, 0, fmt.Errorf("cuda draw: block %d, buffer %d, %d key bits", r.Block, r.Buffer, r.Bits)
	}
	return res, missing, st.err
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
		var st staging
		dh := st.ptr(m.dev.mem.zeroed("draw.hist", uint64(4*len(hist))))
		// The outside counts by code, then the buffered count.
		doff := st.ptr(m.dev.mem.zeroed("draw.off", 257*8))
		if st.err != nil {
			return st.err
		}
		n := int64(m.width) * int64(m.height)
		if err := m.dev.launch("draw_count", n, m.labels.ptr, m.dn.ptr, int32(m.bands), int32(m.width), n, res, missing,
			r.SplitBase, r.KeyBase, int32(r.Block), int32(r.Buffer), math.Float64bits(r.ValidationFraction), int32(r.Bits), dh, doff); err != nil {
			return err
		}
		if err := download(hist, Buffer{ptr: dh, bytes: uint64(4 * len(hist))}); err != nil {
			return err
		}
		var counts [257]uint64
		if err := download(counts[:], Buffer{ptr: doff, bytes: 257 * 8}); err != nil {
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
		var st staging
		dbound := st.ptr(put(m.dev.mem, "draw.bound", bound))
		dstart := st.ptr(put(m.dev.mem, "draw.start", start))
		dfill := st.ptr(m.dev.mem.zeroed("draw.fill", uint64(4*((len(count)+1)&^1))))
		key := st.buf(m.dev.mem.get("draw.key", uint64(8*max(total, 1))))
		id := st.buf(m.dev.mem.get("draw.id", uint64(8*max(total, 1))))
		rs := st.buf(m.dev.mem.get("draw.res", uint64(2*max(total, 1))))
		dn := st.buf(m.dev.mem.get("draw.dn", uint64(2*max(total*m.bands, 1))))
		if st.err != nil {
			return st.err
		}
		n := int64(m.width) * int64(m.height)
		if err := m.dev.launch("draw_collect", n, m.labels.ptr, m.dn.ptr, int32(m.bands), int32(m.width), n, res, missing,
			r.SplitBase, r.KeyBase, int32(r.Block), int32(r.Buffer), math.Float64bits(r.ValidationFraction), r.Input, dbound, dstart, dfill,
			key.ptr, id.ptr, rs.ptr, dn.ptr); err != nil {
			return err
		}
		fill := make([]uint32, len(count))
		if err := download(fill, Buffer{ptr: dfill, bytes: uint64(4 * len(fill))}); err != nil {
			return err
		}
		for k, c := range count {
			if int(fill[k]) != c {
				return fmt.Errorf("cuda draw: reservoir %d collected %d candidates, counted %d", k, fill[k], c)
			}
		}
		for _, f := range []error{download(d.Key, key), download(d.ID, id), download(d.Reservoir, rs), download(d.DN, dn)} {
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
// composite (CompositeMirrored places its own windows).
func (m *Mirror) Write(x, y, w, h int, planes [][]uint16, labels []uint8) error {
	n := w * h
	if len(planes) != m.bands {
		return fmt.Errorf("cuda mirror: %d bands into a mirror of %d", len(planes), m.bands)
	}
	return m.dev.Do(func() error {
		buf, err := m.dev.mem.get("mirror.window", uint64(2*n*m.bands))
		if err != nil {
			return err
		}
		for b, p := range planes {
			if len(p) != n {
				return fmt.Errorf("cuda mirror: band %d has %d pixels for a %d × %d window", b, len(p), w, h)
			}
			if err := putAt(buf.ptr+uint64(2*b*n), p); err != nil {
				return err
			}
		}
		win := MirrorWindow{Mirror: m, X: x, Y: y, Labels: labels}
		return win.place(buf.ptr, w, n)
	})
}
