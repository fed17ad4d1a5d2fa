package raster

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/internal/atomicfs"
)

// earlyTiles compresses a staged raster's full-resolution tiles while its
// windows are still being written (COGOptions.EncodeEarly): a row of tiles
// goes to the compressors once every band of every pixel of it has been
// written, so that Close is left with the overviews and one sequential
// write. Rows are counted in samples written; windows are written once
// each, so a row's count reaches its size exactly once. A row written
// again after that is marked stale and compressed again at Close.
type earlyTiles[T Pixels] struct {
	p       *cogPlan
	plane   [][]T          // level 0, band → plane
	written []atomic.Int64 // samples written per row of tiles, all bands
	stale   []atomic.Bool
	tiles   [][]byte // compressed level-0 tiles, ty*tilesX+tx; nil until made
	rows    chan int
	wg      sync.WaitGroup
	stopped bool

	mu  sync.Mutex
	err error // the first compression failure, reported by Close
}

// newEarlyTiles starts p.threads compressors over level-0 planes.
func newEarlyTiles[T Pixels](p *cogPlan, plane [][]T) *earlyTiles[T] {
	l0 := p.levels[0]
	e := &earlyTiles[T]{p: p, plane: plane, written: make([]atomic.Int64, l0.tilesY), stale: make([]atomic.Bool, l0.tilesY),
		tiles: make([][]byte, l0.tiles()), rows: make(chan int, l0.tilesY)}
	levels := [][][]T{plane}
	for range p.threads {
		e.wg.Go(func() {
			enc, err := newTileEncoder[T](p)
			if err == nil {
				defer enc.close()
			}
			for ty := range e.rows {
				for tx := range l0.tilesX {
					if err == nil {
						var data []byte
						data, err = enc.encode(levels, tileJob{0, tx, ty}, nil)
						e.tiles[ty*l0.tilesX+tx] = data
					}
				}
				if err != nil {
					e.mu.Lock()
					e.err = cmpErr(e.err, fmt.Errorf("compress row %d of tiles: %w", ty, err))
					e.mu.Unlock()
				}
			}
		})
	}
	return e
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
			e.rows <- ty // buffered for every row: never blocks
		case n > want:
			e.stale[ty].Store(true)
		}
	}
}

// stop waits for the compressors; the planes may then be released.
func (e *earlyTiles[T]) stop() {
	if !e.stopped {
		e.stopped = true
		close(e.rows)
		e.wg.Wait()
	}
}

// encodeEarly writes the COG at path like encodeCOG, with the level-0
// tiles the compressors made (the rest compressed now), and returns the
// file's SHA-256 (hex) and size: with every tile in memory the header is
// known before the first byte, so the file is written in order and hashed
// as it is written.
func encodeEarly[T Pixels](path string, p *cogPlan, levels [][][]T, e *earlyTiles[T]) (string, int64, error) {
	e.stop()
	if e.err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, e.err)
	}
	var nodata *T
	if p.nodata != nil {
		nd := T(*p.nodata)
		nodata = &nd
	}
	for l := 1; l < len(p.levels); l++ {
		up, lv := p.levels[l-1], p.levels[l]
		for b := range p.bands {
			downsample(levels[l][b], lv.width, lv.height, levels[l-1][b], up.width, up.height, p.rule, nodata, p.threads)
		}
	}
	jobs := p.order()
	data := make([][]byte, len(jobs))
	var todo []int
	tilesX := p.levels[0].tilesX
	for i, j := range jobs {
		if j.level == 0 && !e.stale[j.ty].Load() && e.tiles[j.ty*tilesX+j.tx] != nil {
			data[i] = e.tiles[j.ty*tilesX+j.tx]
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
	// Writing and hashing the same bytes at once: each takes about as long.
	h := sha256.New()
	var hashed sync.WaitGroup
	hashed.Go(func() { emitTiles(h, header, data) })
	bw := bufio.NewWriterSize(f, 1<<20)
	err = emitTiles(bw, header, data)
	if err == nil {
		err = bw.Flush()
	}
	hashed.Wait()
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return "", 0, fmt.Errorf("write %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), pos, nil
}

// compressAll compresses jobs[i] for every i in todo into data[i], on
// p.threads goroutines.
func compressAll[T Pixels](p *cogPlan, levels [][][]T, jobs []tileJob, todo []int, data [][]byte) error {
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
