package cuda

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kzlib "github.com/klauspost/compress/zlib"

	"github.com/lulc/lulc/decode"
)

// twinBytes decodes tiles with the Go twin (decode.Tile) into the layout
// DecodeTiles returns: samples in host (little-endian) order, tile after
// tile.
func twinBytes(t *testing.T, tiles [][]byte, f TileFormat) []byte {
	t.Helper()
	out := make([]byte, 0, len(tiles)*f.tileBytes())
	for i, raw := range tiles {
		if f.SampleBytes == 1 {
			px := make([]uint8, f.W*f.H)
			if err := decode.Tile(px, raw, f.Compression, f.Predictor, f.BigEndian, f.W, f.H); err != nil {
				t.Fatalf("twin, tile %d: %v", i, err)
			}
			out = append(out, px...)
			continue
		}
		px := make([]uint16, f.W*f.H)
		if err := decode.Tile(px, raw, f.Compression, f.Predictor, f.BigEndian, f.W, f.H); err != nil {
			t.Fatalf("twin, tile %d: %v", i, err)
		}
		for _, v := range px {
			out = binary.LittleEndian.AppendUint16(out, v)
		}
	}
	return out
}

// encodeTile stores samples as a GeoTIFF writer would: predictor 2
// differences along each row, the byte order, then zlib at a level (or
// with klauspost's encoder, whose blocks differ from the standard
// library's).
func encodeTile(px []uint16, f TileFormat, level int, klaus bool) []byte {
	v := append([]uint16(nil), px...)
	if f.Predictor == 2 {
		for r := range f.H {
			row := v[r*f.W : (r+1)*f.W]
			for i := len(row) - 1; i > 0; i-- {
				row[i] -= row[i-1]
			}
		}
	}
	raw := make([]byte, 0, len(v)*f.SampleBytes)
	for _, s := range v {
		switch {
		case f.SampleBytes == 1:
			raw = append(raw, byte(s))
		case f.BigEndian:
			raw = binary.BigEndian.AppendUint16(raw, s)
		default:
			raw = binary.LittleEndian.AppendUint16(raw, s)
		}
	}
	if f.Compression == "NONE" {
		return raw
	}
	var b bytes.Buffer
	if klaus {
		w, _ := kzlib.NewWriterLevel(&b, level)
		w.Write(raw)
		w.Close()
	} else {
		w, _ := zlib.NewWriterLevel(&b, level)
		w.Write(raw)
		w.Close()
	}
	return b.Bytes()
}

// tileContent makes the samples of one test tile of kind k: smooth
// reflectance with noise (mostly literals and short matches), constant
// (long matches at distance 1 or 2), a short period (matches shorter than
// their length), white noise (stored blocks), and class codes in patches.
func tileContent(r *rand.Rand, k, w, h int, mask uint16) []uint16 {
	px := make([]uint16, w*h)
	for i := range px {
		x, y := i%w, i/w
		switch k {
		case 0:
			px[i] = uint16(800 + 3*x + 2*y + r.IntN(200))
		case 1:
			px[i] = 1234
		case 2:
			px[i] = uint16((x*7 + y) % 5 * 1000)
		case 3:
			px[i] = uint16(r.Uint32())
		default:
			px[i] = uint16((x/9 + y/13) % 12)
		}
		px[i] &= mask
	}
	return px
}

// TestDecodeTilesBitExact decodes DEFLATE and uncompressed tiles of both
// sample sizes, both byte orders and both predictors, written by two zlib
// encoders at every kind of level (stored, Huffman only, fast, default,
// best), and compares the device's samples with the Go twin's.
func TestDecodeTilesBitExact(t *testing.T) {
	dev := gpu(t)
	defer dev.Close()
	r := rand.New(rand.NewPCG(11, 12))
	formats := []TileFormat{
		{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 64, H: 48},
		{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, W: 64, H: 48},
		{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, BigEndian: true, W: 40, H: 40},
		{Compression: "DEFLATE", Predictor: 1, SampleBytes: 1, W: 128, H: 32},
		{Compression: "DEFLATE", Predictor: 2, SampleBytes: 1, W: 128, H: 32},
		{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 512, H: 512},
		{Compression: "NONE", Predictor: 2, SampleBytes: 2, BigEndian: true, W: 32, H: 16},
		{Compression: "NONE", Predictor: 1, SampleBytes: 1, W: 32, H: 16},
	}
	for _, f := range formats {
		mask := uint16(0xffff)
		if f.SampleBytes == 1 {
			mask = 0xff
		}
		var tiles [][]byte
		for k := range 5 {
			for _, level := range []int{0, -2, 1, 6, 9} {
				for _, klaus := range []bool{false, true} {
					tiles = append(tiles, encodeTile(tileContent(r, k, f.W, f.H, mask), f, level, klaus))
				}
			}
		}
		name := fmt.Sprintf("%s-p%d-%db-big%v-%dx%d", f.Compression, f.Predictor, 8*f.SampleBytes, f.BigEndian, f.W, f.H)
		t.Run(name, func(t *testing.T) {
			got, err := DecodeTiles(dev, tiles, f)
			if err != nil {
				t.Fatal(err)
			}
			want := twinBytes(t, tiles, f)
			if i := firstDiff(got, want); i >= 0 {
				tb := f.tileBytes()
				t.Fatalf("tile %d byte %d: device %d, twin %d", i/tb, i%tb, got[i], want[i])
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestDecodeTilesErrors gives the device damaged streams: each is an
// error naming the tile, as it is for the Go twin, and never a fault.
func TestDecodeTilesErrors(t *testing.T) {
	dev := gpu(t)
	defer dev.Close()
	f := TileFormat{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 64, H: 64}
	good := encodeTile(tileContent(rand.New(rand.NewPCG(1, 2)), 0, 64, 64, 0xffff), f, 6, false)
	cases := map[string][]byte{
		"truncated":  good[:len(good)/2],
		"bad header": append([]byte{0x78, 0x00}, good[2:]...),
		"empty":      {},
		"block type": {0x78, 0x9c, 0x07, 0, 0, 0},
		"short":      encodeTile(make([]uint16, 10), TileFormat{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 10, H: 1}, 6, false),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			px := make([]uint16, 64*64)
			if err := decode.Tile(px, bad, "DEFLATE", 1, false, 64, 64); err == nil {
				t.Fatal("the twin decodes it")
			}
			_, err := DecodeTiles(dev, [][]byte{good, bad, good}, f)
			if err == nil || !strings.Contains(err.Error(), "tile 1") {
				t.Fatalf("error %v, want one naming tile 1", err)
			}
			// The device is still usable.
			if _, err := DecodeTiles(dev, [][]byte{good}, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDecodeTilesReal decodes every tile of the real GeoTIFFs in the
// shared sample data (LULC_SHARED_DATA, default ../../shared/data) that the
// device decodes, and compares them with the Go twin, itself tested
// against GDAL in package raster.
func TestDecodeTilesReal(t *testing.T) {
	root := os.Getenv("LULC_SHARED_DATA")
	if root == "" {
		root = "../../shared/data"
	}
	var paths []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tif") {
			paths = append(paths, p)
		}
		return nil
	})
	if len(paths) == 0 {
		t.Skipf("no GeoTIFFs under %s", root)
	}
	dev := gpu(t)
	defer dev.Close()
	decoded := 0
	for _, p := range paths {
		tiles, f, err := readTIFFTiles(p)
		if err != nil {
			t.Logf("%s: %v", p, err)
			continue
		}
		if !Decodable(f) {
			t.Logf("%s: %s with predictor %d, %d-byte samples: not for the device", p, f.Compression, f.Predictor, f.SampleBytes)
			continue
		}
		got, err := DecodeTiles(dev, tiles, f)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want := twinBytes(t, tiles, f)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%s: tile %d byte %d differs", p, i/f.tileBytes(), i%f.tileBytes())
		}
		decoded++
		t.Logf("%s: %d tiles of %d×%d, %s, predictor %d: identical", p, len(tiles), f.W, f.H, f.Compression, f.Predictor)
	}
	if decoded == 0 {
		t.Fatal("no real GeoTIFF was decodable on the device")
	}
}

// readTIFFTiles reads the tiles of a single-sample tiled TIFF's first
// image, as they lie in the file (tiles never written are left out).
func readTIFFTiles(path string) ([][]byte, TileFormat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, TileFormat{}, err
	}
	if len(b) < 16 {
		return nil, TileFormat{}, fmt.Errorf("not a TIFF")
	}
	var o binary.ByteOrder = binary.LittleEndian
	f := TileFormat{Predictor: 1}
	switch string(b[:2]) {
	case "II":
	case "MM":
		o, f.BigEndian = binary.BigEndian, true
	default:
		return nil, f, fmt.Errorf("not a TIFF")
	}
	big := o.Uint16(b[2:]) == 43
	var ifd uint64
	if big {
		ifd = o.Uint64(b[8:])
	} else {
		ifd = uint64(o.Uint32(b[4:]))
	}
	tags := map[uint16][]uint64{}
	count, entry, at := uint64(0), uint64(12), ifd+2
	if big {
		count, entry, at = o.Uint64(b[ifd:]), 20, ifd+8
	} else {
		count = uint64(o.Uint16(b[ifd:]))
	}
	for e := range count {
		p := at + e*entry
		tag, typ := o.Uint16(b[p:]), o.Uint16(b[p+2:])
		var n, off uint64
		inline := uint64(4)
		if big {
			n, off, inline = o.Uint64(b[p+4:]), p+12, 8
		} else {
			n, off = uint64(o.Uint32(b[p+4:])), p+8
		}
		size := map[uint16]uint64{3: 2, 4: 4, 16: 8}[typ]
		if size == 0 {
			continue
		}
		if n*size > inline {
			if big {
				off = o.Uint64(b[off:])
			} else {
				off = uint64(o.Uint32(b[off:]))
			}
		}
		vals := make([]uint64, n)
		for i := range vals {
			q := off + uint64(i)*size
			switch size {
			case 2:
				vals[i] = uint64(o.Uint16(b[q:]))
			case 4:
				vals[i] = uint64(o.Uint32(b[q:]))
			default:
				vals[i] = o.Uint64(b[q:])
			}
		}
		tags[tag] = vals
	}
	one := func(tag uint16, def uint64) uint64 {
		if v := tags[tag]; len(v) > 0 {
			return v[0]
		}
		return def
	}
	if one(277, 1) != 1 || tags[322] == nil {
		return nil, f, fmt.Errorf("not a single-sample tiled image")
	}
	f.W, f.H = int(one(322, 0)), int(one(323, 0))
	f.SampleBytes = int(one(258, 1)) / 8
	f.Predictor = int(one(317, 1))
	f.Compression = map[uint64]string{1: "NONE", 5: "LZW", 7: "JPEG", 8: "DEFLATE", 32946: "DEFLATE", 50000: "ZSTD"}[one(259, 1)]
	if f.Compression == "" {
		f.Compression = fmt.Sprintf("code %d", one(259, 1))
	}
	offs, sizes := tags[324], tags[325]
	var tiles [][]byte
	for i := range offs {
		if sizes[i] == 0 {
			continue
		}
		tiles = append(tiles, b[offs[i]:offs[i]+sizes[i]])
	}
	return tiles, f, nil
}
