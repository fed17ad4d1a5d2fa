package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/pixel/composite"
)

// opCodes are the features kernels' operations (features.Op).
var opCodes = map[string]int32{"band": 0, "nd": 1, "evi": 2, "savi": 3, "bsi": 4, "context": 5, "shift": 6, "affine": 7}

// FeatureOp returns the code of a feature operation (a features.Op's
// name) in lulc's kernels.
func FeatureOp(op string) (int32, bool) {
	c, ok := opCodes[op]
	return c, ok
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
		var st driver.Staging
		in := st.Ptr(driver.Put(dev.Pool(), "median.in", flat))
		o := st.Buf(dev.Pool().Get("median.out", uint64(n)*4))
		c := st.Buf(dev.Pool().Get("median.count", uint64(n)))
		if st.Err != nil {
			return st.Err
		}
		if err := dev.Launch("median", int64(n), in, int32(len(dates)), int64(n), o.Ptr, c.Ptr); err != nil {
			return err
		}
		if err := driver.Download(dst, o); err != nil {
			return err
		}
		if count != nil {
			return driver.Download(count, c)
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
	// A mirror may hold more planes: a stack's layers, which come whole
	// (Mirror.WritePlanes).
	if into != nil && into.Mirror.bands < nplanes {
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
			if !ok || f.Op == "context" || f.Op == "shift" || f.Op == "affine" {
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
	if !dev.opt.UntouchedOutputs {
		// The copies down (down, below) fill out and count under the
		// device's composite lock: pages of them faulted in there, as a
		// process's first windows' were, cost 24 ms a window of its first
		// rows against 3 ms after, one window after another.
		for _, p := range out {
			touchPages(p)
		}
		touchPages(count)
	}
	// One window's composite at a time on a device: it holds the pool's
	// composite buffers from its set-up to its outputs' copy.
	var kernel func() error
	dev.composite.Lock()
	defer dev.composite.Unlock()
	var pdn, pplanes uint64
	var pout, pcount driver.Buffer
	var rects []rectOut
	// setUp sizes the buffers and sends the window's inputs up (owner
	// goroutine).
	setUp := func() error {
		m := dev.Pool()
		var st driver.Staging
		bdn := st.Buf(m.Get("composite.dn", uint64(nd*nb*n)*2))
		pdn = bdn.Ptr
		pplanes = st.Buf(m.Get("composite.planes", uint64(len(in.planes)+in.rawAt)*2)).Ptr
		pscl := st.Ptr(driver.Put(m, "composite.scl", in.scl))
		pdrop := st.Ptr(driver.Put(m, "composite.drop", dropped[:]))
		psc := st.Ptr(driver.Put(m, "composite.scale", in.scale))
		pof := st.Ptr(driver.Put(m, "composite.offset", in.offset))
		pnd := st.Ptr(driver.Put(m, "composite.nodata", in.nodata))
		pout = st.Buf(m.Get("composite.out", uint64(nplanes*n)*2))
		pcount = st.Buf(m.Get("composite.count", uint64(n)))
		ptprog := st.Ptr(driver.Put(m, "composite.tprog", tprog))
		ppcts := st.Ptr(driver.Put(m, "composite.pcts", pcts))
		psmask := st.Ptr(driver.Put(m, "composite.smask", smask))
		if st.Err == nil && dev.compStream == 0 {
			st.Err = driver.CreateStream(&dev.compStream)
		}
		if st.Err != nil {
			return st.Err
		}
		if err := driver.PutAt(pplanes, in.planes); err != nil {
			return err
		}
		for _, fb := range in.full {
			if err := driver.PutAt(pdn+uint64(2*fb.slot), fb.dn); err != nil {
				return err
			}
		}
		rects = make([]rectOut, len(in.raw))
		for i, rb := range in.raw {
			rects[i] = rectOut{r: rb.r, dst: pdn + uint64(2*rb.slot), cache: rb.coarse}
			if rb.coarse {
				rects[i].dst = pplanes + uint64(2*rb.at)
			}
		}
		kernel = func() error {
			grid, block, shared := dev.compositeLaunch(nd, n)
			return dev.LaunchGrid(0, "composite", [3]uint32{grid, 1, 1}, block, shared, pdn, pscl, int32(nd), int32(nb), int64(n), pdrop, psc, pof, pnd,
				math.Float64bits(qscale), math.Float64bits(qoffset), pout.Ptr, pcount.Ptr,
				ptprog, int32(nsrc), ppcts, int32(npct), psmask, int32(nseason))
		}
		return nil
	}
	// queue decodes what the window needs (or finds it in the tile
	// cache) and queues the resampling and the composite, all by the
	// null stream (owner goroutine).
	queue := func() error {
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
			if err := dev.LaunchAsync(0, "upsample_bilinear", int64(n), pplanes+uint64(2*cb.at), int32(p.X0), int32(p.Y0), int32(p.W), int32(p.H),
				int32(w.X), int32(w.Y), int32(w.W), int32(w.H), int32(w.K), int32(w.RasterW), int32(w.RasterH), int32(c.NoData), hasND,
				pdn+uint64(2*cb.slot)); err != nil {
				return err
			}
		}
		return kernel()
	}
	// onOwner queues the window and waits for it with wait, holding the
	// owner; should a tile decoded ahead have failed (every batch is
	// settled), its batch's tiles are out of the cache, and the window
	// runs again, decoding what it needs itself: a tile that is truly
	// bad then fails this window with its own error.
	onOwner := func(wait func() error) error {
		for try := 0; ; try++ {
			if err := queue(); err != nil {
				return err
			}
			if err := wait(); err != nil {
				return fmt.Errorf("run composite: %w", err)
			}
			if !dev.checkAhead() {
				return nil
			}
			if try == 1 {
				// The second try read tiles of another batch that failed.
				return errors.New("run composite: tiles decoded ahead failed twice over the window")
			}
		}
	}
	// down brings each band straight into its output plane, and the
	// counts, by stream s.
	down := func(s uintptr) error {
		for b := range out {
			if err := driver.GetOn(out[b], driver.Buffer{Ptr: pout.Ptr + uint64(2*b*n), Bytes: uint64(2 * n)}, s); err != nil {
				return err
			}
		}
		return driver.GetOn(count, pcount, s)
	}
	if dev.opt.WaitAll {
		// As before the streams were kept apart: the owner waits for the
		// whole device.
		return dev.Do(func() error {
			if err := setUp(); err != nil {
				return err
			}
			if err := onOwner(driver.Synchronize); err != nil {
				return err
			}
			if into != nil {
				if err := into.place(0, pout.Ptr, width, n, nplanes); err != nil {
					return err
				}
			}
			return down(0)
		})
	}
	// The owner queues the window and goes on with other work (another
	// tile's context windows) while the window waits for its composite
	// beside it.
	var ev driver.Event
	var pending []*aheadCheck
	if err := dev.Do(func() error {
		if err := setUp(); err != nil {
			return err
		}
		if err := queue(); err != nil {
			return err
		}
		// The batches decoded ahead whose tiles the composite read: the
		// null stream waited for them, so their statuses are on the
		// host when it ends.
		pending = slices.Clone(dev.waited)
		var err error
		if ev, err = dev.NewEvent(); err != nil {
			return err
		}
		if err := ev.Record(0); err != nil {
			ev.Destroy()
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	waited := dev.Beside(ev.Wait)
	failed := false
	settled := dev.Do(func() error {
		ev.Destroy()
		// This settles them, unless DecodeAhead did.
		for _, c := range pending {
			dev.settle(c)
			failed = failed || c.bad != ""
		}
		return nil
	})
	if err := errors.Join(waited, settled); err != nil {
		return fmt.Errorf("run composite: %w", err)
	}
	if failed {
		// A tile the composite found in the cache failed: the window
		// runs again on the owner, as before the waits moved beside it,
		// so that no batch queued meanwhile lends it tiles whose
		// statuses are still unknown.
		if err := dev.Do(func() error { return onOwner(func() error { return driver.SyncStream(0) }) }); err != nil {
			return err
		}
	}
	if into != nil {
		// The planes go into the mirror by the composite stream, ahead of
		// the copy down: once the window is on the host, it is in the
		// mirror too, so a prediction that reads the mirror's windows as
		// the host's rows become whole reads placed pixels.
		if err := dev.Do(func() error { return into.place(dev.compStream, pout.Ptr, width, n, nplanes) }); err != nil {
			return err
		}
	}
	// By the device's composite stream, which waits for nothing the
	// owner queues.
	return dev.Beside(func() error { return down(dev.compStream) })
}
