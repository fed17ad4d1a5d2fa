// Package decode is lulc's own decoding of compressed GeoTIFF tiles, the
// bytes raster.ReadRanges returns for a raster.TileLayout: DEFLATE (a zlib
// stream), ZSTD or no compression, then TIFF predictor 2 (horizontal
// differencing) undone, for 8- and 16-bit samples in either byte order.
// It is the CPU twin that the GPU's inflate kernels must match byte for
// byte, and is itself tested byte for byte against GDAL. It imports
// neither GDAL nor cgo.
//
// A tile holds Block[0]×Block[1] samples whatever its place in the
// raster (edge tiles are padded), rows top to bottom. Predictor 2 stores
// each sample of a row as its difference from the previous one, modulo
// 2⁸ or 2¹⁶; decoding sums them back along the row.
package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// ErrUnsupported marks a tile this package does not decode (LZW, JPEG,
// floating-point predictor, …): the caller reads it through GDAL.
var ErrUnsupported = errors.New("not decoded by lulc")

// Supported says whether Tile decodes tiles of this compression and
// predictor.
func Supported(compression string, predictor int) bool {
	switch compression {
	case "DEFLATE", "ZSTD", "NONE":
	default:
		return false
	}
	return predictor == 1 || predictor == 2
}

// zstdDecoder is shared: its DecodeAll is safe for concurrent use.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))

// Tile decodes one tile of w×h samples into dst (len w×h): uint8 or
// uint16 samples, as the raster's data type says.
func Tile[T uint8 | uint16](dst []T, src []byte, compression string, predictor int, bigEndian bool, w, h int) error {
	if !Supported(compression, predictor) {
		return fmt.Errorf("decode: compression %s with predictor %d: %w", compression, predictor, ErrUnsupported)
	}
	if len(dst) != w*h {
		return fmt.Errorf("decode: %d samples for a %d×%d tile", len(dst), w, h)
	}
	size := int(unsafeSize[T]())
	raw, err := inflate(src, compression, w*h*size)
	if err != nil {
		return err
	}
	if len(raw) < w*h*size {
		return fmt.Errorf("decode: %d bytes for a %d×%d tile of %d-byte samples", len(raw), w, h, size)
	}
	switch d := any(dst).(type) {
	case []uint8:
		copy(d, raw)
	case []uint16:
		var order binary.ByteOrder = binary.LittleEndian
		if bigEndian {
			order = binary.BigEndian
		}
		for i := range d {
			d[i] = order.Uint16(raw[2*i:])
		}
	}
	if predictor == 2 {
		for r := range h {
			row := dst[r*w : (r+1)*w]
			for i := 1; i < len(row); i++ {
				row[i] += row[i-1] // wraps modulo 2⁸ or 2¹⁶, as the encoder's difference did
			}
		}
	}
	return nil
}

// inflate undoes the tile's compression into at least want bytes.
func inflate(src []byte, compression string, want int) ([]byte, error) {
	switch compression {
	case "NONE":
		return src, nil
	case "ZSTD":
		out, err := zstdDecoder.DecodeAll(src, make([]byte, 0, want))
		if err != nil {
			return nil, fmt.Errorf("decode: zstd: %w", err)
		}
		return out, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("decode: deflate: %w", err)
	}
	defer zr.Close()
	out := make([]byte, want)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("decode: deflate: %w", err)
	}
	return out, nil
}

func unsafeSize[T uint8 | uint16]() uintptr {
	var v T
	switch any(v).(type) {
	case uint16:
		return 2
	}
	return 1
}

// Format is how a band's tiles are stored: what Tile takes besides their
// bytes.
type Format struct {
	Compression string // GDAL's name: DEFLATE, ZSTD, NONE, …
	Predictor   int    // 1 none, 2 horizontal differencing
	BigEndian   bool
	SampleBytes int // 1 (Byte) or 2 (UInt16)
	W, H        int // samples per tile row, rows per tile
}

// TileBytes is the size of one decoded tile.
func (f Format) TileBytes() int { return f.W * f.H * f.SampleBytes }

// Rect is a rectangle of a tiled band held as the compressed tiles that
// cover it, not yet decoded: what a window of a composite needs from one
// band, for a decoder on the host (Uint16) or on the device.
type Rect struct {
	X, Y, W, H int    // the rectangle, in the band's pixels
	Format     Format // of every tile
	// File names the band (its path): File and a tile's index in the
	// band identify the tile, so that decoders may keep decoded tiles.
	File     string
	TilesX   int      // tiles across the whole band
	TX0, TY0 int      // the first tile of the span covering the rectangle
	TW, TH   int      // the span, in tiles
	Tiles    [][]byte // TW×TH compressed tiles, row-major; nil: never written
	Fill     uint16   // the value of pixels of tiles never written
}

// Tile returns the band-wide index of tile (i, j) of the span.
func (r *Rect) Tile(i, j int) int { return (r.TY0+j)*r.TilesX + r.TX0 + i }

// Uint16 decodes the tiles and returns the rectangle's samples, row-major.
func (r *Rect) Uint16() ([]uint16, error) {
	f := r.Format
	if f.SampleBytes != 2 {
		return nil, fmt.Errorf("decode %s: %d-byte samples, not 2", r.File, f.SampleBytes)
	}
	if len(r.Tiles) != r.TW*r.TH {
		return nil, fmt.Errorf("decode %s: %d tiles for a span of %d×%d", r.File, len(r.Tiles), r.TW, r.TH)
	}
	out := make([]uint16, r.W*r.H)
	tile := make([]uint16, f.W*f.H)
	for j := range r.TH {
		for i := range r.TW {
			raw := r.Tiles[j*r.TW+i]
			if raw == nil {
				for k := range tile {
					tile[k] = r.Fill
				}
			} else if err := Tile(tile, raw, f.Compression, f.Predictor, f.BigEndian, f.W, f.H); err != nil {
				return nil, fmt.Errorf("decode %s tile %d: %w", r.File, r.Tile(i, j), err)
			}
			// The part of the tile inside the rectangle, in band pixels.
			tx, ty := (r.TX0+i)*f.W, (r.TY0+j)*f.H
			x0, x1 := max(tx, r.X), min(tx+f.W, r.X+r.W)
			y0, y1 := max(ty, r.Y), min(ty+f.H, r.Y+r.H)
			for y := y0; y < y1; y++ {
				copy(out[(y-r.Y)*r.W+x0-r.X:(y-r.Y)*r.W+x1-r.X], tile[(y-ty)*f.W+x0-tx:(y-ty)*f.W+x1-tx])
			}
		}
	}
	return out, nil
}
