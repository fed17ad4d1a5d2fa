package raster

// #cgo pkg-config: gdal
// #include <stdlib.h>
// #include <cpl_vsi.h>
import "C"

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/airbusgeo/godal"
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
}

// Layout describes the source's band 1 for raw tile reads. Rasters that
// are not tiled single-band GeoTIFFs (strips, VRTs, several bands
// interleaved by pixel) give an error saying why; callers then read
// through GDAL.
func (s *Source) Layout() (TileLayout, error) {
	if d := s.ds.Driver().ShortName(); d != "GTiff" && d != "COG" {
		return TileLayout{}, fmt.Errorf("layout %s: a %s raster, not a GeoTIFF", s.Href, d)
	}
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
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	mode := C.CString("rb")
	defer C.free(unsafe.Pointer(mode))
	fp := C.VSIFOpenL(cpath, mode)
	if fp == nil {
		return nil, fmt.Errorf("read %s: cannot open", path)
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
