package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/decode"
)

// The tile cache takes a quarter of the device's free memory when it is
// made, within these bounds. The reader ahead keeps up to four rows of
// windows' tiles decoded here for the windows to take: a 24-date full
// tile's row holds about 10 GB of them, and under an 8 GiB bound the rows
// evicted each other's tiles before their windows came, which the windows
// then decoded again (measured: docs/benchmarks.md, "A year of dates").
const (
	minTileCacheBytes = 1 << 30
	maxTileCacheBytes = 32 << 30
)

// tileCache keeps decoded tiles on the device between calls: a tile that
// the rectangles of several windows share (the one-pixel halo of an
// upsampled band reaches into the neighbouring tiles) is sent and decoded
// once. Slots of one tile size share one allocation; the least recently
// used tile makes room, never one the current call uses. Used on the owner
// goroutine only.
type tileCache struct {
	slab      driver.Buffer
	slotBytes uint64
	slot      map[string]int // key → slot
	key       []string       // slot → key, "" when free
	used      []uint64       // slot → the call that last used it
	// batch is, by slot, the batch decoded ahead that fills it, until
	// the batch is settled: a window that reads the slot has the null
	// stream wait for the batch's event first (rows are decoded on a
	// stream of their own), and no claim evicts it meanwhile.
	batch []*aheadCheck
	free  []int
	call  uint64
}

func newTileCache(slotBytes uint64) (*tileCache, error) {
	free, _, err := driver.MemGetInfo()
	if err != nil {
		return nil, err
	}
	return newTileCacheSlots(slotBytes, int(min(maxTileCacheBytes, max(minTileCacheBytes, free/4))/slotBytes))
}

// newTileCacheSlots makes a cache of n slots of slotBytes bytes.
func newTileCacheSlots(slotBytes uint64, n int) (*tileCache, error) {
	if n < 1 {
		return nil, fmt.Errorf("cuda tile cache: tiles of %d bytes", slotBytes)
	}
	b, err := driver.Alloc(uint64(n) * slotBytes)
	if err != nil {
		return nil, err
	}
	c := &tileCache{slab: b, slotBytes: slotBytes, slot: map[string]int{}, key: make([]string, n), used: make([]uint64, n), batch: make([]*aheadCheck, n), free: make([]int, n)}
	for i := range c.free {
		c.free[i] = n - 1 - i
	}
	return c, nil
}

// lookup returns the address of the decoded tile key, marking it used by
// the current call.
func (c *tileCache) lookup(key string) (uint64, bool) {
	i, ok := c.slot[key]
	if !ok {
		return 0, false
	}
	c.used[i] = c.call
	return c.slab.Ptr + uint64(i)*c.slotBytes, true
}

// find returns the address of decoded tile key when the cache holds it
// (tiles of tb bytes only; a nil cache holds none), marking it used.
func (c *tileCache) find(key string, tb uint64) (uint64, bool) {
	if c == nil || c.slotBytes != tb {
		return 0, false
	}
	return c.lookup(key)
}

// pending returns the unsettled batch decoded ahead that fills the
// cached tile key, or nil.
func (c *tileCache) pending(key string) *aheadCheck {
	if c == nil {
		return nil
	}
	i, ok := c.slot[key]
	if !ok || c.batch[i] == nil || c.batch[i].done {
		return nil
	}
	return c.batch[i]
}

// filledBy records that batch b, decoded ahead, fills the slot of the
// cached tile key.
func (c *tileCache) filledBy(key string, b *aheadCheck) {
	if i, ok := c.slot[key]; ok {
		c.batch[i] = b
	}
}

// claim returns a slot for tile key; false when every slot holds a tile
// the current call uses. When none is free, the least recently used
// quarter of the tiles is evicted at once (a sort, not a scan per claim);
// a tile whose batch decoded ahead is unsettled stays, since its kernels
// may still be writing it.
func (c *tileCache) claim(key string) (uint64, bool) {
	if len(c.free) == 0 {
		var old []int
		for i, u := range c.used {
			if u < c.call && (c.batch[i] == nil || c.batch[i].done) {
				old = append(old, i)
			}
		}
		slices.SortFunc(old, func(a, b int) int { return cmp.Compare(c.used[a], c.used[b]) })
		old = old[:min(len(old), max(1, len(c.key)/4))]
		for _, i := range old {
			delete(c.slot, c.key[i])
			c.key[i], c.used[i], c.batch[i] = "", 0, nil
		}
		slices.Reverse(old)
		c.free = old
	}
	if len(c.free) == 0 {
		return 0, false
	}
	i := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.key[i], c.slot[key], c.used[i] = key, i, c.call
	return c.slab.Ptr + uint64(i)*c.slotBytes, true
}

// forget drops a tile whose decoding failed.
func (c *tileCache) forget(key string) {
	if i, ok := c.slot[key]; ok {
		delete(c.slot, key)
		c.key[i], c.used[i], c.batch[i] = "", 0, nil
		c.free = append(c.free, i)
	}
}

func (c *tileCache) release() {
	if c != nil {
		c.slab.Free()
	}
}

// rectOut is a rectangle to decode on the device into dst (16-bit
// samples, W×H); cache says whether its tiles are worth keeping for later
// calls.
type rectOut struct {
	r     *decode.Rect
	dst   uint64
	cache bool
}

// decodeRects fills every rectangle from its compressed tiles (on the
// owner goroutine): the tiles not in the cache are decoded in one batch
// per format, into cache slots or scratch, then gather_tiles copies each
// rectangle out of its tiles.
func (d *Device) decodeRects(rects []rectOut) error {
	// d.waited is this call's alone, reset before any return: a batch
	// left there by a call that failed before the null stream waited for
	// it must not be settled by a later composite.
	d.waited = d.waited[:0]
	if len(rects) == 0 {
		return nil
	}
	d.tileCall++
	if d.tiles != nil {
		d.tiles.call = d.tileCall
	}
	formats, scratch, err := d.decodeScratch(rects)
	if err != nil {
		return err
	}
	type pending struct {
		raw    [][]byte
		keys   []string
		dst    []uint64
		cached []bool
		// Tiles whose compressed bytes the device holds (Held), in the
		// buffer of one batch decoded ahead: where each lies in it.
		held     *heldBuffer
		off      []uint64
		size     []uint32
		heldFrom decode.Format
	}
	batches := map[decode.Format]*pending{}
	// Held tiles not in the cache, by the buffer holding them.
	var fromHeld []*pending
	heldBatches := map[*heldBuffer]*pending{}
	// forget drops the slots claimed for a batch's tiles, which will not
	// be decoded (after an error).
	forget := func(b *pending) {
		for k, key := range b.keys {
			if b.cached[k] {
				d.tiles.forget(key)
			}
		}
	}
	forgetAll := func() {
		for _, b := range batches {
			forget(b)
		}
		for _, b := range fromHeld {
			forget(b)
		}
	}
	where := map[string]uint64{} // tile key → its decoded address
	used := map[decode.Format]int{}
	tables := make([][]uint64, len(rects))
	for ri, ro := range rects {
		r, f := ro.r, ro.r.Format
		tb := uint64(f.TileBytes())
		keep := ro.cache && d.cacheFor(tb)
		tables[ri] = make([]uint64, len(r.Tiles)) // 0: never written, gather_tiles fills it
		for j := range r.TH {
			for i := range r.TW {
				raw := r.Tiles[j*r.TW+i]
				if raw == nil {
					continue
				}
				key := TileKey(r, i, j)
				at, ok := where[key]
				if !ok {
					if at, ok = d.tiles.find(key, tb); ok {
						if c := d.tiles.pending(key); c != nil && !slices.Contains(d.waited, c) {
							d.waited = append(d.waited, c)
						}
					}
				}
				if !ok {
					cached := false
					if keep {
						at, cached = d.tiles.claim(key)
					}
					if !cached {
						at = scratch[f] + uint64(used[f])*tb
						used[f]++
					}
					if len(raw) == 0 {
						// Handed over by DecodeAhead: decoded from the
						// device's copy of its compressed bytes.
						h, ok := d.held[key]
						if !ok {
							if cached {
								d.tiles.forget(key)
							}
							forgetAll()
							return fmt.Errorf("cuda decode %s tile %d: its compressed bytes were handed to the device, which no longer holds them", r.File, r.Tile(i, j))
						}
						b := heldBatches[h.buf]
						if b == nil {
							b = &pending{held: h.buf, heldFrom: f}
							heldBatches[h.buf] = b
							fromHeld = append(fromHeld, b)
						}
						b.keys, b.dst, b.cached = append(b.keys, key), append(b.dst, at), append(b.cached, cached)
						b.off, b.size = append(b.off, h.off), append(b.size, h.size)
						where[key] = at
						tables[ri][j*r.TW+i] = at
						continue
					}
					b := batches[f]
					if b == nil {
						b = &pending{}
						batches[f] = b
					}
					b.raw, b.keys, b.dst, b.cached = append(b.raw, raw), append(b.keys, key), append(b.dst, at), append(b.cached, cached)
				}
				where[key] = at
				tables[ri][j*r.TW+i] = at
			}
		}
	}
	for _, f := range formats {
		b := batches[f]
		if b == nil {
			continue
		}
		packed, err := packTiles(b.raw)
		if err != nil {
			forgetAll()
			return err
		}
		s, err := d.stageTiles(packed, f, b.dst)
		if err == nil {
			err = d.runDecode(s, f, inflateWarps)
		}
		if err != nil {
			forgetAll() // those decoded already too: simpler, and harmless
			var bad *badTile
			if errors.As(err, &bad) {
				// Which tile, and whether its bytes were whole.
				return fmt.Errorf("cuda decode %s (%d bytes from the host): %s; %s", b.keys[bad.i], len(b.raw[bad.i]), bad.what, hostVerdict(b.raw[bad.i], f))
			}
			return err
		}
	}
	for _, b := range fromHeld {
		s, err := d.stageOnDevice(packedTiles{off: b.off, size: b.size}, b.held.buf, b.dst)
		if err == nil {
			err = d.runDecode(s, b.heldFrom, inflateWarps)
		}
		if err != nil {
			forgetAll()
			var bad *badTile
			if errors.As(err, &bad) {
				// The device's copy of the tile's bytes, read back for the
				// host's decoder.
				raw := make([]byte, b.size[bad.i])
				verdict := "its bytes could not be read back"
				if derr := driver.Download(raw, driver.Buffer{Ptr: b.held.buf.Ptr + b.off[bad.i], Bytes: uint64(len(raw))}); derr == nil {
					verdict = hostVerdict(raw, b.heldFrom)
				}
				return fmt.Errorf("cuda decode %s (%d bytes the device held since it was read ahead): %s; %s", b.keys[bad.i], len(raw), bad.what, verdict)
			}
			return err
		}
	}
	// The tiles found in the cache that batches decoded ahead on the
	// rows' stream fill: the null stream's gather waits for them.
	for _, c := range d.waited {
		if err := c.event.WaitOn(0); err != nil {
			return err
		}
	}
	return d.gatherRects(rects, tables)
}

// decodeScratch checks the rectangles' formats and returns them in order
// of first use, each with scratch for the tiles the cache does not keep,
// sized for the worst case (every tile of its format) so that addresses
// are known at once (owner goroutine).
func (d *Device) decodeScratch(rects []rectOut) ([]decode.Format, map[decode.Format]uint64, error) {
	tiles := map[decode.Format]int{}
	var formats []decode.Format
	for _, ro := range rects {
		r, f := ro.r, ro.r.Format
		if f.SampleBytes != 2 || !Decodable(f) || len(r.Tiles) != r.TW*r.TH {
			return nil, nil, fmt.Errorf("cuda decode %s: %s %d-byte tiles, %d for a %d×%d span", r.File, f.Compression, f.SampleBytes, len(r.Tiles), r.TW, r.TH)
		}
		if _, ok := tiles[f]; !ok {
			formats = append(formats, f)
		}
		tiles[f] += len(r.Tiles)
	}
	scratch := map[decode.Format]uint64{}
	for k, f := range formats {
		b, err := d.Pool().Get("decode.scratch."+strconv.Itoa(k), uint64(tiles[f]*f.TileBytes()))
		if err != nil {
			return nil, nil, err
		}
		scratch[f] = b.Ptr
	}
	return formats, scratch, nil
}

// gatherRects copies each rectangle out of its decoded tiles, whose
// addresses tables lists per rectangle.
func (d *Device) gatherRects(rects []rectOut, tables [][]uint64) error {
	var all []uint64
	for _, t := range tables {
		all = append(all, t...)
	}
	ptab, err := driver.Put(d.Pool(), "decode.tables", all)
	if err != nil {
		return err
	}
	at := uint64(0)
	for ri, ro := range rects {
		r := ro.r
		if err := d.LaunchAsync(0, "gather_tiles", int64(r.W*r.H), ptab+8*at, int32(r.TX0), int32(r.TY0), int32(r.TW),
			int32(r.Format.W), int32(r.Format.H), int32(r.X), int32(r.Y), int32(r.W), int32(r.H), int32(r.Fill), ro.dst); err != nil {
			return err
		}
		at += uint64(len(tables[ri]))
	}
	return nil
}

// cacheFor says whether tiles of tb bytes can be kept, making the cache on
// first use (its slots take the first size asked for).
func (d *Device) cacheFor(tb uint64) bool {
	if d.tiles == nil {
		c, err := newTileCache(tb)
		if err != nil {
			return false
		}
		d.tiles = c
		d.tiles.call = d.tileCall
	}
	return d.tiles.slotBytes == tb
}

// TileKey names tile (i, j) of a rectangle's span across calls, as the
// device's tile cache keys it: the rectangle's File, "#", the tile's index
// in the band.
func TileKey(r *decode.Rect, i, j int) string { return r.File + "#" + strconv.Itoa(r.Tile(i, j)) }

// AheadBatch is the tiles of many rectangles packed for DecodeAhead, each
// tile once, by format: the host's part of decoding ahead, done away from
// the device's goroutine.
type AheadBatch struct {
	formats []decode.Format
	keys    map[decode.Format][]string
	packed  map[decode.Format]packedTiles
	// held is the device's copy of the batch's compressed tiles, one
	// buffer per format, from DecodeAhead until ReleaseAhead.
	held  []*heldBuffer
	bytes int64
}

// heldBuffer is one format's compressed tiles of a batch on the device,
// then, from offset tables, room for the batch's tables and statuses
// (heldBytes).
type heldBuffer struct {
	buf    driver.Buffer
	tables uint64
	keys   []string
}

// heldTile is where a tile handed to the device lies in its batch's
// buffer.
type heldTile struct {
	buf  *heldBuffer
	off  uint64
	size uint32
}

// Held marks a tile of a decode.Rect whose compressed bytes the device
// holds since DecodeAhead (an empty slice, not nil: nil is a tile never
// written). The device decodes such a tile from its own copy when its
// cache lacks it, until ReleaseAhead; any other decoder refuses it.
var Held = []byte{}

// HoldsAhead says whether DecodeAhead keeps its own copy of a batch's
// tiles of format f until ReleaseAhead, so that the caller may drop
// theirs and pass Held instead: compressed tiles; uncompressed ones go
// straight into the cache, and a tile it has no room for needs its bytes.
func HoldsAhead(f decode.Format) bool { return f.Compression != "NONE" }

// Held says whether the device holds every tile of the batch since
// DecodeAhead, until ReleaseAhead: the caller's bytes may go.
func (b *AheadBatch) Held() bool { return len(b.formats) > 0 && len(b.held) == len(b.formats) }

// Bytes is the size of the batch's compressed tiles as laid out.
func (b *AheadBatch) Bytes() int64 { return b.bytes }

// NewAheadBatch returns an empty batch, for tiles a caller packs itself
// (Add).
func NewAheadBatch() *AheadBatch {
	return &AheadBatch{keys: map[decode.Format][]string{}, packed: map[decode.Format]packedTiles{}}
}

// Add puts tiles of format f that the caller has packed into the batch:
// tile k's size[k] bytes at off[k] of data, a multiple of 4, with at least
// 8 bytes after the last (the decoder reads whole words), keys[k] naming
// it as TileKey does.
func (b *AheadBatch) Add(f decode.Format, data []byte, off []uint64, size []uint32, keys []string) error {
	if len(off) != len(size) || len(off) != len(keys) {
		return fmt.Errorf("cuda decode ahead: %d offsets, %d sizes, %d keys", len(off), len(size), len(keys))
	}
	for k := range off {
		if off[k]%4 != 0 || off[k]+uint64(size[k])+8 > uint64(len(data)) {
			return fmt.Errorf("cuda decode ahead: tile %s at %d of %d bytes, in %d", keys[k], off[k], size[k], len(data))
		}
	}
	if _, ok := b.packed[f]; ok {
		return fmt.Errorf("cuda decode ahead: a second batch of %s tiles", f.Compression)
	}
	b.formats = append(b.formats, f)
	b.keys[f], b.packed[f] = keys, packedTiles{data: data, off: off, size: size}
	b.bytes += int64(len(data))
	return nil
}

// DecodeAhead decodes a batch's tiles on the device and keeps them for
// the windows that will need them (Composite finds them there), in one
// launch per format: one warp decodes one tile, at a few MB/s, so the
// device reaches its throughput only with thousands of tiles in flight.
// A row's compressed bytes (a gigabyte and more at a dozen dates) cross
// to the device on the copier goroutine (driver.Device.CopyAside),
// through pinned staging buffers filled on every core, while the owner
// goes on with the windows' work; the owner then picks the tiles the cache lacks
// and queues their decoding in one atomic step, so no window sees a slot
// claimed but not yet decoded; both steps go before the windows' calls
// waiting for the owner (driver.Device.DoFirst). The tiles' statuses are
// then awaited beside the owner (driver.Device.Await), which meanwhile
// runs other work: a tile that failed is an error, as the caller waits
// for its row anyway.
//
// The device keeps its copy of the compressed tiles (those HoldsAhead
// names) until ReleaseAhead: a tile the cache had no room for, or evicted
// before its window came, is decoded again from it, so the caller may
// drop its own bytes once DecodeAhead returns and pass Held for them.
// After an error the device holds nothing of the batch.
//
// With Options.Pageable it copies straight from the row's pageable
// memory instead, for comparing both ways on one machine.
func DecodeAhead(dev *Device, b *AheadBatch) (err error) {
	dev.ahead.Lock()
	defer dev.ahead.Unlock()
	if len(b.held) > 0 {
		return fmt.Errorf("cuda decode ahead: the batch was decoded already")
	}
	var checks []*aheadCheck
	awaited := 0 // checks whose events were waited for and freed
	defer func() {
		if err != nil {
			// Kernels queued for the batch may still read the device's
			// copy of its tiles, which ReleaseAhead frees.
			dev.Do(func() error {
				err := driver.SyncStream(0)
				if dev.rows != 0 {
					err = errors.Join(err, driver.SyncStream(dev.rows))
				}
				for _, c := range checks[awaited:] {
					dev.settle(c)
					c.event.Destroy()
				}
				return err
			})
			ReleaseAhead(dev, b)
		}
	}()
	staged := !dev.opt.Pageable
	for _, f := range b.formats {
		p := b.packed[f]
		var h *heldBuffer // the device's copy of the format's tiles, if it keeps one
		if HoldsAhead(f) && len(p.data) > 0 {
			h = &heldBuffer{keys: b.keys[f], tables: heldTables(len(p.data))}
			if err := dev.DoFirst(func() (err error) {
				if h.buf, err = driver.Alloc(heldBytes(len(p.data), len(h.keys))); err == nil {
					dev.heldBufs[h] = true
				}
				return err
			}); err != nil {
				return err
			}
			b.held = append(b.held, h)
			if err := dev.CopyAside(h.buf.Ptr, p.data, !staged); err != nil {
				return err
			}
		}
		var c *aheadCheck
		if err := dev.DoFirst(func() (err error) {
			if h != nil {
				for k, key := range h.keys {
					dev.held[key] = heldTile{h, p.off[k], p.size[k]}
				}
			}
			c, err = dev.decodeAhead(f, b.keys[f], p, h)
			return err
		}); err != nil {
			return err
		}
		if c != nil {
			checks = append(checks, c)
		}
	}
	// The owner went on once the batch was queued; the statuses are
	// waited for here, beside it, as the caller waits for its row: a
	// failed tile is an error while the caller still has the row's
	// bytes (its windows then read their own), as when the owner waited.
	for _, c := range checks {
		if err := dev.Await(c.event); err != nil {
			return err
		}
		if err := dev.DoFirst(func() error {
			dev.settle(c)
			c.event.Destroy()
			return nil
		}); err != nil {
			return err
		}
		awaited++
		if c.bad != "" {
			return fmt.Errorf("cuda decode ahead: %s", c.bad)
		}
	}
	// The host's bytes are no longer needed here: the caller's may go.
	for _, f := range b.formats {
		if HoldsAhead(f) {
			p := b.packed[f]
			p.data = nil
			b.packed[f] = p
		}
	}
	return nil
}

// ReleaseAhead frees the device's copy of a batch's compressed tiles:
// rectangles that pass Held for them must not be decoded after it.
// Releasing a batch twice, or one never decoded, does nothing.
func ReleaseAhead(dev *Device, b *AheadBatch) {
	held := b.held
	b.held = nil
	if len(held) == 0 {
		return
	}
	dev.Do(func() error {
		for _, h := range held {
			for _, key := range h.keys {
				// A later batch may hold the same tile now.
				if t, ok := dev.held[key]; ok && t.buf == h {
					delete(dev.held, key)
				}
			}
			if dev.heldBufs[h] {
				delete(dev.heldBufs, h)
				h.buf.Free()
			}
		}
		return nil
	})
}

// decodeAhead decodes the tiles of p the cache lacks into slots it claims
// for them: from h, the device's copy of p's bytes (compressed tiles), on
// the rows' stream; or, with h nil, from the host's bytes (uncompressed
// tiles, copied straight into their slots) on the null stream.
func (d *Device) decodeAhead(f decode.Format, keys []string, p packedTiles, h *heldBuffer) (*aheadCheck, error) {
	d.tileCall++
	if !d.cacheFor(uint64(f.TileBytes())) {
		return nil, nil
	}
	d.tiles.call = d.tileCall
	// Only the tiles the cache has room for and does not hold yet.
	var sel packedTiles
	var dst []uint64
	var claimed []string
	for i, key := range keys {
		if _, ok := d.tiles.lookup(key); ok {
			continue
		}
		at, ok := d.tiles.claim(key)
		if !ok {
			break
		}
		sel.off, sel.size = append(sel.off, p.off[i]), append(sel.size, p.size[i])
		dst, claimed = append(dst, at), append(claimed, key)
	}
	if len(dst) == 0 {
		return nil, nil
	}
	sel.data = p.data
	var c *aheadCheck
	var err error
	switch {
	case d.opt.WaitAll:
		var s stagedTiles
		if h != nil {
			s, err = d.stageOnDevice(sel, h.buf, dst)
		} else {
			s, err = d.stageTiles(sel, f, dst)
		}
		if err == nil {
			err = d.runDecode(s, f, inflateWarps)
		}
	case h != nil:
		var s stagedTiles
		var status uint64
		var stream uintptr
		if s, status, err = d.stageHeld(sel, h, dst); err == nil {
			if stream, err = d.rowStream(); err == nil {
				c, err = d.decodeLater(s, f, claimed, status, stream)
			}
		}
	default:
		var s stagedTiles
		if s, err = d.stageTiles(sel, f, dst); err == nil {
			c, err = d.decodeLater(s, f, claimed, 0, 0)
		}
	}
	if err != nil {
		for _, key := range claimed {
			d.tiles.forget(key)
		}
		return nil, err
	}
	if c != nil {
		for _, key := range claimed {
			d.tiles.filledBy(key, c)
		}
	}
	return c, nil
}
