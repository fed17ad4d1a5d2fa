package raster

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/decode"
)

// checkRawTiles reads every tile of path's band 1 (at most limit) through
// Layout and ReadRanges, decodes it with package decode and compares the
// pixels with GDAL's read of the same block. It returns false when the
// file is not one lulc decodes itself (that is GDAL's fallback).
func checkRawTiles(t *testing.T, path string, limit int) bool {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Layout()
	if err != nil {
		t.Logf("%s: GDAL reads it: %v", filepath.Base(path), err)
		return false
	}
	if !decode.Supported(l.Compression, l.Predictor) || (l.DataType != "UInt16" && l.DataType != "Byte") {
		t.Logf("%s: GDAL reads it: %s, predictor %d, %s", filepath.Base(path), l.Compression, l.Predictor, l.DataType)
		return false
	}
	var idx []int
	for i := range l.Offsets {
		if l.Sizes[i] > 0 && len(idx) < limit {
			idx = append(idx, i)
		}
	}
	offs, sizes := make([]uint64, len(idx)), make([]uint64, len(idx))
	for k, i := range idx {
		offs[k], sizes[k] = l.Offsets[i], l.Sizes[i]
	}
	raw, err := ReadRanges(l.Path, offs, sizes)
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range idx {
		tx, ty := i%l.TilesX, i/l.TilesX
		if l.DataType == "UInt16" {
			compareTile[uint16](t, s, l, raw[k], tx, ty)
		} else {
			compareTile[uint8](t, s, l, raw[k], tx, ty)
		}
	}
	t.Logf("%s: %d tiles (%s, predictor %d, %s) equal GDAL's", filepath.Base(path), len(idx), l.Compression, l.Predictor, l.DataType)
	return true
}

// compareTile decodes tile (tx, ty)'s bytes with package decode and
// compares its pixels inside the raster with GDAL's read of them.
func compareTile[T uint8 | uint16](t *testing.T, s *Source, l TileLayout, raw []byte, tx, ty int) {
	t.Helper()
	bw, bh := l.Block[0], l.Block[1]
	w, h := min(bw, l.Width-tx*bw), min(bh, l.Height-ty*bh)
	got, want := make([]T, bw*bh), make([]T, w*h)
	if err := decode.Tile(got, raw, l.Compression, l.Predictor, l.BigEndian, bw, bh); err != nil {
		t.Fatalf("%s tile (%d, %d): %v", s.Href, tx, ty, err)
	}
	if err := ReadBandWindowInto(s, 1, tx*bw, ty*bh, w, h, want); err != nil {
		t.Fatal(err)
	}
	for r := range h {
		if !slices.Equal(got[r*bw:r*bw+w], want[r*w:(r+1)*w]) {
			t.Fatalf("%s tile (%d, %d) row %d differs from GDAL", s.Href, tx, ty, r)
		}
	}
}

// TestRawTilesSynthetic writes COGs with lulc's encoder and with GDAL's,
// with and without the predictor, in each compression, and decodes every
// tile outside GDAL.
func TestRawTilesSynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const w, h = 700, 530 // edge tiles are partial
	u16, u8 := make([]uint16, w*h), make([]uint8, w*h)
	for i := range u16 {
		u16[i] = uint16(800 + (i%w)*3 + r.IntN(400))
		u8[i] = uint8(10 * (1 + (i%w/37+i/w/53)%9))
	}
	g := Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	dir := t.TempDir()
	for _, enc := range []string{"lulc", "gdal"} {
		t.Run(enc, func(t *testing.T) {
			if enc == "gdal" {
				t.Setenv(cogEncoderEnv, "gdal")
			}
			for _, c := range []struct {
				comp string
				pred bool
			}{{"DEFLATE", false}, {"DEFLATE", true}, {"ZSTD", true}, {"NONE", false}} {
				name := filepath.Join(dir, enc+"-"+c.comp+map[bool]string{true: "-pred", false: ""}[c.pred])
				if err := WriteCOG(name+"-u16.tif", g, u16, COGOptions{BlockSize: 256, Compress: c.comp, Predictor: c.pred}); err != nil {
					t.Fatal(err)
				}
				if !checkRawTiles(t, name+"-u16.tif", 1<<20) {
					t.Fatalf("%s: not decoded by lulc", name)
				}
				if err := WriteCOG(name+"-u8.tif", g, u8, COGOptions{BlockSize: 256, Compress: c.comp, Predictor: c.pred}); err != nil {
					t.Fatal(err)
				}
				if !checkRawTiles(t, name+"-u8.tif", 1<<20) {
					t.Fatalf("%s: not decoded by lulc", name)
				}
			}
		})
	}
	// LZW is GDAL's: Supported says so, and Tile refuses it.
	if err := decode.Tile(make([]uint16, 4), nil, "LZW", 1, false, 2, 2); !errors.Is(err, decode.ErrUnsupported) {
		t.Fatalf("LZW: %v", err)
	}
}

// TestRawTilesReal decodes the tiles of every GeoTIFF in ../shared/data
// that lulc decodes itself, and compares them with GDAL's reads.
func TestRawTilesReal(t *testing.T) {
	root := "../../shared/data"
	if _, err := os.Stat(root); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	decoded := 0
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".tif") && checkRawTiles(t, p, 64) {
			decoded++
		}
		return nil
	})
	if decoded == 0 {
		t.Fatal("no file in the sample data was decoded by lulc")
	}
}
