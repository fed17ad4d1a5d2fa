package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// encode is a TIFF writer's side of a tile, written here from the TIFF 6.0
// rules (predictor 2 differences along each row, then the compression),
// so that Tile is checked against the encoding rather than against itself.
func encode(t *testing.T, samples []uint16, w, h, bytesPer int, compression string, predictor int, bigEndian bool) []byte {
	t.Helper()
	diff := slices.Clone(samples)
	if predictor == 2 {
		for r := range h {
			for i := w - 1; i > 0; i-- {
				diff[r*w+i] -= diff[r*w+i-1]
				if bytesPer == 1 {
					diff[r*w+i] &= 0xff
				}
			}
		}
	}
	var raw []byte
	var order binary.AppendByteOrder = binary.LittleEndian
	if bigEndian {
		order = binary.BigEndian
	}
	for _, v := range diff {
		if bytesPer == 1 {
			raw = append(raw, byte(v))
		} else {
			raw = order.AppendUint16(raw, v)
		}
	}
	var b bytes.Buffer
	switch compression {
	case "NONE":
		return raw
	case "DEFLATE":
		z := zlib.NewWriter(&b)
		z.Write(raw)
		z.Close()
	case "ZSTD":
		z, _ := zstd.NewWriter(&b)
		z.Write(raw)
		z.Close()
	}
	return b.Bytes()
}

// TestTileRoundTrip: every supported compression and predictor, 8- and
// 16-bit samples in both byte orders, random samples with runs (so that
// the compressors find matches) decode to what was encoded.
func TestTileRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	const w, h = 37, 19
	for _, compression := range []string{"NONE", "DEFLATE", "ZSTD"} {
		for _, predictor := range []int{1, 2} {
			for _, bytesPer := range []int{1, 2} {
				for _, big := range []bool{false, true} {
					samples := make([]uint16, w*h)
					for i := range samples {
						if i > 0 && r.IntN(3) == 0 {
							samples[i] = samples[i-1]
							continue
						}
						samples[i] = uint16(r.IntN(1 << (8 * bytesPer)))
					}
					src := encode(t, samples, w, h, bytesPer, compression, predictor, big)
					var got []uint16
					var err error
					if bytesPer == 1 {
						d := make([]uint8, w*h)
						err = Tile(d, src, compression, predictor, big, w, h)
						for _, v := range d {
							got = append(got, uint16(v))
						}
					} else {
						got = make([]uint16, w*h)
						err = Tile(got, src, compression, predictor, big, w, h)
					}
					if err != nil || !slices.Equal(got, samples) {
						t.Errorf("%s predictor %d, %d-byte samples, big-endian %v: %v, samples equal %v", compression, predictor, bytesPer, big, err, slices.Equal(got, samples))
					}
				}
			}
		}
	}
}

// TestTileRefuses: what Tile does not decode is ErrUnsupported (the
// caller reads it through GDAL), and damaged or short tiles are errors
// that say what is wrong.
func TestTileRefuses(t *testing.T) {
	t.Parallel()
	dst := make([]uint16, 16)
	if err := Tile(dst, []byte{1}, "LZW", 1, false, 4, 4); !errors.Is(err, ErrUnsupported) {
		t.Errorf("LZW: %v", err)
	}
	if err := Tile(dst, []byte{1}, "DEFLATE", 3, false, 4, 4); !errors.Is(err, ErrUnsupported) {
		t.Errorf("floating-point predictor: %v", err)
	}
	if err := Tile(dst, make([]byte, 32), "NONE", 1, false, 5, 4); err == nil || !strings.Contains(err.Error(), "16 samples for a 5×4 tile") {
		t.Errorf("a destination of the wrong size: %v", err)
	}
	if err := Tile(dst, make([]byte, 10), "NONE", 1, false, 4, 4); err == nil {
		t.Error("a short uncompressed tile decoded")
	}
	if err := Tile(dst, []byte("not zlib at all"), "DEFLATE", 1, false, 4, 4); err == nil {
		t.Error("a damaged DEFLATE tile decoded")
	}
}

// TestRectUint16: a rectangle over a 2×2 span of tiles, one never written
// (its pixels take Fill), reads the pixels of the band it cuts out.
func TestRectUint16(t *testing.T) {
	t.Parallel()
	const tw, th = 8, 8
	band := func(x, y int) uint16 { return uint16(100*y + x) }
	f := Format{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, W: tw, H: th}
	r := &Rect{X: 5, Y: 3, W: 7, H: 9, Format: f, File: "b.tif", TilesX: 2, TW: 2, TH: 2, Fill: 7}
	for j := range 2 {
		for i := range 2 {
			if i == 1 && j == 1 {
				r.Tiles = append(r.Tiles, nil)
				continue
			}
			s := make([]uint16, tw*th)
			for y := range th {
				for x := range tw {
					s[y*tw+x] = band(i*tw+x, j*th+y)
				}
			}
			r.Tiles = append(r.Tiles, encode(t, s, tw, th, 2, "DEFLATE", 2, false))
		}
	}
	got, err := r.Uint16()
	if err != nil {
		t.Fatal(err)
	}
	for y := range r.H {
		for x := range r.W {
			bx, by := r.X+x, r.Y+y
			want := band(bx, by)
			if bx >= tw && by >= th {
				want = r.Fill
			}
			if got[y*r.W+x] != want {
				t.Fatalf("pixel (%d, %d) of the band: %d, want %d", bx, by, got[y*r.W+x], want)
			}
		}
	}
}
