package cog

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/lulc/lulc/internal/atomicfs"
)

// stageInMemoryMax is the largest raw size (all bands at full resolution)
// a Writer stages in Go memory; larger rasters are staged in a mapped
// temporary file. A variable so that tests can exercise both.
var stageInMemoryMax int64 = 1 << 30

// Writer builds a raster window by window and encodes it as a COG when
// closed. It keeps the windows in Go memory or, for rasters over 1 GiB, in
// a mapped temporary file beside the target, unlinked as soon as it is
// mapped. The COG is written to a hidden temporary name and renamed into
// place, so the target path only ever holds a complete file. Write is safe
// for concurrent use on windows that do not overlap.
type Writer struct {
	path   string
	stage  stage
	mu     sync.RWMutex
	closed bool // staging released: by Close, or by Abort
}

// stage is a stageOf of the plan's pixel type.
type stage interface {
	write(band, x, y, width, height int, buf any) error
	encode(path string) error
	release() error
	// sum is the encoded file's checksum (package digest) and size, when
	// encode took them on the way (Options.EncodeEarly).
	sum() (sha string, size int64, ok bool)
}

// NewWriter starts the raster p plans, to become a COG at path.
func NewWriter(path string, p *Plan) (*Writer, error) {
	w := &Writer{path: path}
	var err error
	switch p.bytesPer {
	case 1:
		w.stage, err = newStage[uint8](path, p)
	case 2:
		w.stage, err = newStage[uint16](path, p)
	default:
		w.stage, err = newStage[float32](path, p)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Write stores a window of band (0-based) at pixel offset (x, y). buf is a
// []uint8 or []uint16 of width×height values, row by row, for an integer
// raster (values its type cannot hold are clamped, as GDAL clamps them),
// or a []float32 for a Float32 raster.
func (w *Writer) Write(band, x, y, width, height int, buf any) error {
	// Windows do not overlap, so writers only share the lock with Close
	// and Abort, which release the staging.
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return fmt.Errorf("write %s: band %d window (%d, %d): writer closed", w.path, band+1, x, y)
	}
	if err := w.stage.write(band, x, y, width, height, buf); err != nil {
		return fmt.Errorf("write %s: band %d window (%d, %d): %w", w.path, band+1, x, y, err)
	}
	return nil
}

// Close encodes the COG and renames it into place. Pixels of windows never
// written are nodata (0 without nodata), as GDAL reads them.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write %s: closed twice", w.path)
	}
	w.closed = true
	err := w.stage.encode(w.path)
	if rerr := w.stage.release(); err == nil && rerr != nil {
		err = fmt.Errorf("write %s: %w", w.path, rerr)
	}
	return err
}

// Sum returns the checksum (package digest) and size of the file Close
// wrote, when it took them as it wrote (Options.EncodeEarly); ok is false
// otherwise, and the caller reads the file to hash it.
func (w *Writer) Sum() (sha string, size int64, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.closed {
		return "", 0, false
	}
	return w.stage.sum()
}

// Abort discards the raster; after a failed Close too.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.stage.release()
	}
}

// stageOf keeps every band as a full-resolution plane, in Go memory or,
// above stageInMemoryMax, in a temporary file beside the output mapped
// into memory, which also holds the overview levels: the kernel then pages
// them to disk as needed, so memory stays bounded. The file is unlinked as
// soon as it is mapped, so nothing is left behind whatever happens.
type stageOf[T Pixels] struct {
	plan   *Plan
	levels [][][]T // level → band → plane; in memory, overviews allocated by encode unless early
	mapped []byte  // the mapping, nil in memory
	early  *earlyTiles[T]
	sha    string // the file's checksum and size, when early encoding took them
	size   int64
}

// newStage stages a raster planned by p; with p.early set, its full-
// resolution tiles are compressed as their rows are completed.
func newStage[T Pixels](path string, p *Plan) (s *stageOf[T], err error) {
	s = &stageOf[T]{plan: p, levels: make([][][]T, len(p.levels))}
	early := p.early
	if early {
		defer func() {
			if err == nil {
				s.early = newEarlyTiles(p, s.levels)
			}
		}()
	}
	var zero T
	size := int64(unsafe.Sizeof(zero))
	l0 := p.levels[0]
	defer s.fillNoData()
	if int64(l0.width)*int64(l0.height)*int64(p.bands)*size <= stageInMemoryMax {
		// Early encoding makes the overviews as rows complete: their
		// planes are needed from the start.
		levels := 1
		if early {
			levels = len(p.levels)
		}
		for l := range levels {
			lv := p.levels[l]
			s.levels[l] = make([][]T, p.bands)
			for b := range s.levels[l] {
				s.levels[l][b] = make([]T, lv.width*lv.height)
			}
		}
		return s, nil
	}
	var total int64
	for _, lv := range p.levels {
		total += int64(lv.width) * int64(lv.height) * int64(p.bands) * size
	}
	mem, err := mapTemp(atomicfs.TempName(path)+".raw", total)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", path, err)
	}
	s.mapped = mem
	var at int64
	for l, lv := range p.levels {
		s.levels[l] = make([][]T, p.bands)
		n := lv.width * lv.height
		for b := range s.levels[l] {
			s.levels[l][b] = unsafe.Slice((*T)(unsafe.Pointer(&mem[at])), n)
			at += int64(n) * size
		}
	}
	return s, nil
}

// fillNoData sets every full-resolution pixel to nodata, as GDAL reads
// the pixels of windows never written to its staging raster.
func (s *stageOf[T]) fillNoData() {
	if s.plan.nodata == nil || *s.plan.nodata == 0 || s.levels[0] == nil {
		return
	}
	nd := T(*s.plan.nodata)
	for _, plane := range s.levels[0] {
		for i := range plane {
			plane[i] = nd
		}
	}
}

func (s *stageOf[T]) write(band, x, y, width, height int, buf any) error {
	l0 := s.plan.levels[0]
	if band < 0 || band >= s.plan.bands {
		return fmt.Errorf("no band %d", band+1)
	}
	if x < 0 || y < 0 || width < 0 || height < 0 || x+width > l0.width || y+height > l0.height {
		return fmt.Errorf("window %d×%d outside the %d×%d raster", width, height, l0.width, l0.height)
	}
	plane := s.levels[0][band]
	switch v := buf.(type) {
	case []T:
		if len(v) < width*height {
			return fmt.Errorf("%d values for a %d×%d window", len(v), width, height)
		}
		for r := range height {
			copy(plane[(y+r)*l0.width+x:][:width], v[r*width:][:width])
		}
	case []uint8:
		if err := copyInts(plane, l0.width, x, y, width, height, v); err != nil {
			return err
		}
	case []uint16:
		if err := copyInts(plane, l0.width, x, y, width, height, v); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported buffer type %T", buf)
	}
	if s.early != nil {
		s.early.wrote(y, width, height)
	}
	return nil
}

// copyInts is copyWindow for an integer plane; a float plane takes only
// float windows.
func copyInts[T Pixels, S ints](dst []T, dstW, x, y, width, height int, src []S) error {
	switch d := any(dst).(type) {
	case []uint8:
		return copyWindow(d, dstW, x, y, width, height, src)
	case []uint16:
		return copyWindow(d, dstW, x, y, width, height, src)
	}
	return fmt.Errorf("%T window for a %T raster", src, dst)
}

// ints are the integer pixel types.
type ints interface{ ~uint8 | ~uint16 }

// copyWindow copies a width×height window into a plane dstW pixels wide at
// (x, y), clamping values the plane's type cannot hold, as GDAL does.
func copyWindow[T, S ints](dst []T, dstW, x, y, width, height int, src []S) error {
	if len(src) < width*height {
		return fmt.Errorf("%d values for a %d×%d window", len(src), width, height)
	}
	maxT := uint64(^T(0))
	for r := range height {
		out := dst[(y+r)*dstW+x:][:width]
		in := src[r*width:][:width]
		if unsafe.Sizeof(T(0)) >= unsafe.Sizeof(S(0)) {
			for i, v := range in {
				out[i] = T(v)
			}
			continue
		}
		for i, v := range in {
			out[i] = T(min(uint64(v), maxT))
		}
	}
	return nil
}

func (s *stageOf[T]) encode(path string) error {
	for l := 1; l < len(s.levels); l++ {
		if s.levels[l] == nil {
			lv := s.plan.levels[l]
			s.levels[l] = make([][]T, s.plan.bands)
			for b := range s.levels[l] {
				s.levels[l][b] = make([]T, lv.width*lv.height)
			}
		}
	}
	if s.early == nil {
		return encode(path, s.plan, s.levels)
	}
	var err error
	s.sha, s.size, err = encodeEarly(path, s.plan, s.levels, s.early)
	return err
}

func (s *stageOf[T]) sum() (string, int64, bool) { return s.sha, s.size, s.sha != "" }

func (s *stageOf[T]) release() error {
	if s.early != nil {
		// The compressors read the planes: they stop before the planes go.
		s.early.stop()
	}
	s.levels = nil
	if s.mapped == nil {
		return nil
	}
	m := s.mapped
	s.mapped = nil
	return unmap(m)
}
