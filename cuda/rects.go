package cuda

import (
	"fmt"
	"strconv"

	"github.com/lulc/lulc/decode"
)

// The tile cache takes a quarter of the device's free memory when it is
// made, within these bounds.
const (
	minTileCacheBytes = 1 << 30
	maxTileCacheBytes = 8 << 30
)

// tileCache keeps decoded tiles on the device between calls: a tile that
// the rectangles of several windows share (the one-pixel halo of an
// upsampled band reaches into the neighbouring tiles) is sent and decoded
// once. Slots of one tile size share one allocation; the least recently
// used tile makes room, never one the current call uses. Used on the owner
// goroutine only.
type tileCache struct {
	slab      Buffer
	slotBytes uint64
	slot      map[string]int // key → slot
	key       []string       // slot → key, "" when free
	used      []uint64       // slot → the call that last used it
	call      uint64
}

func newTileCache(slotBytes uint64) (*tileCache, error) {
	var free, total uint64
	if err := check(api.memGetInfo(&free, &total), "cuMemGetInfo"); err != nil {
		return nil, err
	}
	n := int(min(maxTileCacheBytes, max(minTileCacheBytes, free/4)) / slotBytes)
	if n < 1 {
		return nil, fmt.Errorf("cuda tile cache: tiles of %d bytes", slotBytes)
	}
	b, err := alloc(uint64(n) * slotBytes)
	if err != nil {
		return nil, err
	}
	return &tileCache{slab: b, slotBytes: slotBytes, slot: map[string]int{}, key: make([]string, n), used: make([]uint64, n)}, nil
}

// lookup returns the address of the decoded tile key, marking it used by
// the current call.
func (c *tileCache) lookup(key string) (uint64, bool) {
	i, ok := c.slot[key]
	if !ok {
		return 0, false
	}
	c.used[i] = c.call
	return c.slab.ptr + uint64(i)*c.slotBytes, true
}

// claim returns a slot for tile key, evicting the least recently used tile
// that the current call does not use; false when every slot is in use.
func (c *tileCache) claim(key string) (uint64, bool) {
	best := -1
	for i, k := range c.key {
		if k == "" {
			best = i
			break
		}
		if c.used[i] < c.call && (best < 0 || c.used[i] < c.used[best]) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	if old := c.key[best]; old != "" {
		delete(c.slot, old)
	}
	c.key[best], c.slot[key], c.used[best] = key, best, c.call
	return c.slab.ptr + uint64(best)*c.slotBytes, true
}

// forget drops a tile whose decoding failed.
func (c *tileCache) forget(key string) {
	if i, ok := c.slot[key]; ok {
		delete(c.slot, key)
		c.key[i], c.used[i] = "", 0
	}
}

func (c *tileCache) release() {
	if c != nil {
		c.slab.free()
	}
}

// rectOut is a rectangle to decode on the device into dst (16-bit
// samples, W×H; 0: only decode its tiles); cache says whether its tiles
// are worth keeping for later calls.
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
	if len(rects) == 0 {
		return nil
	}
	d.tileCall++
	if d.tiles != nil {
		d.tiles.call = d.tileCall
	}
	type pending struct {
		raw   [][]byte
		keys  []string
		dst   []uint64 // cache slot, or 1 + scratch index until scratch exists
		cache []bool
	}
	batches := map[decode.Format]*pending{}
	var formats []decode.Format
	where := map[string]uint64{} // tile key → its decoded address (or scratch marker)
	tables := make([][]uint64, len(rects))
	scratch := map[decode.Format]int{}
	for ri, ro := range rects {
		r, f := ro.r, ro.r.Format
		if f.SampleBytes != 2 || !Decodable(f) || len(r.Tiles) != r.TW*r.TH {
			return fmt.Errorf("cuda decode %s: %s %d-byte tiles, %d for a %d×%d span", r.File, f.Compression, f.SampleBytes, len(r.Tiles), r.TW, r.TH)
		}
		useCache := ro.cache && d.cacheFor(uint64(f.TileBytes()))
		tables[ri] = make([]uint64, len(r.Tiles))
		for j := range r.TH {
			for i := range r.TW {
				raw := r.Tiles[j*r.TW+i]
				if raw == nil {
					continue // never written: gather_tiles fills it
				}
				key := r.File + "#" + strconv.Itoa(r.Tile(i, j))
				if _, ok := where[key]; !ok {
					if p, ok := d.tiles.lookupIf(d.tiles != nil && d.tiles.slotBytes == uint64(f.TileBytes()), key); ok {
						where[key] = p
					} else {
						b := batches[f]
						if b == nil {
							b = &pending{}
							batches[f] = b
							formats = append(formats, f)
						}
						var at uint64
						var cached bool
						if useCache {
							at, cached = d.tiles.claim(key)
						}
						if !cached && ro.dst == 0 {
							continue // decoding ahead, and no room to keep it
						}
						if !cached {
							// Scratch addresses are known once the batch is
							// counted: mark the index for now.
							at = scratchMark | uint64(scratch[f])
							scratch[f]++
						}
						b.raw, b.keys, b.dst, b.cache = append(b.raw, raw), append(b.keys, key), append(b.dst, at), append(b.cache, cached)
						where[key] = at
					}
				}
			}
		}
	}
	base := map[decode.Format]uint64{}
	for _, f := range formats {
		b := batches[f]
		if n := scratch[f]; n > 0 {
			buf, err := d.mem.get("decode.scratch."+strconv.Itoa(f.TileBytes()), uint64(n*f.TileBytes()))
			if err != nil {
				return err
			}
			base[f] = buf.ptr
		}
		for k, at := range b.dst {
			if at&scratchMark != 0 {
				b.dst[k] = base[f] + (at&^scratchMark)*uint64(f.TileBytes())
			}
		}
		packed, err := packTiles(b.raw)
		if err != nil {
			return err
		}
		s, err := d.stageTiles(packed, f, b.dst)
		if err == nil {
			err = d.runDecode(s, f, inflateWarps)
		}
		if err != nil {
			for k, key := range b.keys {
				if b.cache[k] {
					d.tiles.forget(key)
				}
			}
			return err
		}
	}
	return d.gatherRects(rects, tables, where, base)
}

// scratchMark flags an address that is still an index into the scratch
// buffer of its batch.
const scratchMark = 1 << 63

// gatherRects copies each rectangle out of its decoded tiles.
func (d *Device) gatherRects(rects []rectOut, tables [][]uint64, where map[string]uint64, base map[decode.Format]uint64) error {
	var all []uint64
	for ri, ro := range rects {
		r := ro.r
		for j := range r.TH {
			for i := range r.TW {
				if r.Tiles[j*r.TW+i] == nil {
					continue
				}
				at := where[r.File+"#"+strconv.Itoa(r.Tile(i, j))]
				if at&scratchMark != 0 {
					at = base[r.Format] + (at&^scratchMark)*uint64(r.Format.TileBytes())
				}
				tables[ri][j*r.TW+i] = at
			}
		}
		all = append(all, tables[ri]...)
	}
	ptab, err := put(d.mem, "decode.tables", all)
	if err != nil {
		return err
	}
	at := uint64(0)
	for ri, ro := range rects {
		r := ro.r
		if ro.dst == 0 {
			at += uint64(len(tables[ri]))
			continue
		}
		if err := d.launchAsync(0, "gather_tiles", int64(r.W*r.H), ptab+8*at, int32(r.TX0), int32(r.TY0), int32(r.TW),
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

// lookupIf looks key up when use is set.
func (c *tileCache) lookupIf(use bool, key string) (uint64, bool) {
	if !use || c == nil {
		return 0, false
	}
	return c.lookup(key)
}

// DecodeAhead decodes the tiles of rects on the device and keeps them for
// the windows that will need them (Composite finds them there), in one
// batch: one warp decodes a tile, at a few MB/s, so the device reaches its
// throughput only with thousands of tiles in flight. Tiles that do not fit
// in the cache are decoded again when a window needs them.
func DecodeAhead(dev *Device, rects []*decode.Rect) error {
	outs := make([]rectOut, len(rects))
	for i, r := range rects {
		outs[i] = rectOut{r: r, cache: true}
	}
	return dev.Do(func() error { return dev.decodeRects(outs) })
}
