package raster

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/decode"
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
	g := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	dir := t.TempDir()
	for _, enc := range []string{"lulc", "gdal"} {
		t.Run(enc, func(t *testing.T) {
			for _, c := range []struct {
				comp string
				pred bool
			}{{"DEFLATE", false}, {"DEFLATE", true}, {"ZSTD", true}, {"NONE", false}} {
				name := filepath.Join(dir, enc+"-"+c.comp+map[bool]string{true: "-pred", false: ""}[c.pred])
				if err := WriteCOG(name+"-u16.tif", g, u16, COGOptions{BlockSize: 256, Compress: c.comp, Predictor: c.pred, GDALDriver: enc == "gdal"}); err != nil {
					t.Fatal(err)
				}
				if !checkRawTiles(t, name+"-u16.tif", 1<<20) {
					t.Fatalf("%s: not decoded by lulc", name)
				}
				if err := WriteCOG(name+"-u8.tif", g, u8, COGOptions{BlockSize: 256, Compress: c.comp, Predictor: c.pred, GDALDriver: enc == "gdal"}); err != nil {
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
	root := "../../../shared/data"
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

// TestRawWindow reads windows of a 10 m and a 20 m band still compressed
// (RawWindow), decodes them with package decode, and compares them with
// GDAL's read of the 10 m window and with the plane Coarse reads for the
// 20 m band, at the rasters' edges and with a tile never written.
func TestRawWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	dir := t.TempDir()
	const w, h = 700, 530
	fine, coarse := make([]uint16, w*h), make([]uint16, (w/2)*(h/2))
	for i := range fine {
		fine[i] = uint16(800 + (i%w)*3 + r.IntN(400))
	}
	for i := range coarse {
		coarse[i] = uint16(600 + (i%(w/2))*2 + r.IntN(900))
	}
	g10 := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	g20 := geo.Grid{EPSG: 32631, Width: w / 2, Height: h / 2, Transform: [6]float64{500000, 20, 0, 5000000, 0, -20}}
	nd := 0.0
	if err := WriteCOG(filepath.Join(dir, "b10.tif"), g10, fine, COGOptions{BlockSize: 128, Compress: "DEFLATE", NoData: &nd}); err != nil {
		t.Fatal(err)
	}
	if err := WriteCOG(filepath.Join(dir, "b20.tif"), g20, coarse, COGOptions{BlockSize: 128, Compress: "DEFLATE", Predictor: true, NoData: &nd}); err != nil {
		t.Fatal(err)
	}
	s10, err := Open(filepath.Join(dir, "b10.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer s10.Close()
	s20, err := Open(filepath.Join(dir, "b20.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer s20.Close()
	l10, err := s10.Layout()
	if err != nil {
		t.Fatal(err)
	}
	l20, err := s20.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l10.ID == l20.ID || !strings.HasPrefix(l10.ID, l10.Path+"#") {
		t.Fatalf("layout IDs %q and %q", l10.ID, l20.ID)
	}
	for _, win := range [][4]int{{0, 0, 256, 256}, {256, 256, 256, 256}, {512, 384, 188, 146}, {100, 60, 300, 200}} {
		x, y, ww, wh := win[0], win[1], win[2], win[3]
		dst := geo.Grid{EPSG: 32631, Width: ww, Height: wh, Transform: [6]float64{500000 + 10*float64(x), 10, 0, 5000000 - 10*float64(y), 0, -10}}
		raw, c, err := s10.RawWindow(dst, &l10, true)
		if err != nil || raw == nil || c != nil {
			t.Fatalf("window %v, 10 m: %v, %v, %v", win, raw, c, err)
		}
		got, err := raw.Uint16()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]uint16, ww*wh)
		if err := s10.Read(dst, "bilinear", want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("window %v: 10 m pixels differ from GDAL's", win)
		}
		if ww%2 != 0 || wh%2 != 0 {
			continue
		}
		raw, c, err = s20.RawWindow(dst, &l20, true)
		if err != nil || raw == nil || c == nil {
			t.Fatalf("window %v, 20 m: %v, %v, %v", win, raw, c, err)
		}
		ref, err := s20.Coarse(dst, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Window != ref.Window || c.Plane.X0 != ref.Plane.X0 || c.Plane.W != ref.Plane.W || c.Plane.H != ref.Plane.H || c.NoData != ref.NoData || !c.HasNoData {
			t.Fatalf("window %v: coarse geometry %+v, want %+v", win, c, ref)
		}
		if got, err = raw.Uint16(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ref.Plane.Pix) {
			t.Fatalf("window %v: 20 m plane differs from Coarse's", win)
		}
		if _, _, err := s20.RawWindow(dst, &l20, false); err != nil {
			t.Fatal(err)
		}
	}
	// A window off the band's grid is not for raw reads.
	off := geo.Grid{EPSG: 32631, Width: 64, Height: 64, Transform: [6]float64{500005, 10, 0, 5000000, 0, -10}}
	if raw, c, err := s10.RawWindow(off, &l10, true); raw != nil || c != nil || err != nil {
		t.Fatalf("off-grid window: %v %v %v", raw, c, err)
	}
}
