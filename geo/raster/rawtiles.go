package raster

// #cgo pkg-config: gdal
// #include <stdio.h>
// #include <stdlib.h>
// #include <cpl_vsi.h>
import "C"

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"unsafe"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/resample"

	"github.com/lulc/lulc/internal/netwait"
)

// TileLayout is how band 1 of a tiled GeoTIFF lies in its file: tiles of
// Block[0]×Block[1] pixels in row-major order (TilesX across), tile i
// compressed into Sizes[i] bytes at Offsets[i] (0 and 0 for a tile that
// was never written), with Compression and Predictor as the file says.
// It is what a decoder outside GDAL needs: the GPU's, or lulc's Go twin
// (package decode).
type TileLayout struct {
	Path           string // as GDAL opens it (see GDALPath)
	Width, Height  int
	Block          [2]int
	TilesX, TilesY int
	DataType       string // Byte or UInt16
	Compression    string // GDAL's name: DEFLATE, ZSTD, LZW, NONE, …
	Predictor      int    // 1 none, 2 horizontal differencing, 3 floating point
	BigEndian      bool
	Offsets, Sizes []uint64
	// ID identifies the file's tiles: its path and a digest of where its
	// tiles lie, so that a file rewritten in place gets another.
	ID string
}

// Format is how the layout's tiles are stored, for package decode.
func (l *TileLayout) Format() decode.Format {
	sb := 2
	if l.DataType == "Byte" {
		sb = 1
	}
	return decode.Format{Compression: l.Compression, Predictor: l.Predictor, BigEndian: l.BigEndian, SampleBytes: sb, W: l.Block[0], H: l.Block[1]}
}

// Rect reads the compressed tiles that cover the rectangle (x, y, w, h)
// of the band, with one batched read; tiles never written come back nil,
// to be filled with the band's nodata (0 without one), as GDAL does.
func (l *TileLayout) Rect(x, y, w, h int, nodata *float64) (*decode.Rect, error) {
	r, err := l.RectPlan(x, y, w, h, nodata)
	if err != nil {
		return nil, err
	}
	var offs, sizes []uint64
	var at []int
	for j := range r.TH {
		for i := range r.TW {
			if t := r.Tile(i, j); l.Sizes[t] > 0 {
				offs, sizes, at = append(offs, l.Offsets[t]), append(sizes, l.Sizes[t]), append(at, j*r.TW+i)
			}
		}
	}
	raw, err := ReadRanges(l.Path, offs, sizes)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		r.Tiles[i] = raw[k]
	}
	return r, nil
}

// RectPlan is Rect without the reading: the rectangle's span of tiles,
// with Tiles allocated but empty, for a caller that reads them itself
// (ReadRangesInto, with each tile's place in the file from the layout).
func (l *TileLayout) RectPlan(x, y, w, h int, nodata *float64) (*decode.Rect, error) {
	if w <= 0 || h <= 0 || x < 0 || y < 0 || x+w > l.Width || y+h > l.Height {
		return nil, fmt.Errorf("read %s: rectangle %d,%d %d×%d outside its %d×%d pixels", l.Path, x, y, w, h, l.Width, l.Height)
	}
	bw, bh := l.Block[0], l.Block[1]
	r := &decode.Rect{X: x, Y: y, W: w, H: h, Format: l.Format(), File: l.ID, TilesX: l.TilesX, TX0: x / bw, TY0: y / bh}
	r.TW, r.TH = (x+w-1)/bw-r.TX0+1, (y+h-1)/bh-r.TY0+1
	if nodata != nil {
		r.Fill = uint16(*nodata)
	}
	r.Tiles = make([][]byte, r.TW*r.TH)
	return r, nil
}

// Layout describes the source's band 1 for raw tile reads. Rasters that
// are not tiled single-band GeoTIFFs (strips, VRTs, several bands
// interleaved by pixel) give an error saying why; callers then read
// through GDAL.
func (s *Source) Layout() (TileLayout, error) {
	if d := s.ds.Driver().ShortName(); d != "GTiff" && d != "COG" {
		return TileLayout{}, fmt.Errorf("layout %s: a %s raster, not a GeoTIFF", s.Href, d)
	}
	// The tile offsets are read from the file's header: over the network
	// when the header is larger than what Open fetched.
	defer netwait.Track(s.Href)()
	st := s.ds.Structure()
	if st.NBands != 1 {
		return TileLayout{}, fmt.Errorf("layout %s: %d bands (raw reads take single-band files)", s.Href, st.NBands)
	}
	b := s.ds.Bands()[0]
	l := TileLayout{Path: GDALPath(s.Href), Width: s.Width, Height: s.Height, Block: s.BlockSize, DataType: s.dtype.String(), Predictor: 1}
	if l.Block[1] == 1 || l.Block[0] != l.Block[1] && l.Block[0] == l.Width {
		return TileLayout{}, fmt.Errorf("layout %s: striped, not tiled", s.Href)
	}
	l.Compression = s.ds.Metadata("COMPRESSION", godal.Domain("IMAGE_STRUCTURE"))
	if l.Compression == "" {
		l.Compression = "NONE"
	}
	if p := s.ds.Metadata("PREDICTOR", godal.Domain("IMAGE_STRUCTURE")); p != "" {
		var err error
		if l.Predictor, err = strconv.Atoi(p); err != nil {
			return TileLayout{}, fmt.Errorf("layout %s: predictor %q", s.Href, p)
		}
	}
	l.TilesX, l.TilesY = (l.Width+l.Block[0]-1)/l.Block[0], (l.Height+l.Block[1]-1)/l.Block[1]
	n := l.TilesX * l.TilesY
	l.Offsets, l.Sizes = make([]uint64, n), make([]uint64, n)
	for ty := range l.TilesY {
		for tx := range l.TilesX {
			i := ty*l.TilesX + tx
			off := b.Metadata(fmt.Sprintf("BLOCK_OFFSET_%d_%d", tx, ty), godal.Domain("TIFF"))
			size := b.Metadata(fmt.Sprintf("BLOCK_SIZE_%d_%d", tx, ty), godal.Domain("TIFF"))
			if off == "" && size == "" {
				continue // a tile never written: all nodata
			}
			var err1, err2 error
			l.Offsets[i], err1 = strconv.ParseUint(off, 10, 64)
			l.Sizes[i], err2 = strconv.ParseUint(size, 10, 64)
			if err1 != nil || err2 != nil {
				return TileLayout{}, fmt.Errorf("layout %s: tile (%d, %d) at %q of %q bytes", s.Href, tx, ty, off, size)
			}
		}
	}
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, l.Offsets)
	binary.Write(h, binary.LittleEndian, l.Sizes)
	l.ID = fmt.Sprintf("%s#%016x", l.Path, h.Sum64())
	head, err := ReadRanges(l.Path, []uint64{0}, []uint64{2})
	if err != nil {
		return TileLayout{}, err
	}
	switch string(head[0]) {
	case "II":
	case "MM":
		l.BigEndian = true
	default:
		return TileLayout{}, fmt.Errorf("layout %s: not a TIFF (starts %q)", s.Href, head[0])
	}
	return l, nil
}

// openVSI opens a file for reading through GDAL's virtual file layer; the
// caller closes it with VSIFCloseL.
func openVSI(path string) (*C.VSILFILE, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	mode := C.CString("rb")
	defer C.free(unsafe.Pointer(mode))
	fp := C.VSIFOpenL(cpath, mode)
	if fp == nil {
		return nil, fmt.Errorf("read %s: cannot open", path)
	}
	return fp, nil
}

// ReadRanges reads byte ranges of a file through GDAL's virtual file
// layer (local paths, /vsicurl/, /vsis3/, …) in one batched call, which
// merges neighbouring ranges into one request on network filesystems.
func ReadRanges(path string, offsets, sizes []uint64) ([][]byte, error) {
	if len(offsets) != len(sizes) {
		return nil, fmt.Errorf("read %s: %d offsets for %d sizes", path, len(offsets), len(sizes))
	}
	out := make([][]byte, len(offsets))
	if len(offsets) == 0 {
		return out, nil
	}
	defer netwait.Track(path)()
	fp, err := openVSI(path)
	if err != nil {
		return nil, err
	}
	defer C.VSIFCloseL(fp)
	// The C arrays live in C memory: cgo forbids passing Go pointers to
	// Go memory inside a C call's arguments.
	n := len(offsets)
	ptrs := (*[1 << 28]unsafe.Pointer)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))[:n:n]
	offs := (*[1 << 28]C.vsi_l_offset)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.vsi_l_offset(0)))))[:n:n]
	lens := (*[1 << 28]C.size_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.size_t(0)))))[:n:n]
	defer C.free(unsafe.Pointer(&ptrs[0]))
	defer C.free(unsafe.Pointer(&offs[0]))
	defer C.free(unsafe.Pointer(&lens[0]))
	total := uint64(0)
	for i := range offsets {
		total += sizes[i]
	}
	data := C.malloc(C.size_t(max(total, 1)))
	defer C.free(data)
	at := uint64(0)
	for i := range offsets {
		ptrs[i] = unsafe.Add(data, at)
		offs[i], lens[i] = C.vsi_l_offset(offsets[i]), C.size_t(sizes[i])
		at += sizes[i]
	}
	if C.VSIFReadMultiRangeL(C.int(n), &ptrs[0], &offs[0], &lens[0], fp) != 0 {
		return nil, fmt.Errorf("read %s: %d byte ranges failed", path, n)
	}
	all := C.GoBytes(data, C.int(total))
	at = 0
	for i := range offsets {
		out[i] = all[at : at+sizes[i] : at+sizes[i]]
		at += sizes[i]
	}
	return out, nil
}

// RawWindow returns what a window over dst needs from the band, still
// compressed (l is the band's layout): for a band on dst's grid, the
// window's own rectangle, and c nil; for a band that nests in dst k > 1
// times coarser, when bilinear, the plane that Coarse would read, with its
// geometry in c (and no pixels). Both are nil when the band is neither
// (another grid, not aligned, or a resampling lulc leaves to GDAL).
func (s *Source) RawWindow(dst geo.Grid, l *TileLayout, bilinear bool) (*decode.Rect, *resample.Coarse, error) {
	return s.rawWindow(dst, l, bilinear, l.Rect)
}

// RawWindowPlan is RawWindow without reading the tiles (see RectPlan).
func (s *Source) RawWindowPlan(dst geo.Grid, l *TileLayout, bilinear bool) (*decode.Rect, *resample.Coarse, error) {
	return s.rawWindow(dst, l, bilinear, l.RectPlan)
}

func (s *Source) rawWindow(dst geo.Grid, l *TileLayout, bilinear bool, rect func(x, y, w, h int, nodata *float64) (*decode.Rect, error)) (*decode.Rect, *resample.Coarse, error) {
	if l.DataType != "UInt16" || !s.ownResampling("nearest", []uint16(nil)) {
		return nil, nil, nil
	}
	if x, y, w, h, ok := s.nested(dst); ok && w == dst.Width && h == dst.Height {
		r, err := rect(x, y, w, h, s.NoData)
		return r, nil, err
	}
	win, ok := s.zoomed(dst)
	if !ok || !bilinear {
		return nil, nil, nil
	}
	px, py, pw, ph := win.Need(true)
	c := &resample.Coarse{Window: win, Plane: resample.Plane[uint16]{X0: px, Y0: py, W: pw, H: ph}}
	if s.NoData != nil {
		c.NoData, c.HasNoData = uint16(*s.NoData), true
	}
	r, err := rect(px, py, pw, ph, s.NoData)
	if err != nil {
		return nil, nil, err
	}
	return r, c, nil
}

// ReadRangesInto reads byte ranges of a file into dst (dst[i] holds
// sizes[i] bytes): local files range by range straight into dst, files
// behind GDAL's network filesystems (/vsicurl/, /vsis3/, …) in one batched
// read that merges neighbouring ranges, then copied.
func ReadRangesInto(path string, offsets, sizes []uint64, dst [][]byte) error {
	if len(offsets) != len(sizes) || len(dst) != len(sizes) {
		return fmt.Errorf("read %s: %d offsets, %d sizes, %d buffers", path, len(offsets), len(sizes), len(dst))
	}
	for i := range dst {
		if uint64(len(dst[i])) != sizes[i] {
			return fmt.Errorf("read %s: a buffer of %d bytes for %d", path, len(dst[i]), sizes[i])
		}
	}
	if strings.HasPrefix(path, "/vsi") {
		raw, err := ReadRanges(path, offsets, sizes)
		if err != nil {
			return err
		}
		for i := range raw {
			copy(dst[i], raw[i])
		}
		return nil
	}
	fp, err := openVSI(path)
	if err != nil {
		return err
	}
	defer C.VSIFCloseL(fp)
	for i, off := range offsets {
		if sizes[i] == 0 {
			continue
		}
		// A Go pointer may be passed to C directly: the bytes hold no
		// pointers, and C keeps none.
		if C.VSIFSeekL(fp, C.vsi_l_offset(off), C.SEEK_SET) != 0 ||
			uint64(C.VSIFReadL(unsafe.Pointer(&dst[i][0]), 1, C.size_t(sizes[i]), fp)) != sizes[i] {
			return fmt.Errorf("read %s: %d bytes at %d: short read", path, sizes[i], off)
		}
	}
	return nil
}
