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
