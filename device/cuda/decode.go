package cuda

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/decode"
)

// Decodable says whether the device decodes tiles of format f. Others
// (ZSTD, LZW, JPEG, floating-point predictor, other sample sizes) are
// decoded on the host.
func Decodable(f decode.Format) bool {
	return (f.Compression == "DEFLATE" || f.Compression == "NONE") && (f.Predictor == 1 || f.Predictor == 2) &&
		(f.SampleBytes == 1 || f.SampleBytes == 2) && f.W > 0 && f.H > 0
}

// inflateWarps is how many warps, one per tile, a block of the inflate
// kernel holds; inflateShared is the shared memory each warp's Huffman
// tables take (sizeof(HuffTables) in lulc.cu, rounded up).
const inflateWarps = 4

const inflateShared = 3712

// inflateStatus names the inflate kernel's status codes.
var inflateStatus = []string{"ok", "bad zlib header", "bad block", "bad Huffman code", "distance beyond the start",
	"stream ends early", "stream ends before the tile"}

// packedTiles is a batch of compressed tiles laid out for the device: each
// starts 4-byte aligned, and 8 zero bytes follow the last, so that the
// kernel's word reads never leave the buffer.
type packedTiles struct {
	data []byte
	off  []uint64
	size []uint32
}

func packTiles(tiles [][]byte) (packedTiles, error) {
	p := packedTiles{off: make([]uint64, len(tiles)), size: make([]uint32, len(tiles))}
	total := 0
	for i, t := range tiles {
		if len(t) >= 1<<32 {
			return p, fmt.Errorf("cuda decode: tile %d has %d bytes", i, len(t))
		}
		p.off[i] = uint64(total)
		p.size[i] = uint32(len(t))
		total += (len(t) + 3) &^ 3
	}
	p.data = make([]byte, total+8)
	for i, t := range tiles {
		copy(p.data[p.off[i]:], t)
	}
	return p, nil
}

// DecodeTiles decodes a batch of tiles of one format on the device and
// returns their samples in host byte order, tile after tile (f.W × f.H
// samples of f.SampleBytes each). Its bytes equal decode.Tile's for every
// tile; a tile the device cannot decode is an error that names it.
func DecodeTiles(dev *Device, tiles [][]byte, f decode.Format) ([]byte, error) {
	if !Decodable(f) {
		return nil, fmt.Errorf("cuda decode: %s with predictor %d and %d-byte samples is not decoded on the device", f.Compression, f.Predictor, f.SampleBytes)
	}
	packed, err := packTiles(tiles)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(tiles)*f.TileBytes())
	err = dev.Do(func() error {
		b, err := dev.decodeTiles(packed, f)
		if err != nil {
			return err
		}
		return driver.Download(out, b)
	})
	return out, err
}

// DecodeTimes is how long decoding a batch took on the device: copying
// the compressed bytes in, the kernels, and copying the samples out.
type DecodeTimes struct {
	In, Kernels, Out time.Duration
	Compressed       int64 // bytes that crossed to the device
	Decoded          int64 // bytes of samples
}

// TimeDecodeTiles decodes the batch reps times after a warm-up and returns
// the median of each part, timed with CUDA events, with warps tiles to a
// block of the inflate kernel (1–12: their Huffman tables share 48 KiB).
func TimeDecodeTiles(dev *Device, tiles [][]byte, f decode.Format, reps, warps int) (DecodeTimes, error) {
	if !Decodable(f) {
		return DecodeTimes{}, fmt.Errorf("cuda decode: %s is not decoded on the device", f.Compression)
	}
	if warps < 1 || warps > 12 {
		return DecodeTimes{}, fmt.Errorf("cuda decode: %d warps a block (1–12)", warps)
	}
	packed, err := packTiles(tiles)
	if err != nil {
		return DecodeTimes{}, err
	}
	out := make([]byte, len(tiles)*f.TileBytes())
	t := DecodeTimes{Compressed: int64(len(packed.data)), Decoded: int64(len(out))}
	err = dev.Do(func() error {
		b, dst, err := dev.outTiles(len(tiles), f)
		if err != nil {
			return err
		}
		var s stagedTiles
		in, err := driver.TimeIt(reps, func() error {
			s, err = dev.stageTiles(packed, f, dst)
			return err
		})
		if err != nil {
			return err
		}
		kern, err := driver.TimeIt(reps, func() error { return dev.runDecode(s, f, warps) })
		if err != nil {
			return err
		}
		o, err := driver.TimeIt(reps, func() error { return driver.Download(out, b) })
		t.In, t.Kernels, t.Out = ms(in), ms(kern), ms(o)
		return err
	})
	return t, err
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// stagedTiles is a batch on the device, ready for runDecode: the
// compressed bytes, their offsets and sizes, and where each tile's samples
// go (an array of device pointers: a tile may land in a scratch buffer or
// in a slot of the tile cache).
type stagedTiles struct {
	n                         int
	src, srcOff, srcSize, dst uint64
}

// decodeTiles stages and decodes a packed batch into the pool's
// "decode.out" buffer, tile after tile (on the owner goroutine).
func (d *Device) decodeTiles(p packedTiles, f decode.Format) (driver.Buffer, error) {
	out, dst, err := d.outTiles(len(p.off), f)
	if err != nil {
		return driver.Buffer{}, err
	}
	s, err := d.stageTiles(p, f, dst)
	if err != nil {
		return driver.Buffer{}, err
	}
	return out, d.runDecode(s, f, inflateWarps)
}

// outTiles returns the pool's "decode.out" buffer sized for n tiles of
// format f, and each tile's address in it.
func (d *Device) outTiles(n int, f decode.Format) (driver.Buffer, []uint64, error) {
	tb := uint64(f.TileBytes())
	out, err := d.Pool().Get("decode.out", uint64(n)*tb)
	if err != nil {
		return driver.Buffer{}, nil, err
	}
	dst := make([]uint64, n)
	for i := range dst {
		dst[i] = out.Ptr + uint64(i)*tb
	}
	return out, dst, nil
}

// stageTiles copies a packed batch to the device, tile i to be decoded
// into device address dst[i].
func (d *Device) stageTiles(p packedTiles, f decode.Format, dst []uint64) (stagedTiles, error) {
	n := len(p.off)
	tb := uint64(f.TileBytes())
	m := d.Pool()
	var st driver.Staging
	s := stagedTiles{n: n}
	s.dst = st.Ptr(driver.Put(m, "decode.dst", dst))
	if st.Err != nil || n == 0 {
		return s, st.Err
	}
	if f.Compression == "NONE" {
		for i, o := range p.off {
			if uint64(p.size[i]) < tb {
				return s, fmt.Errorf("cuda decode: tile %d has %d bytes, not %d", i, p.size[i], tb)
			}
			if err := driver.PutAt(dst[i], p.data[o:o+tb]); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	s.src = st.Ptr(driver.Put(m, "decode.src", p.data))
	s.srcOff = st.Ptr(driver.Put(m, "decode.srcoff", p.off))
	s.srcSize = st.Ptr(driver.Put(m, "decode.srcsize", p.size))
	return s, st.Err
}

// stageOnDevice stages compressed tiles whose bytes are on the device
// already (src, laid out as p.data): only their offsets, sizes and
// destinations are copied, into the pool's buffers (for work on the
// null stream).
func (d *Device) stageOnDevice(p packedTiles, src driver.Buffer, dst []uint64) (stagedTiles, error) {
	var st driver.Staging
	s := stagedTiles{n: len(p.off), src: src.Ptr}
	s.dst = st.Ptr(driver.Put(d.Pool(), "ahead.dst", dst))
	s.srcOff = st.Ptr(driver.Put(d.Pool(), "ahead.srcoff", p.off))
	s.srcSize = st.Ptr(driver.Put(d.Pool(), "ahead.srcsize", p.size))
	return s, st.Err
}

// heldBytes is the size of a held buffer for compressed tiles of data
// bytes, n of them: the bytes, then room for a batch's tables and
// statuses (heldTables), so that a batch decoded on the rows' stream
// shares no buffer with any other.
func heldBytes(data, n int) uint64 { return heldTables(data) + uint64(n)*(8+8+4+4) }

// heldTables is where a held buffer's tables begin: after the tiles'
// bytes, 8-byte aligned.
func heldTables(data int) uint64 { return (uint64(data) + 7) &^ 7 }

// stageHeld stages the tiles p selects from the held buffer h: their
// offsets, sizes and destinations go into h's room for tables, and
// status is where the batch's statuses go.
func (d *Device) stageHeld(p packedTiles, h *heldBuffer, dst []uint64) (s stagedTiles, status uint64, err error) {
	n := uint64(len(p.off))
	at := h.buf.Ptr + h.tables
	s = stagedTiles{n: len(p.off), src: h.buf.Ptr, dst: at, srcOff: at + 8*n, srcSize: at + 16*n}
	status = at + 20*n
	if s.srcSize+4*n+4*n > h.buf.Ptr+h.buf.Bytes {
		return s, 0, fmt.Errorf("cuda decode ahead: %d tiles in a held buffer with room for fewer", n)
	}
	if err := driver.PutAt(s.dst, dst); err != nil {
		return s, 0, err
	}
	if err := driver.PutAt(s.srcOff, p.off); err != nil {
		return s, 0, err
	}
	return s, status, driver.PutAt(s.srcSize, p.size)
}

// runDecode inflates a staged batch, warps tiles to a block, checks every
// tile's status, and turns the bytes into samples (byte order, predictor).
func (d *Device) runDecode(s stagedTiles, f decode.Format, warps int) error {
	if s.n == 0 {
		return nil
	}
	if f.Compression != "NONE" {
		status, err := d.launchInflate(s, f, warps, "decode.status", s.n)
		if err != nil {
			return err
		}
		codes := make([]int32, s.n)
		if err := driver.Download(codes, status); err != nil {
			return err
		}
		if i, what := firstBad(codes); i >= 0 {
			return &badTile{i: i, what: what}
		}
	}
	return d.launchUnpack(s, f)
}

// badTile is runDecode's error for a tile the inflate kernel refused: its
// place in the batch and the kernel's status.
type badTile struct {
	i    int
	what string
}

func (e *badTile) Error() string { return fmt.Sprintf("cuda decode: tile %d: %s", e.i, e.what) }

// hostVerdict says, for a tile the device refused, whether the host's
// decoder takes the same bytes (then they were whole, and the device's
// copy or its reading of them was not) or refuses them too.
func hostVerdict(raw []byte, f decode.Format) string {
	dst := make([]uint16, f.W*f.H)
	if err := decode.Tile(dst, raw, f.Compression, f.Predictor, f.BigEndian, f.W, f.H); err != nil {
		return "the host's decoder refuses the same bytes too: " + err.Error()
	}
	return "the host's decoder takes the same bytes: the device's copy of them differed"
}

// launchInflate queues the inflate kernel on the null stream over a staged
// batch, each tile's status into the pool's buffer named status, which
// holds at least room statuses.
func (d *Device) launchInflate(s stagedTiles, f decode.Format, warps int, status string, room int) (driver.Buffer, error) {
	b, err := d.Pool().Get(status, uint64(4*max(s.n, room)))
	if err != nil {
		return b, err
	}
	return b, d.launchInflateOn(0, s, f, warps, b.Ptr)
}

// launchInflateOn queues the inflate kernel on stream over a staged
// batch, each tile's status to device address status.
func (d *Device) launchInflateOn(stream uintptr, s stagedTiles, f decode.Format, warps int, status uint64) error {
	return d.LaunchGrid(stream, "inflate", [3]uint32{uint32((s.n + warps - 1) / warps), 1, 1}, uint32(32*warps), uint32(warps*inflateShared),
		s.src, s.srcOff, s.srcSize, s.dst, int32(f.TileBytes()), int32(s.n), status)
}

// launchUnpack queues tiff_unpack on the null stream where the format
// needs it: byte order and predictor.
func (d *Device) launchUnpack(s stagedTiles, f decode.Format) error { return d.launchUnpackOn(0, s, f) }

// launchUnpackOn is launchUnpack on stream. It does not wait for the
// kernel: whatever reads the tiles follows it on the stream, or waits
// for an event recorded after it.
func (d *Device) launchUnpackOn(stream uintptr, s stagedTiles, f decode.Format) error {
	if f.Predictor == 2 || f.BigEndian && f.SampleBytes == 2 {
		big := int32(0)
		if f.BigEndian {
			big = 1
		}
		return d.LaunchAsync(stream, "tiff_unpack", int64(s.n*f.H), s.dst, int32(s.n), int32(f.W), int32(f.H),
			int32(f.SampleBytes), big, int32(f.Predictor))
	}
	return nil
}

// firstBad returns the first tile whose status is not ok and what it
// says, or -1.
func firstBad(codes []int32) (int, string) {
	for i, c := range codes {
		if c != 0 {
			what := fmt.Sprintf("status %d", c)
			if int(c) < len(inflateStatus) {
				what = inflateStatus[c]
			}
			return i, what
		}
	}
	return -1, ""
}

// aheadCheck is a batch decoded ahead whose tiles' statuses are on their
// way to the host: copied after the inflate kernel, on the stream the
// batch was decoded on, into pinned memory, with event recorded after
// the copy. keys are the cache's keys of its tiles, in the batch's order.
// Once read (settle), done is set and bad says the first tile that
// failed ("" when none).
type aheadCheck struct {
	status pinnedStatus
	event  driver.Event
	keys   []string
	done   bool
	bad    string
}

// pinnedStatus is pinned host memory for n statuses.
type pinnedStatus struct {
	ptr unsafe.Pointer
	n   int
}

// decodeLater inflates and unpacks a batch decoded ahead into the tile
// cache (keys, claimed for it) on stream without waiting for the
// kernels, each tile's status to device address status (on the null
// stream, 0 puts them in the pool's buffer): their statuses follow them
// to the host, read once their event has completed (DecodeAhead awaits
// it beside the owner, then settles the batch), or once a composite that
// read its tiles, and so waited for the event, has ended (checkAhead),
// whichever comes first. The owner goroutine is meanwhile free for
// other work, context windows of another tile among it.
//
// On a stream of its own (the rows' stream), a row's inflate runs beside
// the composites of the row before it, which the null stream carries;
// the inflate, one warp a tile, lasts as long as its slowest tile and
// leaves most of the device idle. Its slots may have been evicted from
// tiles that a composite queued before still reads, so the stream first
// waits for the null stream's work so far.
func (d *Device) decodeLater(s stagedTiles, f decode.Format, keys []string, status uint64, stream uintptr) (*aheadCheck, error) {
	if s.n == 0 {
		return nil, nil
	}
	if f.Compression == "NONE" {
		return nil, d.launchUnpackOn(stream, s, f)
	}
	if stream != 0 {
		after, err := d.NewEvent()
		if err != nil {
			return nil, err
		}
		err = after.Record(0)
		if err == nil {
			err = after.WaitOn(stream)
		}
		after.Destroy()
		if err != nil {
			return nil, err
		}
	}
	if status == 0 {
		// Room for a row of many dates, so that the buffer is seldom
		// replaced while a copy from it may be queued.
		b, err := d.Pool().Get("ahead.status", uint64(4*max(s.n, 1<<14)))
		if err != nil {
			return nil, err
		}
		status = b.Ptr
	}
	// Once kernels are queued on the rows' stream, a failure waits for
	// them: the caller frees the batch's slots, which windows on the
	// null stream may then claim.
	fail := func(err error) (*aheadCheck, error) {
		if stream != 0 {
			err = errors.Join(err, driver.SyncStream(stream))
		}
		return nil, err
	}
	if err := d.launchInflateOn(stream, s, f, inflateWarps, status); err != nil {
		return fail(err)
	}
	if err := d.launchUnpackOn(stream, s, f); err != nil {
		return fail(err)
	}
	c := &aheadCheck{keys: keys}
	for i, sp := range d.spare {
		if sp.n >= s.n {
			c.status = sp
			d.spare = append(d.spare[:i], d.spare[i+1:]...)
			break
		}
	}
	if c.status.ptr == nil {
		c.status.n = max(s.n, 1024)
		if err := driver.AllocHost(&c.status.ptr, uint64(4*c.status.n)); err != nil {
			return fail(err)
		}
	}
	var err error
	if c.event, err = d.NewEvent(); err != nil {
		d.spare = append(d.spare, c.status)
		return fail(err)
	}
	if err := driver.CopyToHostAsync(c.status.ptr, status, uint64(4*s.n), stream); err == nil {
		err = c.event.Record(stream)
	}
	if err != nil {
		// The copy may be queued: the pinned buffer goes back to the
		// spares only once the stream is done with it.
		_, err = fail(err)
		d.spare = append(d.spare, c.status)
		c.event.Destroy()
		return nil, err
	}
	d.checks = append(d.checks, c)
	return c, nil
}

// settle reads a batch's statuses, once its event has completed, unless
// done already (owner goroutine): a batch with a tile that failed has its
// tiles forgotten by the cache, so that no window finds them. The
// pinned buffer goes back to the spares; the event stays for DecodeAhead,
// which waits for it and frees it.
func (d *Device) settle(c *aheadCheck) {
	if c.done {
		return
	}
	c.done = true
	codes := unsafe.Slice((*int32)(c.status.ptr), len(c.keys))
	if i, what := firstBad(codes); i >= 0 {
		c.bad = fmt.Sprintf("tile %s: %s", c.keys[i], what)
		if d.tiles != nil {
			for _, key := range c.keys {
				d.tiles.forget(key)
			}
		}
	}
	d.spare = append(d.spare, c.status)
	for i, o := range d.checks {
		if o == c {
			d.checks = append(d.checks[:i], d.checks[i+1:]...)
			break
		}
	}
}

// checkAhead settles the batches decoded ahead whose tiles the last
// decodeRects took from the cache, for which it had the null stream
// wait: it must follow a wait for the null stream. It says whether any
// tile failed: the composite that read them must run again, decoding
// what it needs itself.
func (d *Device) checkAhead() bool {
	failed := false
	for _, c := range d.waited {
		d.settle(c)
		failed = failed || c.bad != ""
	}
	d.waited = nil
	return failed
}

// rowStream returns the stream rows decoded ahead go by: a non-blocking
// stream of the device's own, made on first use, or the null stream
// with Options.RowsOnNull (owner goroutine).
func (d *Device) rowStream() (uintptr, error) {
	if d.opt.RowsOnNull {
		return 0, nil
	}
	if d.rows == 0 {
		if err := driver.CreateStream(&d.rows); err != nil {
			return 0, err
		}
	}
	return d.rows, nil
}
