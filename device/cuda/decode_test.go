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

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/pixel/composite"
)

// twinBytes decodes tiles with the Go twin (decode.Tile) into the layout
// DecodeTiles returns: samples in host (little-endian) order, tile after
// tile.
func twinBytes(t *testing.T, tiles [][]byte, f decode.Format) []byte {
	t.Helper()
	out := make([]byte, 0, len(tiles)*f.TileBytes())
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
func encodeTile(px []uint16, f decode.Format, level int, klaus bool) []byte {
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
	formats := []decode.Format{
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
				tb := f.TileBytes()
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
	f := decode.Format{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 64, H: 64}
	good := encodeTile(tileContent(rand.New(rand.NewPCG(1, 2)), 0, 64, 64, 0xffff), f, 6, false)
	cases := map[string][]byte{
		"truncated":  good[:len(good)/2],
		"bad header": append([]byte{0x78, 0x00}, good[2:]...),
		"empty":      {},
		"block type": {0x78, 0x9c, 0x07, 0, 0, 0},
		"short":      encodeTile(make([]uint16, 10), decode.Format{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 10, H: 1}, 6, false),
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
		root = "../../../shared/data"
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
			t.Fatalf("%s: tile %d byte %d differs", p, i/f.TileBytes(), i%f.TileBytes())
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
func readTIFFTiles(path string) ([][]byte, decode.Format, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, decode.Format{}, err
	}
	if len(b) < 16 {
		return nil, decode.Format{}, fmt.Errorf("not a TIFF")
	}
	var o binary.ByteOrder = binary.LittleEndian
	f := decode.Format{Predictor: 1}
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

// testBand is a band stored as tiles, for building compressed rectangles.
type testBand struct {
	file  string
	w, h  int
	f     decode.Format
	tiles [][]byte // nil: never written
	fill  uint16
}

// newTestBand tiles a w×h band of random reflectances (zeros here and
// there: nodata) and compresses each tile; every seventh tile is left
// unwritten.
func newTestBand(r *rand.Rand, file string, w, h int, f decode.Format) *testBand {
	b := &testBand{file: file, w: w, h: h, f: f}
	tx, ty := (w+f.W-1)/f.W, (h+f.H-1)/f.H
	for j := range ty {
		for i := range tx {
			if (j*tx+i)%7 == 3 {
				b.tiles = append(b.tiles, nil)
				continue
			}
			px := make([]uint16, f.W*f.H)
			for k := range px {
				if x, y := i*f.W+k%f.W, j*f.H+k/f.W; x < w && y < h && r.IntN(12) > 0 {
					px[k] = uint16(200 + x + 2*y + r.IntN(3000))
				}
			}
			b.tiles = append(b.tiles, encodeTile(px, f, 6, false))
		}
	}
	return b
}

// rect returns the compressed rectangle (x, y, w, h) of the band.
func (b *testBand) rect(x, y, w, h int) *decode.Rect {
	f := b.f
	tilesX := (b.w + f.W - 1) / f.W
	r := &decode.Rect{X: x, Y: y, W: w, H: h, Format: f, File: b.file, TilesX: tilesX, Fill: b.fill,
		TX0: x / f.W, TY0: y / f.H}
	r.TW, r.TH = (x+w-1)/f.W-r.TX0+1, (y+h-1)/f.H-r.TY0+1
	for j := range r.TH {
		for i := range r.TW {
			r.Tiles = append(r.Tiles, b.tiles[r.Tile(i, j)])
		}
	}
	return r
}

// TestCompositeRawBitExact composites windows whose bands arrive
// compressed (a band at the window's resolution, and a coarse band with its
// bilinear halo, whose tiles the device keeps between windows) beside a
// host plane, on the device and on the CPU (composite.Resample decodes with
// the Go twin), over windows that share tiles, at the rasters' edges too.
// With held, the windows pass Held for the tiles decoded ahead, as the
// pipeline's reader does once the device holds them, and a cache of a
// few slots makes the device decode most of them again from its copy;
// once the batch is released, such a window is an error that names the
// tile.
func TestCompositeRawBitExact(t *testing.T) {
	// Both ways of copying a row decoded ahead: through the pinned
	// staging, and from its pageable memory.
	for _, mode := range []struct {
		staging string
		held    bool
	}{{"on", false}, {"off", false}, {"on", true}} {
		name := "staging-" + mode.staging
		if mode.held {
			name = "held"
		}
		t.Run(name, func(t *testing.T) {
			d := gpuWith(t, Options{Pageable: mode.staging == "off"})
			defer d.Close()
			r := rand.New(rand.NewPCG(31, 32))
			const rw, rh, k = 300, 260, 2
			fine := decode.Format{Compression: "DEFLATE", Predictor: 1, SampleBytes: 2, W: 64, H: 64}
			coarse := decode.Format{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, W: 32, H: 32}
			nd := 3
			var fines, coarses []*testBand
			for di := range nd {
				fines = append(fines, newTestBand(r, fmt.Sprintf("fine-%d.tif", di), rw, rh, fine))
				cb := newTestBand(r, fmt.Sprintf("coarse-%d.tif", di), rw/k, rh/k, coarse)
				cb.fill = 7
				coarses = append(coarses, cb)
			}
			windows := [][4]int{{0, 0, 128, 128}, {128, 0, 128, 128}, {0, 128, 128, 128}, {128, 128, 128, 128}, {256, 128, 44, 132}, {64, 64, 100, 60}}
			// The first four windows' 10 m tiles are decoded ahead, as a row of
			// windows is: those windows find them on the device (its cache keeps
			// tiles of that size only; the coarse ones are decoded per window).
			var ahead []*decode.Rect
			for _, w := range windows[:4] {
				for di := range nd {
					ahead = append(ahead, fines[di].rect(w[0], w[1], w[2], w[3]))
				}
			}
			b, err := packAhead(ahead)
			if err != nil {
				t.Fatal(err)
			}
			const slots = 5
			if mode.held {
				if err := d.Do(func() (err error) {
					d.tiles, err = newTileCacheSlots(uint64(fine.TileBytes()), slots)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := DecodeAhead(d, b); err != nil {
				t.Fatal(err)
			}
			packed := len(b.keys[fine])
			if want := packed; mode.held && (!b.Held() || len(d.tiles.slot) != slots || len(d.held) != want) {
				t.Fatalf("held: batch held %v, %d tiles cached (want %d), %d held (want %d)", b.Held(), len(d.tiles.slot), slots, len(d.held), want)
			} else if !mode.held && len(d.tiles.slot) != packed {
				t.Fatalf("%d tiles decoded ahead, %d packed", len(d.tiles.slot), packed)
			}
			inBatch := map[string]bool{}
			for _, k := range b.keys[fine] {
				inBatch[k] = true
			}
			// hold replaces the tiles the batch holds by Held.
			hold := func(r *decode.Rect) *decode.Rect {
				if mode.held {
					for j := range r.TH {
						for i := range r.TW {
							if inBatch[TileKey(r, i, j)] && r.Tiles[j*r.TW+i] != nil {
								r.Tiles[j*r.TW+i] = Held
							}
						}
					}
				}
				return r
			}
			for _, w := range windows {
				n := w[2] * w[3]
				win := resample.Window{X: w[0], Y: w[1], W: w[2], H: w[3], K: k, RasterW: rw / k, RasterH: rh / k}
				cpu, dev := make([]composite.Date, nd), make([]composite.Date, nd)
				cpuSide := false
				for di := range nd {
					mk := func() composite.Date {
						cd := composite.Date{SCL: make([]uint8, n), NoData: []uint16{0, 0, 0}, Scale: []float64{1e-4, 1e-4, 1e-4},
							Offset: []float64{-0.1, -0.1, -0.1}, Coarse: make([]*resample.Coarse, 3), Raw: make([]*decode.Rect, 3), DN: make([][]uint16, 3)}
						for i := range cd.SCL {
							cd.SCL[i] = uint8((i*7 + di) % 12)
						}
						cd.Raw[0] = fines[di].rect(w[0], w[1], w[2], w[3])
						if !cpuSide {
							hold(cd.Raw[0])
						}
						px, py, pw, ph := win.Need(true)
						cd.Raw[1] = coarses[di].rect(px, py, pw, ph)
						cd.Coarse[1] = &resample.Coarse{Window: win, Plane: resample.Plane[uint16]{X0: px, Y0: py, W: pw, H: ph}, HasNoData: true}
						host := make([]uint16, n)
						for i := range host {
							host[i] = uint16(500 + (i*31+di*17)%4000)
						}
						cd.DN[2] = host
						return cd
					}
					cpuSide = true
					cpu[di] = mk()
					cpuSide = false
					dev[di] = mk()
				}
				want, got := [][]uint16{make([]uint16, n), make([]uint16, n), make([]uint16, n)}, [][]uint16{make([]uint16, n), make([]uint16, n), make([]uint16, n)}
				wc, gc := make([]uint8, n), make([]uint8, n)
				if err := composite.Resample(cpu); err != nil {
					t.Fatal(err)
				}
				if err := composite.Window(cpu, composite.DefaultDropSCL, 1e-4, -0.1, want, wc); err != nil {
					t.Fatal(err)
				}
				if err := Composite(d, dev, composite.DefaultDropSCL, 1e-4, -0.1, got, gc); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if wc[i] != gc[i] {
						t.Fatalf("window %v pixel %d: count CPU %d, GPU %d", w, i, wc[i], gc[i])
					}
					for b := range 3 {
						if want[b][i] != got[b][i] {
							t.Fatalf("window %v pixel %d band %d: CPU %d, GPU %d", w, i, b, want[b][i], got[b][i])
						}
					}
				}
			}
			if !mode.held {
				return
			}
			// Released, the tiles passed as Held are gone: the window is an
			// error naming one, not samples of another tile.
			ReleaseAhead(d, b)
			if len(d.held) != 0 || len(d.heldBufs) != 0 {
				t.Fatalf("released: %d tiles, %d buffers still held", len(d.held), len(d.heldBufs))
			}
			if err := d.Do(func() (err error) {
				d.tiles.release()
				d.tiles, err = newTileCacheSlots(uint64(fine.TileBytes()), slots)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			w := windows[0]
			n := w[2] * w[3]
			cd := composite.Date{SCL: make([]uint8, n), NoData: []uint16{0}, Scale: []float64{1e-4}, Offset: []float64{-0.1},
				Coarse: make([]*resample.Coarse, 1), Raw: []*decode.Rect{hold(fines[0].rect(w[0], w[1], w[2], w[3]))}, DN: make([][]uint16, 1)}
			err = Composite(d, []composite.Date{cd}, composite.DefaultDropSCL, 1e-4, -0.1, [][]uint16{make([]uint16, n)}, make([]uint8, n))
			if err == nil || !strings.Contains(err.Error(), "no longer holds them") || !strings.Contains(err.Error(), "fine-0.tif") {
				t.Fatalf("a released tile decoded: %v", err)
			}
		})
	}
}

// packAhead packs the written tiles of rects, each once, into a batch for
// DecodeAhead, as the pipeline's reader lays them out.
func packAhead(rects []*decode.Rect) (*AheadBatch, error) {
	b := NewAheadBatch()
	tiles := map[decode.Format][][]byte{}
	keys := map[decode.Format][]string{}
	var formats []decode.Format
	seen := map[string]bool{}
	for _, r := range rects {
		for j := range r.TH {
			for i := range r.TW {
				raw, key := r.Tiles[j*r.TW+i], TileKey(r, i, j)
				if raw == nil || seen[key] {
					continue
				}
				seen[key] = true
				if _, ok := tiles[r.Format]; !ok {
					formats = append(formats, r.Format)
				}
				tiles[r.Format], keys[r.Format] = append(tiles[r.Format], raw), append(keys[r.Format], key)
			}
		}
	}
	for _, f := range formats {
		p, err := packTiles(tiles[f])
		if err != nil {
			return nil, err
		}
		if err := b.Add(f, p.data, p.off, p.size, keys[f]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// TestDecodeAheadBadTile: a batch decoded ahead whose copy of a tile is
// corrupt fails DecodeAhead with the tile's error, the owner having gone
// on meanwhile (its statuses are awaited beside it), and the device then
// holds nothing of the batch: the caller still has the row's bytes, and
// its windows read their own. With WaitAll the owner waits, as before.
// Should a composite run before the batch is settled, its wait for the
// null stream settles it: the batch's tiles are forgotten and the window
// is made again from its own sound bytes, the CPU's composite. The batch
// is decoded from the host's bytes on the null stream, or
// (composite-first-held) from the device's copy on the rows' stream,
// which the composite's gather waits for.
func TestDecodeAheadBadTile(t *testing.T) {
	for _, mode := range []string{"ahead", "wait-all", "composite-first", "composite-first-held"} {
		t.Run(mode, func(t *testing.T) {
			d := gpuWith(t, Options{WaitAll: mode == "wait-all"})
			defer d.Close()
			r := rand.New(rand.NewPCG(41, 42))
			f := decode.Format{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, W: 64, H: 64}
			band := newTestBand(r, "bad.tif", 256, 192, f)
			w := [4]int{0, 0, 256, 192}
			b, err := packAhead([]*decode.Rect{band.rect(w[0], w[1], w[2], w[3])})
			if err != nil {
				t.Fatal(err)
			}
			// The batch's copy of its first tile gets a header no zlib
			// stream has; the band's own bytes stay sound.
			p := b.packed[f]
			data := append([]byte(nil), p.data...)
			data[p.off[0]] = 0xff
			p.data = data
			b.packed[f] = p
			keys := b.keys[f]
			if !strings.HasPrefix(mode, "composite-first") {
				err := DecodeAhead(d, b)
				if err == nil || !strings.Contains(err.Error(), "bad zlib header") || !strings.Contains(err.Error(), keys[0]) && mode == "ahead" {
					t.Fatalf("decoded ahead: %v, want the tile's error naming %s", err, keys[0])
				}
				if len(d.held) != 0 || len(d.heldBufs) != 0 || len(d.checks) != 0 {
					t.Fatalf("after the error: %d tiles and %d buffers held, %d batches unsettled", len(d.held), len(d.heldBufs), len(d.checks))
				}
				for _, k := range keys {
					if _, ok := d.tiles.lookup(k); ok {
						t.Fatalf("tile %s of the failed batch still in the cache", k)
					}
				}
				return
			}
			// The owner's part of DecodeAhead alone: the batch queued,
			// its statuses not yet read.
			var c *aheadCheck
			var h *heldBuffer
			if err := d.DoFirst(func() (err error) {
				if mode == "composite-first-held" {
					h = &heldBuffer{keys: keys, tables: heldTables(len(p.data))}
					if h.buf, err = driver.Alloc(heldBytes(len(p.data), len(keys))); err != nil {
						return err
					}
					if err = driver.PutAt(h.buf.Ptr, p.data); err != nil {
						return err
					}
				}
				c, err = d.decodeAhead(f, keys, p, h)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if h != nil {
				defer d.Do(func() error { h.buf.Free(); return nil })
				if d.rows == 0 {
					t.Fatal("a batch held on the device was not decoded on the rows' stream")
				}
			}
			if c == nil || len(d.checks) != 1 {
				t.Fatalf("queued: check %v, %d unsettled", c, len(d.checks))
			}
			n := w[2] * w[3]
			date := func() composite.Date {
				return composite.Date{SCL: make([]uint8, n), NoData: []uint16{0}, Scale: []float64{1e-4}, Offset: []float64{-0.1},
					Coarse: make([]*resample.Coarse, 1), Raw: []*decode.Rect{band.rect(w[0], w[1], w[2], w[3])}, DN: make([][]uint16, 1)}
			}
			cpu := []composite.Date{date()}
			want, wc := [][]uint16{make([]uint16, n)}, make([]uint8, n)
			if err := composite.Resample(cpu); err != nil {
				t.Fatal(err)
			}
			if err := composite.Window(cpu, composite.DefaultDropSCL, 1e-4, -0.1, want, wc); err != nil {
				t.Fatal(err)
			}
			got, gc := [][]uint16{make([]uint16, n)}, make([]uint8, n)
			if err := Composite(d, []composite.Date{date()}, composite.DefaultDropSCL, 1e-4, -0.1, got, gc); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if want[0][i] != got[0][i] || wc[i] != gc[i] {
					t.Fatalf("pixel %d: CPU %d (%d dates), GPU %d (%d)", i, want[0][i], wc[i], got[0][i], gc[i])
				}
			}
			if !c.done || !strings.Contains(c.bad, "bad zlib header") || len(d.checks) != 0 {
				t.Errorf("after the composite: settled %v (%q), %d unsettled", c.done, c.bad, len(d.checks))
			}
			d.Do(func() error { c.event.Destroy(); return nil })
		})
	}
}

// TestHostVerdict: the verdict on a tile the device refused says whether
// the host's decoder takes the same bytes (whole tiles) or refuses them
// too (a tile damaged before it reached the device). It needs no GPU.
func TestHostVerdict(t *testing.T) {
	f := decode.Format{Compression: "DEFLATE", Predictor: 2, SampleBytes: 2, W: 16, H: 8}
	whole := encodeTile(tileContent(rand.New(rand.NewPCG(1, 2)), 0, f.W, f.H, 0xffff), f, 6, false)
	if v := hostVerdict(whole, f); !strings.Contains(v, "takes the same bytes") {
		t.Errorf("a whole tile: %q", v)
	}
	bad := append([]byte{0x12, 0x34}, whole[2:]...)
	if v := hostVerdict(bad, f); !strings.Contains(v, "refuses the same bytes too") {
		t.Errorf("a tile with a bad zlib header: %q", v)
	}
}

// TestTileCacheKeepsUnsettledBatches: a slot that a batch decoded ahead
// fills, on the rows' stream, is found pending until the batch is
// settled, and no claim evicts it meanwhile (its kernels may still be
// writing it), however old; once settled it is evicted like any other,
// and a slot claimed again or forgotten is no longer pending. It needs
// no GPU: the cache's bookkeeping never touches the device.
func TestTileCacheKeepsUnsettledBatches(t *testing.T) {
	const n = 4
	c := &tileCache{slab: driver.Buffer{Ptr: 1 << 40}, slotBytes: 64, slot: map[string]int{},
		key: make([]string, n), used: make([]uint64, n), batch: make([]*aheadCheck, n), free: []int{3, 2, 1, 0}}
	b := &aheadCheck{}
	c.call = 1
	for i := range n {
		key := fmt.Sprint("t", i)
		if _, ok := c.claim(key); !ok {
			t.Fatalf("claim %s in an empty cache failed", key)
		}
		if i < 2 {
			c.filledBy(key, b)
		}
	}
	if c.pending("t0") != b || c.pending("t1") != b || c.pending("t2") != nil || c.pending("none") != nil {
		t.Fatalf("pending: t0 %p, t1 %p, t2 %p, want %p, %p, nil", c.pending("t0"), c.pending("t1"), c.pending("t2"), b, b)
	}
	// A later call makes room from the settled tiles only.
	c.call = 2
	for _, key := range []string{"u0", "u1"} {
		if _, ok := c.claim(key); !ok {
			t.Fatalf("claim %s with two settled tiles to evict failed", key)
		}
	}
	for _, key := range []string{"t0", "t1", "u0", "u1"} {
		if _, ok := c.slot[key]; !ok {
			t.Fatalf("tile %s evicted: the cache holds %v", key, c.key)
		}
	}
	if at, ok := c.claim("u2"); ok {
		t.Fatalf("claim u2 took slot %#x while every slot is in use or unsettled", at)
	}
	b.done = true
	if c.pending("t0") != nil {
		t.Fatal("t0 still pending after its batch was settled")
	}
	c.call = 3
	if _, ok := c.claim("v0"); !ok {
		t.Fatal("claim v0 failed once the batch was settled")
	}
	if _, ok := c.slot["t0"]; ok {
		t.Fatalf("the oldest settled tile t0 stayed: the cache holds %v", c.key)
	}
	if c.pending("v0") != nil {
		t.Fatal("v0 took t0's slot with t0's batch")
	}
	b2 := &aheadCheck{}
	c.filledBy("t1", b2)
	c.forget("t1")
	c.call = 4
	if at, ok := c.claim("t1"); !ok || c.pending("t1") != nil {
		t.Fatalf("t1 claimed again (%#x, %v): pending %p, want nil", at, ok, c.pending("t1"))
	}
}
