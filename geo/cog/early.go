package cog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
)

// earlyTiles compresses a staged raster's tiles while its windows are
// still being written (Options.EncodeEarly): the tiles of a row of
// full-resolution tiles go to the compressors once every band of every
// pixel of the row has been written; an overview's row is downsampled
// once the two rows of the level above that it reduces hold their pixels,
// and its tiles then go to the compressors too. Each tile is its own job,
// so the rows completed last are compressed on every thread; Close is
// left with one sequential write. Rows are counted in samples written;
// windows are written once each, so a row's count reaches its size
// exactly once. A row written again after that is marked stale: it and
// every overview are made again at Close.
type earlyTiles[T Pixels] struct {
	p       *Plan
	levels  [][][]T        // level → band → plane, overviews included
	nodata  *T             // the planes' nodata, for downsampling
	written []atomic.Int64 // samples written per row of level-0 tiles, all bands
	stale   []atomic.Bool
	tiles   [][][]byte // level → compressed tiles, ty*tilesX+tx; nil until made
	jobs    chan earlyJob
	pending sync.WaitGroup // jobs queued and not yet done (their follow-ups queued first)
	wg      sync.WaitGroup
	stopped bool
	spoiled bool // a full-resolution row went stale: every overview is made again (set by stop)

	mu    sync.Mutex
	ready [][]bool // level → rows of tiles whose pixels are all there
	err   error    // the first failure, reported by Close
}

// earlyJob is tile (tx, ty) of a level to compress or, with tx < 0, row
// ty of an overview to downsample from the level above.
type earlyJob struct{ level, tx, ty int }

// newEarlyTiles starts p.earlyThreads compressors over the planes of every
// level (levels[0] written by the windows, the overviews made here).
func newEarlyTiles[T Pixels](p *Plan, levels [][][]T) *earlyTiles[T] {
	l0 := p.levels[0]
	jobs := 0
	for _, lv := range p.levels {
		jobs += lv.tiles() + lv.tilesY
	}
	e := &earlyTiles[T]{p: p, levels: levels, written: make([]atomic.Int64, l0.tilesY), stale: make([]atomic.Bool, l0.tilesY),
		tiles: make([][][]byte, len(p.levels)), ready: make([][]bool, len(p.levels)),
		jobs: make(chan earlyJob, jobs)} // room for every job: queueing never blocks
	if p.nodata != nil {
		nd := T(*p.nodata)
		e.nodata = &nd
	}
	for l, lv := range p.levels {
		e.tiles[l] = make([][]byte, lv.tiles())
		e.ready[l] = make([]bool, lv.tilesY)
	}
	for range p.earlyThreads {
		e.wg.Go(e.compress)
	}
	return e
}

// compress is one compressor: it does the jobs queued until they are
// closed.
func (e *earlyTiles[T]) compress() {
	enc, err := newTileEncoder[T](e.p)
	if err == nil {
		defer enc.close()
	}
	for j := range e.jobs {
		if err == nil {
			err = e.run(enc, j)
		}
		if err != nil {
			e.mu.Lock()
			e.err = cmpErr(e.err, fmt.Errorf("compress tile %d,%d of level %d: %w", j.tx, j.ty, j.level, err))
			e.mu.Unlock()
		}
		e.pending.Done()
	}
}

// run does job j: compresses its tile, or downsamples its overview row
// and queues what that row makes possible.
func (e *earlyTiles[T]) run(enc *tileEncoder[T], j earlyJob) error {
	p := e.p
	if j.tx >= 0 {
		data, err := enc.encode(e.levels, tileJob{j.level, j.tx, j.ty}, nil)
		e.tiles[j.level][j.ty*p.levels[j.level].tilesX+j.tx] = data
		return err
	}
	lv, up := p.levels[j.level], p.levels[j.level-1]
	y0, y1 := j.ty*p.block, min((j.ty+1)*p.block, lv.height)
	for b := range p.bands {
		downsampleRows(level[T]{e.levels[j.level][b], lv.width, lv.height}, level[T]{e.levels[j.level-1][b], up.width, up.height}, y0, y1, p.rule, e.nodata)
	}
	e.rowReady(j.level, j.ty)
	return nil
}

// rowReady records that row ty of level l holds its pixels, queues its
// tiles, and queues the overview row below once both rows it reduces
// (2k and 2k+1, the second cut at the level's edge) are ready.
func (e *earlyTiles[T]) rowReady(l, ty int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ready[l][ty] = true
	for tx := range e.p.levels[l].tilesX {
		e.queue(earlyJob{l, tx, ty})
	}
	next := l + 1
	if next >= len(e.p.levels) {
		return
	}
	k, rows := ty/2, e.p.levels[l].tilesY
	if k < e.p.levels[next].tilesY && e.ready[l][2*k] && (2*k+1 >= rows || e.ready[l][2*k+1]) {
		e.queue(earlyJob{next, -1, k})
	}
}

// queue hands a job to the compressors.
func (e *earlyTiles[T]) queue(j earlyJob) {
	e.pending.Add(1)
	e.jobs <- j
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// wrote counts a window of one band written at (x, y) and hands the rows
// of tiles it completes to the compressors. The atomic count orders every
// writer's samples before the compressor that reads them.
func (e *earlyTiles[T]) wrote(y, width, height int) {
	if width <= 0 || height <= 0 {
		return
	}
	bs, l0 := e.p.block, e.p.levels[0]
	for ty := y / bs; ty <= (y+height-1)/bs; ty++ {
		lo, hi := max(y, ty*bs), min(y+height, (ty+1)*bs)
		n := e.written[ty].Add(int64(width) * int64(hi-lo))
		want := int64(l0.width) * int64(min(bs, l0.height-ty*bs)) * int64(e.p.bands)
		switch {
		case n == want:
			e.rowReady(0, ty)
		case n > want:
			e.stale[ty].Store(true)
		}
	}
}

// stop waits for the jobs queued and those they lead to, then for the
// compressors; the planes may then be released. What is still queued
// (the last rows, the overview rows they complete) is compressed on all
// of the plan's threads, not only the early ones.
func (e *earlyTiles[T]) stop() {
	if !e.stopped {
		e.stopped = true
		for range e.p.threads - e.p.earlyThreads {
			e.wg.Go(e.compress)
		}
		e.pending.Wait()
		close(e.jobs)
		e.wg.Wait()
		for i := range e.stale {
			e.spoiled = e.spoiled || e.stale[i].Load()
		}
	}
}

// made reports whether tile (tx, ty) of level l was made early and still
// holds: a stale full-resolution row spoils itself and every overview.
// Only after stop.
func (e *earlyTiles[T]) made(l, tx, ty int) bool {
	if l > 0 && e.spoiled || l == 0 && e.stale[ty].Load() {
		return false
	}
	return e.tiles[l][ty*e.p.levels[l].tilesX+tx] != nil
}

// encodeEarly writes the COG at path like encode, with the level-0
// tiles the compressors made (the rest compressed now), and returns the
// file's checksum (package digest) and size: with every tile in memory the header is
// known before the first byte, so the file is written in order and hashed
// as it is written.
func encodeEarly[T Pixels](path string, p *Plan, levels [][][]T, e *earlyTiles[T]) (string, int64, error) {
	e.stop()
	if e.err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, e.err)
	}
	var nodata *T
	if p.nodata != nil {
		nd := T(*p.nodata)
		nodata = &nd
	}
	// An overview is downsampled again whole unless every row of it was
	// early: its pixels are the same either way, and the level below
	// reads them all.
	for l := 1; l < len(p.levels); l++ {
		up, lv := p.levels[l-1], p.levels[l]
		if !e.spoiled && !slices.Contains(e.ready[l], false) {
			continue
		}
		for b := range p.bands {
			downsample(level[T]{levels[l][b], lv.width, lv.height}, level[T]{levels[l-1][b], up.width, up.height}, p.rule, nodata, p.threads)
		}
	}
	jobs := p.order()
	data := make([][]byte, len(jobs))
	var todo []int
	for i, j := range jobs {
		if e.made(j.level, j.tx, j.ty) {
			data[i] = e.tiles[j.level][j.ty*p.levels[j.level].tilesX+j.tx]
			continue
		}
		todo = append(todo, i)
	}
	if err := compressAll(p, levels, jobs, todo, data); err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, err)
	}

	offsets := make([][]uint64, len(p.levels))
	counts := make([][]uint64, len(p.levels))
	for l, lv := range p.levels {
		offsets[l] = make([]uint64, lv.tiles())
		counts[l] = make([]uint64, lv.tiles())
	}
	pos := int64(len(p.header(offsets, counts)))
	for i, j := range jobs {
		n := len(data[i])
		if uint64(n) > math.MaxUint32 {
			return "", 0, fmt.Errorf("write %s: tile %d,%d of level %d is %d bytes", path, j.tx, j.ty, j.level, n)
		}
		k := j.ty*p.levels[j.level].tilesX + j.tx
		offsets[j.level][k], counts[j.level][k] = uint64(pos+4), uint64(n)
		pos += int64(n) + 8
		if !p.big && pos > math.MaxUint32 {
			return "", 0, fmt.Errorf("write %s: file too large for a classic tiff", path)
		}
	}
	header := p.header(offsets, counts)

	tmp := atomicfs.TempName(path)
	f, err := os.Create(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	// The file is written and hashed at once, the hashing on every core
	// (package digest): this is the step a tile's ingest ends on.
	dw := digest.NewWriter(f, pos)
	err = emitTiles(dw, header, data)
	sum, n, cerr := dw.Close()
	if err == nil {
		err = cerr
	}
	if err == nil && n != pos {
		err = fmt.Errorf("wrote %d bytes, planned %d", n, pos)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, err)
	}
	return sum, pos, nil
}

// compressAll compresses jobs[i] for every i in todo into data[i], on
// p.threads goroutines.
func compressAll[T Pixels](p *Plan, levels [][][]T, jobs []tileJob, todo []int, data [][]byte) error {
	next := make(chan int)
	errs := make([]error, p.threads)
	var wg sync.WaitGroup
	for w := range p.threads {
		wg.Go(func() {
			enc, err := newTileEncoder[T](p)
			if err != nil {
				errs[w] = err
				for range next {
				}
				return
			}
			defer enc.close()
			for i := range next {
				if errs[w] != nil {
					continue
				}
				j := jobs[i]
				if data[i], err = enc.encode(levels, j, nil); err != nil {
					errs[w] = fmt.Errorf("compress tile %d,%d of level %d: %w", j.tx, j.ty, j.level, err)
				}
			}
		})
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// emitTiles writes the header, then every tile in file order with its
// leader (the size) and trailer (its last 4 bytes), as writeTiles does.
func emitTiles(w io.Writer, header []byte, data [][]byte) error {
	if _, err := w.Write(header); err != nil {
		return err
	}
	var lead, trail [4]byte
	for _, d := range data {
		n := len(d)
		binary.LittleEndian.PutUint32(lead[:], uint32(n))
		trail = [4]byte{}
		copy(trail[4-min(4, n):], d[n-min(4, n):])
		w.Write(lead[:])
		w.Write(d)
		if _, err := w.Write(trail[:]); err != nil {
			return err
		}
	}
	return nil
}
