package cog

import (
	"bytes"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog/cogtest"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/landcover"
)

// The tests here check the encoder's files with a TIFF reader of their
// own and lulc's decoder, without GDAL; geo/raster's tests check that GDAL
// reads them as it reads its own COGs (same description, pixels and
// overviews, on every case of cogtest.Cases).

// utm31N and wgs84 are the GeoKeys GDAL 3.6 writes for EPSG:32631 and
// EPSG:4326.
var (
	utm31N = GeoKeys{
		Directory: []uint16{1, 1, 0, 7, 1024, 0, 1, 1, 1025, 0, 1, 1, 1026, 34737, 22, 0, 2049, 34737, 7, 22, 2054, 0, 1, 9102, 3072, 0, 1, 32631, 3076, 0, 1, 9001},
		ASCII:     "WGS 84 / UTM zone 31N|WGS 84|\x00",
	}
	wgs84 = GeoKeys{
		Directory: []uint16{1, 1, 0, 7, 1024, 0, 1, 2, 1025, 0, 1, 1, 2048, 0, 1, 4326, 2049, 34737, 7, 0, 2054, 0, 1, 9102, 2057, 34736, 1, 1, 2059, 34736, 1, 0},
		Doubles:   []float64{298.257223563, 6378137},
		ASCII:     "WGS 84|\x00",
	}
)

// keys are the case's GeoKeys: UTM 31N's for a CRS other than WGS 84,
// whose keys these tests do not need to be right.
func keys(c cogtest.Case) GeoKeys {
	if c.EPSG == 4326 {
		return wgs84
	}
	return utm31N
}

// options are the case's options; its palette is WorldCover's colours.
func options(c cogtest.Case) Options {
	opt := Options{BlockSize: c.BlockSize, Compress: c.Compress, Predictor: c.Predictor, OverviewResampling: c.Resampling,
		OverviewCount: c.OverviewCount, NoData: c.NoData, Metadata: c.Metadata}
	if c.Classes {
		opt.Palette = make([]color.RGBA, 256)
		for _, k := range landcover.WorldCover.Classes {
			opt.Palette[k.Code] = k.Color
		}
	}
	return opt
}

// bands are the case's bands, band 1 described as geo/raster describes it.
func bands(c cogtest.Case) []Band {
	out := make([]Band, c.Bands)
	for i, b := range c.Infos {
		out[i] = Band{Description: b.Description, Scale: b.Scale, Offset: b.Offset}
	}
	if out[0].Description == "" {
		out[0].Description = c.Description
	}
	return out
}

// plan plans the case with opt.
func plan(t testing.TB, c cogtest.Case, opt Options) *Plan {
	t.Helper()
	p, err := NewPlan(c.Grid(), keys(c), map[bool]int{false: 1, true: 2}[c.U16], bands(c), opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCase writes the case at path with opt: through a Writer in shuffled
// windows on several goroutines (returning the closed Writer), or Write
// (nil).
func writeCase(t testing.TB, c cogtest.Case, path string, opt Options) *Writer {
	t.Helper()
	p := plan(t, c, opt)
	planes := make([][]uint16, c.Bands)
	for b := range planes {
		planes[b] = c.Pixels(b)
	}
	if !c.Writer {
		var err error
		if c.U16 {
			err = Write(path, p, planes...)
		} else {
			err = Write(path, p, cogtest.ToU8(planes[0]))
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	}
	w, err := NewWriter(path, p)
	if err != nil {
		t.Fatal(err)
	}
	wins := c.Windows()
	var wg sync.WaitGroup
	errs := make(chan error, len(wins))
	for k := range 4 {
		wg.Go(func() {
			for i := k; i < len(wins); i += 4 {
				v := wins[i]
				buf := c.Cut(planes[v.Band], v)
				if c.U16 {
					errs <- w.Write(v.Band, v.X, v.Y, v.W, v.H, buf)
				} else {
					errs <- w.Write(v.Band, v.X, v.Y, v.W, v.H, cogtest.ToU8(buf))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// readLevel0 decodes band 0 of the full-resolution level of a file of
// UInt16 pixels, one band, with lulc's decoder.
func readLevel0(t *testing.T, tf *cogtest.File, compression string, predictor int) []uint16 {
	t.Helper()
	ifd := tf.IFDs[0]
	w, h := int(ifd.Tags[tagImageWidth].Ints[0]), int(ifd.Tags[tagImageLength].Ints[0])
	bs := int(ifd.Tags[tagTileWidth].Ints[0])
	offs, counts := ifd.Tags[tagTileOffsets].Ints, ifd.Tags[tagTileByteCounts].Ints
	tilesX := (w + bs - 1) / bs
	px := make([]uint16, w*h)
	tile := make([]uint16, bs*bs)
	for k := range offs {
		if err := decode.Tile(tile, tf.Data[offs[k]:offs[k]+counts[k]], compression, predictor, false, bs, bs); err != nil {
			t.Fatal(err)
		}
		x0, y0 := k%tilesX*bs, k/tilesX*bs
		for r := range min(bs, h-y0) {
			copy(px[(y0+r)*w+x0:][:min(bs, w-x0)], tile[r*bs:])
		}
	}
	return px
}

// TestLayout checks GDAL's COG layout on every case, and on the same
// raster written as a BigTIFF, whose pixels read back.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	for _, c := range cogtest.Cases {
		path := filepath.Join(dir, c.Name+".tif")
		writeCase(t, c, path, options(c))
		if tf := cogtest.CheckLayout(t, path); tf.Big {
			t.Errorf("%s: a BigTIFF", c.Name)
		}
	}

	c := cogtest.Cases[4]
	c.Bands, c.Infos = 1, nil
	px := c.Pixels(0)
	p := plan(t, c, options(c))
	p.big = true
	path := filepath.Join(dir, "big.tif")
	if err := Write(path, p, px); err != nil {
		t.Fatal(err)
	}
	tf := cogtest.CheckLayout(t, path)
	if !tf.Big || len(tf.IFDs) != len(p.levels) {
		t.Fatalf("BigTIFF %v with %d IFDs", tf.Big, len(tf.IFDs))
	}
	if back := readLevel0(t, tf, "DEFLATE", 2); !slices.Equal(back, px) {
		t.Error("BigTIFF pixels differ")
	}
}

// TestBigTIFFRule: BigTIFF where GDAL's BIGTIFF=IF_SAFER makes one.
func TestBigTIFFRule(t *testing.T) {
	for _, c := range []struct {
		w, h, bands, bytes int
		big                bool
	}{{10980, 10980, 1, 1, false}, {10980, 10980, 10, 2, true}, {44500, 22250, 2, 1, false}, {44700, 22350, 2, 1, true}} {
		g := geo.Grid{EPSG: 32631, Width: c.w, Height: c.h, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
		p, err := NewPlan(g, utm31N, c.bytes, make([]Band, c.bands), Options{BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		if p.big != c.big {
			t.Errorf("%+v: big %v", c, p.big)
		}
	}
}

// TestDeterministic: the same file whatever GOMAXPROCS (and so the
// number of compressing goroutines).
func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []cogtest.Case{cogtest.Cases[0], cogtest.Cases[4], cogtest.Cases[5]} {
		var first []byte
		for _, procs := range []int{1, 4, 3} {
			runtime.GOMAXPROCS(procs)
			path := filepath.Join(dir, fmt.Sprint(c.Name, procs, ".tif"))
			writeCase(t, c, path, options(c))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = b
			} else if !bytes.Equal(b, first) {
				t.Errorf("%s: GOMAXPROCS=%d gives another file", c.Name, procs)
			}
		}
	}
}

// TestWriterFileStaging stages in a mapped file (as rasters over 1 GiB
// are) and must give the same bytes as staging in memory, leaving no file
// behind; Abort must leave nothing either.
func TestWriterFileStaging(t *testing.T) {
	c := cogtest.Cases[4]
	dir := t.TempDir()
	writeCase(t, c, filepath.Join(dir, "mem.tif"), options(c))
	defer func(v int64) { stageInMemoryMax = v }(stageInMemoryMax)
	stageInMemoryMax = 0
	writeCase(t, c, filepath.Join(dir, "file.tif"), options(c))
	a, _ := os.ReadFile(filepath.Join(dir, "mem.tif"))
	b, _ := os.ReadFile(filepath.Join(dir, "file.tif"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("staging in a file gives another COG than staging in memory")
	}

	c.Bands, c.Infos = 2, nil
	w, err := NewWriter(filepath.Join(dir, "aborted.tif"), plan(t, c, options(c)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(1, 10, 10, 2, 1, []uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(2, 0, 0, 1, 1, []uint16{1}); err == nil {
		t.Error("wrote to band 3 of 2")
	}
	if err := w.Write(0, c.Width-1, 0, 2, 1, []uint16{1, 2}); err == nil {
		t.Error("wrote beyond the raster")
	}
	w.Abort()
	if err := w.Write(0, 0, 0, 1, 1, []uint16{1}); err == nil {
		t.Error("wrote after Abort")
	}
	if err := w.Close(); err == nil {
		t.Error("closed after Abort")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"file.tif", "mem.tif"}) {
		t.Errorf("directory holds %v", names)
	}
}

// TestWriteChecks: Write refuses pixels that do not fit the plan.
func TestWriteChecks(t *testing.T) {
	c := cogtest.Cases[3] // one UInt16 band
	p := plan(t, c, options(c))
	path := filepath.Join(t.TempDir(), "x.tif")
	px := c.Pixels(0)
	for name, err := range map[string]error{
		"uint8 pixels":   Write(path, p, cogtest.ToU8(px)),
		"two bands":      Write(path, p, px, px),
		"a short plane":  Write(path, p, px[1:]),
		"no band at all": Write[uint16](path, p),
	} {
		if err == nil {
			t.Errorf("wrote %s", name)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused write left a file (%v)", err)
	}
}

// TestRefuses: NewPlan refuses what GDAL's driver writes otherwise than
// the encoder would, and what the encoder does not implement.
func TestRefuses(t *testing.T) {
	g := geo.Grid{EPSG: 32631, Width: 600, Height: 600, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
	for _, c := range []struct {
		opt             Options
		bands, bytesPer int
		keys            GeoKeys
		grid            func(geo.Grid) geo.Grid
	}{
		{opt: Options{Compress: "LZW"}},
		{opt: Options{OverviewResampling: "CUBIC"}},
		{opt: Options{BlockSize: 100}},
		{opt: Options{OverviewCount: -1}},
		{opt: Options{NoData: cogtest.Ptr(-1)}},
		{opt: Options{NoData: cogtest.Ptr(0.5)}},
		{opt: Options{NoData: cogtest.Ptr(256)}},
		{opt: Options{Metadata: map[string]string{"AREA_OR_POINT": "Point"}}},
		{opt: Options{Metadata: map[string]string{"x": "bell\a"}}},
		{opt: Options{Palette: make([]color.RGBA, 257)}},
		{opt: Options{Palette: make([]color.RGBA, 256)}, bytesPer: 2},
		{opt: Options{}, bands: 3},
		{opt: Options{Compress: "NONE"}, bands: 2},
		{opt: Options{}, bytesPer: 8},
		{opt: Options{Predictor: true}, bytesPer: 4},
		{opt: Options{NoData: cogtest.Ptr(0)}, bytesPer: 4},
		{opt: Options{Palette: make([]color.RGBA, 2)}, bytesPer: 4},
		{opt: Options{}, keys: GeoKeys{Directory: []uint16{1}}},
		{opt: Options{}, grid: func(g geo.Grid) geo.Grid { g.Transform[5] = 10; return g }},
		{opt: Options{}, grid: func(g geo.Grid) geo.Grid { g.Width = 0; return g }},
	} {
		gg, k, bands, bytesPer := g, utm31N, max(1, c.bands), max(1, c.bytesPer)
		if c.grid != nil {
			gg = c.grid(g)
		}
		if c.keys.Directory != nil {
			k = c.keys
		}
		if _, err := NewPlan(gg, k, bytesPer, make([]Band, bands), c.opt); err == nil || !strings.HasPrefix(err.Error(), "cog: cannot encode: ") {
			t.Errorf("%+v: the encoder takes it (%v)", c, err)
		}
	}
}

// TestParseGeoKeys reads back the GeoKeys of a file the encoder wrote.
func TestParseGeoKeys(t *testing.T) {
	for _, k := range []GeoKeys{utm31N, wgs84} {
		c := cogtest.Cases[1]
		p, err := NewPlan(c.Grid(), k, 1, make([]Band, 1), options(c))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "x.tif")
		if err := Write(path, p, make([]uint8, c.Width*c.Height)); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		got, err := ParseGeoKeys(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(k) {
			t.Errorf("read %v (%v), wrote %v", got, err, k)
		}
	}
	if _, err := ParseGeoKeys([]byte("MM\x00*")); err == nil {
		t.Error("parsed a big-endian header")
	}
}

// TestDownsampleRule checks downsample on random data, with and without
// nodata, on levels of odd and one-pixel sizes, against cogtest.Overview.
func TestDownsampleRule(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, size := range [][2]int{{7, 5}, {1, 9}, {9, 1}, {1, 1}, {64, 33}} {
		for _, rule := range []string{"NEAREST", "AVERAGE", "MODE"} {
			for _, nd := range []*float64{nil, cogtest.Ptr(2)} {
				sw, sh := size[0], size[1]
				src := make([]uint16, sw*sh)
				for i := range src {
					src[i] = uint16(r.IntN(4))
				}
				want, dw, dh := cogtest.Overview(src, sw, sh, rule, nd)
				res, _ := parseResampling(rule)
				var ndv *uint16
				if nd != nil {
					v := uint16(*nd)
					ndv = &v
				}
				got := make([]uint16, dw*dh)
				downsample(level[uint16]{got, dw, dh}, level[uint16]{src, sw, sh}, res, ndv, 3)
				if i := cogtest.FirstDiff(got, want); i >= 0 {
					t.Errorf("%v %s nodata %v: pixel %d is %d, want %d", size, rule, nd, i, got[i], want[i])
				}
				got8 := make([]uint8, dw*dh)
				var nd8 *uint8
				if nd != nil {
					v := uint8(*nd)
					nd8 = &v
				}
				downsample(level[uint8]{got8, dw, dh}, level[uint8]{cogtest.ToU8(src), sw, sh}, res, nd8, 1)
				if i := cogtest.FirstDiff(cogtest.U8Widened(toU16(got8)), want); i >= 0 {
					t.Errorf("uint8 %v %s nodata %v: pixel %d differs", size, rule, nd, i)
				}
			}
		}
	}
}

func toU16(v []uint8) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(x)
	}
	return out
}

// TestOverviewSizes: the levels GDAL 3.6's COG driver makes (measured with
// it), including sizes that halve to odd numbers and rasters one block
// wide or a few pixels high.
func TestOverviewSizes(t *testing.T) {
	for _, c := range []struct {
		w, h, block, count int
		want               string
	}{
		{1299, 1301, 512, 0, "[[649 650] [324 325]]"},
		{1303, 1305, 512, 0, "[[651 652] [325 326]]"},
		{1025, 1024, 512, 0, "[[512 512]]"},
		{1027, 513, 512, 0, "[[513 256] [256 128]]"},
		{512, 512, 512, 0, "[]"},
		{513, 100, 512, 0, "[[256 50]]"},
		{10980, 10980, 512, 0, "[[5490 5490] [2745 2745] [1372 1372] [686 686] [343 343]]"},
		{2047, 3, 256, 0, "[[1023 1] [511 1] [255 1]]"},
		{6000, 7, 512, 0, "[[3000 3] [1500 1] [750 1] [375 1]]"},
		{1300, 1307, 256, 0, "[[650 653] [325 326] [162 163]]"},
		{70, 60, 512, 3, "[[35 30] [17 15] [8 7]]"},
	} {
		if got := fmt.Sprint(overviewSizes(c.w, c.h, c.block, c.count)); got != c.want {
			t.Errorf("%d×%d block %d count %d: %s, GDAL makes %s", c.w, c.h, c.block, c.count, got, c.want)
		}
	}
}

func BenchmarkDownsampleMode(b *testing.B) {
	const n = 10980
	px := cogtest.ClassMap(n)
	dst := make([]uint8, (n/2)*(n/2))
	nd := uint8(0)
	for range b.N {
		downsample(level[uint8]{dst, n / 2, n / 2}, level[uint8]{px, n, n}, resampleMode, &nd, 1)
	}
}
