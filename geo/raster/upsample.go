package raster

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/airbusgeo/godal"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/resample"
)

// Upsample reads band 1 onto dst like Read, but with lulc's own resampling
// (package resample) where it applies: dst nests in the source at a whole
// zoom k > 1 (Sentinel-2's 20 m and 60 m bands on a 10 m grid), alg is
// bilinear (UInt16 into []uint16) or nearest (into a buffer of the band's
// own type). Source pixels come from cache when it is not nil, so blocks
// that several windows' halos share are decoded once. Every other case is
// Read: GDAL's resampling or warper.
func (s *Source) Upsample(dst geo.Grid, alg string, buf any, cache *BlockCache) error {
	win, ok := s.zoomed(dst)
	if !ok || !s.ownResampling(alg, buf) {
		return s.Read(dst, alg, buf)
	}
	var err error
	switch b := buf.(type) {
	case []uint16:
		var c *resample.Coarse
		if c, err = s.coarse(win, alg == "bilinear", cache); err != nil {
			break
		}
		if alg == "bilinear" {
			err = resample.Bilinear(b, c.Window, c.Plane, c.NoData, c.HasNoData)
		} else {
			err = resample.Nearest(b, c.Window, c.Plane)
		}
	case []uint8:
		px, py, pw, ph := win.Need(false)
		p := resample.Plane[uint8]{X0: px, Y0: py, W: pw, H: ph, Pix: make([]uint8, pw*ph)}
		if err = readPlane(s, cache, px, py, pw, ph, p.Pix); err == nil {
			err = resample.Nearest(b, win, p)
		}
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", s.Href, err)
	}
	return nil
}

// Coarse reads what bilinear upsampling onto dst needs, without resampling
// it: the source plane covering dst and its halo, as a resample.Coarse
// (the composite resamples it, on the CPU or the GPU). It returns nil
// where Upsample would not use lulc's bilinear (see Upsample); the caller
// then reads with Upsample.
func (s *Source) Coarse(dst geo.Grid, cache *BlockCache) (*resample.Coarse, error) {
	win, ok := s.zoomed(dst)
	if !ok || !s.ownResampling("bilinear", []uint16(nil)) {
		return nil, nil
	}
	c, err := s.coarse(win, true, cache)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Href, err)
	}
	return c, nil
}

// zoomed returns dst as a window of the source upsampled by a whole factor
// k > 1, when it nests so.
func (s *Source) zoomed(dst geo.Grid) (resample.Window, bool) {
	x, y, w, _, ok := s.nested(dst)
	if !ok || w == dst.Width {
		return resample.Window{}, false
	}
	k := dst.Width / w
	return resample.Window{X: x * k, Y: y * k, W: dst.Width, H: dst.Height, K: k, RasterW: s.Width, RasterH: s.Height}, true
}

// coarse reads the plane a window needs (with the bilinear halo or not).
func (s *Source) coarse(win resample.Window, bilinear bool, cache *BlockCache) (*resample.Coarse, error) {
	px, py, pw, ph := win.Need(bilinear)
	c := &resample.Coarse{Window: win, Plane: resample.Plane[uint16]{X0: px, Y0: py, W: pw, H: ph, Pix: make([]uint16, pw*ph)}}
	if s.NoData != nil {
		c.NoData, c.HasNoData = uint16(*s.NoData), true
	}
	return c, readPlane(s, cache, px, py, pw, ph, c.Plane.Pix)
}

// ownResampling says whether lulc's resampling handles alg into buf for
// this band: bilinear only for UInt16 (its integer rule), nearest for Byte
// and UInt16, each into a buffer of the band's own type so that no
// conversion is involved; a nodata value outside the type's range is left
// to GDAL.
func (s *Source) ownResampling(alg string, buf any) bool {
	if s.NoData != nil {
		nd := *s.NoData
		if nd != float64(uint16(nd)) || (s.dtype == godal.Byte && nd > 255) {
			return false
		}
	}
	switch buf.(type) {
	case []uint16:
		return s.dtype == godal.UInt16 && (alg == "bilinear" || alg == "nearest")
	case []uint8:
		return s.dtype == godal.Byte && alg == "nearest"
	}
	return false
}

// readPlane fills pix with the source rectangle (x, y, w, h): from the
// cache's blocks when there is a cache, else with one RasterIO.
func readPlane[T uint8 | uint16](s *Source, cache *BlockCache, x, y, w, h int, pix []T) error {
	if cache == nil {
		return ReadBandWindowInto(s, 1, x, y, w, h, pix)
	}
	bw, bh := s.BlockSize[0], s.BlockSize[1]
	for by := y / bh; by <= (y+h-1)/bh; by++ {
		for bx := x / bw; bx <= (x+w-1)/bw; bx++ {
			blk, err := cache.block(s, bx, by)
			if err != nil {
				return err
			}
			src := blk.pix.([]T)
			// The block's rectangle and its intersection with the plane.
			b0x, b0y := bx*bw, by*bh
			bwid := min(bw, s.Width-b0x)
			ix0, ix1 := max(x, b0x), min(x+w, b0x+bwid)
			iy0, iy1 := max(y, b0y), min(y+h, b0y+min(bh, s.Height-b0y))
			for r := iy0; r < iy1; r++ {
				copy(pix[(r-y)*w+ix0-x:(r-y)*w+ix1-x], src[(r-b0y)*bwid+ix0-b0x:])
			}
		}
	}
	return nil
}

// BlockCache holds decoded source blocks, shared by every worker of a
// tile: a block that several windows need (their halos overlap) is decoded
// once, by whichever worker asks first, while the others wait for it.
// Least recently used blocks are dropped beyond a byte budget. Workers
// keep their own GDAL handles; the cache holds only plain Go slices.
type BlockCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	blocks  map[blockKey]*list.Element
	lru     list.List // of *cachedBlock, most recent first
	decodes int64
}

type blockKey struct {
	href   string
	bx, by int
}

type cachedBlock struct {
	key   blockKey
	ready chan struct{} // closed when pix or err is set
	pix   any           // []uint8 or []uint16
	err   error
	size  int64
}

// NewBlockCache returns a cache that keeps at most budget bytes of
// decoded blocks (one block more while it is being filled).
func NewBlockCache(budget int64) *BlockCache {
	return &BlockCache{budget: budget, blocks: map[blockKey]*list.Element{}}
}

// Decodes is the number of blocks decoded so far.
func (c *BlockCache) Decodes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decodes
}

// block returns block (bx, by) of s's band 1, decoding it with s's handle
// if no worker has.
func (c *BlockCache) block(s *Source, bx, by int) (*cachedBlock, error) {
	key := blockKey{s.Href, bx, by}
	c.mu.Lock()
	if e, ok := c.blocks[key]; ok {
		c.lru.MoveToFront(e)
		b := e.Value.(*cachedBlock)
		c.mu.Unlock()
		<-b.ready
		return b, b.err
	}
	b := &cachedBlock{key: key, ready: make(chan struct{})}
	c.blocks[key] = c.lru.PushFront(b)
	c.decodes++
	c.mu.Unlock()

	w := min(s.BlockSize[0], s.Width-bx*s.BlockSize[0])
	h := min(s.BlockSize[1], s.Height-by*s.BlockSize[1])
	switch s.dtype {
	case godal.Byte:
		pix := make([]uint8, w*h)
		b.pix, b.size = pix, int64(len(pix))
		b.err = ReadBandWindowInto(s, 1, bx*s.BlockSize[0], by*s.BlockSize[1], w, h, pix)
	default:
		pix := make([]uint16, w*h)
		b.pix, b.size = pix, int64(2*len(pix))
		b.err = ReadBandWindowInto(s, 1, bx*s.BlockSize[0], by*s.BlockSize[1], w, h, pix)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Sizes are counted before ready is closed, so eviction, which only
	// takes ready blocks, never uncounts a block that was not counted.
	defer close(b.ready)
	if b.err != nil {
		// A failed block is not kept: the next asker tries again.
		c.lru.Remove(c.blocks[key])
		delete(c.blocks, key)
		return b, b.err
	}
	c.used += b.size
	for e := c.lru.Back(); c.used > c.budget && e != nil; {
		prev := e.Prev()
		if old := e.Value.(*cachedBlock); old != b && isReady(old) {
			c.lru.Remove(e)
			delete(c.blocks, old.key)
			c.used -= old.size
		}
		e = prev
	}
	return b, nil
}

func isReady(b *cachedBlock) bool {
	select {
	case <-b.ready:
		return true
	default:
		return false
	}
}
