package raster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
)

// cogCase is one raster written both by the Go encoder and by GDAL.
type cogCase struct {
	name    string
	width   int
	height  int
	bands   int
	u16     bool
	epsg    int
	writer  bool // through Writer (windows) rather than WriteCOG
	opt     COGOptions
	infos   []BandInfo
	classes bool
}

func ptrf(v float64) *float64 { return &v }

var cogCases = []cogCase{
	{name: "classmap", width: 1300, height: 700, bands: 1, classes: true,
		opt: COGOptions{Compress: "DEFLATE", NoData: ptrf(0), OverviewResampling: "MODE", Description: "land cover class",
			Metadata: map[string]string{"title": "a & b <c> \"d\" 'e' é", "legend": "10 tree\n20 shrub\ttab", "empty": ""}}},
	{name: "small-none", width: 300, height: 200, bands: 1,
		opt: COGOptions{Compress: "NONE", OverviewResampling: "NEAREST"}},
	{name: "u8-zstd-predictor", width: 1025, height: 1030, bands: 1,
		opt: COGOptions{Compress: "ZSTD", Predictor: true, NoData: ptrf(255), OverviewResampling: "AVERAGE"}},
	{name: "u16-deflate-predictor", width: 1100, height: 513, bands: 1, u16: true,
		opt: COGOptions{Predictor: true, NoData: ptrf(0)}},
	{name: "u16-stack", width: 1300, height: 900, bands: 3, u16: true, writer: true,
		opt:   COGOptions{Predictor: true, NoData: ptrf(0), Metadata: map[string]string{"lulc_config_sha": "abc123"}},
		infos: []BandInfo{{Description: "B02", Scale: 0.0001, Offset: -0.1}, {Description: "B03", Scale: 0.0001, Offset: -0.1}, {Scale: 1}}},
	{name: "u16-zstd-mode-256", width: 700, height: 1500, bands: 2, u16: true, writer: true,
		opt: COGOptions{Compress: "zstd", BlockSize: 256, OverviewResampling: "mode", OverviewCount: 2}},
	{name: "u8-two-bands-nearest", width: 640, height: 333, bands: 2, writer: true,
		opt: COGOptions{BlockSize: 256, OverviewResampling: "NEAREST", NoData: ptrf(3)}},
	{name: "u8-writer-classes", width: 517, height: 1029, bands: 1, writer: true, classes: true,
		opt:   COGOptions{NoData: ptrf(0), OverviewResampling: "MODE", Description: "ignored: the band has its own"},
		infos: []BandInfo{{Description: "labels"}}},
	{name: "geographic", width: 900, height: 600, bands: 1, u16: true, epsg: 4326,
		opt: COGOptions{Compress: "DEFLATE", NoData: ptrf(0), OverviewCount: 5}},
	{name: "tiny-many-overviews", width: 40, height: 5, bands: 1, u16: true,
		opt: COGOptions{OverviewResampling: "MODE", NoData: ptrf(0), OverviewCount: 9}},
	{name: "thin", width: 2000, height: 3, bands: 1, epsg: 3035,
		opt: COGOptions{OverviewResampling: "AVERAGE", NoData: ptrf(0), BlockSize: 128}},
}

// cogPixels makes band b of a case: patches of classes with nodata holes
// for uint8, a gradient with noise for uint16.
func cogPixels(c cogCase, b int) []uint16 {
	r := rand.New(rand.NewPCG(uint64(c.width), uint64(b)))
	codes := landcover.WorldCover.Codes()
	px := make([]uint16, c.width*c.height)
	for i := range px {
		x, y := i%c.width, i/c.width
		if !c.u16 {
			h := (x/7*31 + y/5*17 + b) % (len(codes) + 2)
			switch {
			case h < len(codes):
				px[i] = uint16(codes[h])
			case r.IntN(3) == 0:
				px[i] = uint16(r.IntN(256))
			}
			continue
		}
		px[i] = uint16(1000 + 3*x + y + 100*b + r.IntN(50))
		if (x/13+y/11)%17 == 0 {
			px[i] = 0
		}
	}
	return px
}

func (c cogCase) grid() geo.Grid {
	g := geo.Grid{EPSG: 32631, Width: c.width, Height: c.height, Transform: [6]float64{600000, 10, 0, 5100000, 0, -10}}
	switch c.epsg {
	case 4326:
		g.EPSG, g.Transform = 4326, [6]float64{6.5, 1.0 / 12000, 0, 0.5, 0, -1.0 / 12000}
	case 0:
	default:
		g.EPSG, g.Transform = c.epsg, [6]float64{4000000, 20, 0, 3000000, 0, -20}
	}
	return g
}

func (c cogCase) options() COGOptions {
	opt := c.opt
	if c.classes {
		opt.Classes = &landcover.WorldCover
	}
	return opt
}

// write writes the case at path: through Writer in shuffled windows on
// several goroutines (returning the closed Writer), or WriteCOG (nil).
func (c cogCase) write(t testing.TB, path string) *Writer {
	t.Helper()
	g, opt := c.grid(), c.options()
	if !c.writer {
		px := cogPixels(c, 0)
		var err error
		if c.u16 {
			err = WriteCOG(path, g, px, opt)
		} else {
			err = WriteCOG(path, g, toU8(px), opt)
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	}
	infos := c.infos
	if infos == nil {
		infos = make([]BandInfo, c.bands)
	}
	dtype := map[bool]string{false: "uint8", true: "uint16"}[c.u16]
	w, err := NewWriter(path, g, dtype, infos, opt)
	if err != nil {
		t.Fatal(err)
	}
	type win struct{ b, x, y, w, h int }
	var wins []win
	for b := range c.bands {
		for y := 0; y < c.height; y += 190 {
			for x := 0; x < c.width; x += 230 {
				wins = append(wins, win{b, x, y, min(230, c.width-x), min(190, c.height-y)})
			}
		}
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(wins), func(i, j int) { wins[i], wins[j] = wins[j], wins[i] })
	planes := make([][]uint16, c.bands)
	for b := range planes {
		planes[b] = cogPixels(c, b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(wins))
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < len(wins); i += 4 {
				v := wins[i]
				buf := make([]uint16, v.w*v.h)
				for r := range v.h {
					copy(buf[r*v.w:], planes[v.b][(v.y+r)*c.width+v.x:][:v.w])
				}
				var err error
				if c.u16 {
					err = w.Write(v.b, v.x, v.y, v.w, v.h, buf)
				} else {
					err = w.Write(v.b, v.x, v.y, v.w, v.h, toU8(buf))
				}
				errs <- err
			}
		}()
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

func toU8(v []uint16) []uint8 {
	out := make([]uint8, len(v))
	for i, x := range v {
		out[i] = uint8(x)
	}
	return out
}

// vrtOf is GDAL's own description of a raster (what gdalinfo shows, as
// VRT XML: CRS, geotransform, metadata, band descriptions, nodata,
// scale/offset, colour table and interpretation).
func vrtOf(t testing.TB, path string) string {
	t.Helper()
	ds, err := godal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	out := path + ".vrt"
	v, err := ds.Translate(out, []string{"-of", "VRT"})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(out)
	return string(b)
}

// readLevels reads every band of every level (0: full resolution) through
// GDAL.
func readLevels(t testing.TB, path string) (sizes [][2]int, px [][][]uint16) {
	t.Helper()
	ds, err := godal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for bi, band := range ds.Bands() {
		levels := append([]godal.Band{band}, band.Overviews()...)
		for l, lb := range levels {
			st := lb.Structure()
			if bi == 0 {
				sizes = append(sizes, [2]int{st.SizeX, st.SizeY})
				px = append(px, nil)
			}
			buf := make([]uint16, st.SizeX*st.SizeY)
			if err := lb.Read(0, 0, buf, st.SizeX, st.SizeY); err != nil {
				t.Fatal(err)
			}
			px[l] = append(px[l], buf)
		}
	}
	return sizes, px
}

// refOverview is an independent, per-pixel statement of downsample's rule.
func refOverview(src []uint16, sw, sh int, rule string, nodata *float64) ([]uint16, int, int) {
	dw, dh := max(1, sw/2), max(1, sh/2)
	out := make([]uint16, dw*dh)
	for y := range dh {
		for x := range dw {
			var vals []uint16
			for _, d := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				sx, sy := 2*x+d[0], 2*y+d[1]
				if sx >= sw || sy >= sh {
					continue
				}
				v := src[sy*sw+sx]
				if nodata != nil && float64(v) == *nodata {
					continue
				}
				vals = append(vals, v)
			}
			if len(vals) == 0 {
				out[y*dw+x] = uint16(*nodata)
				continue
			}
			switch rule {
			case "NEAREST":
				out[y*dw+x] = vals[0]
			case "AVERAGE", "":
				sum := 0.0
				for _, v := range vals {
					sum += float64(v)
				}
				out[y*dw+x] = uint16(math.Floor(sum/float64(len(vals)) + 0.5))
			case "MODE":
				count := map[uint16]int{}
				for _, v := range vals {
					count[v]++
				}
				best := vals[0]
				for v, n := range count {
					if n > count[best] || n == count[best] && v < best {
						best = v
					}
				}
				out[y*dw+x] = best
			}
		}
	}
	return out, dw, dh
}

// TestCOGRoundTrip writes each case with the Go encoder and with GDAL's COG
// driver and checks that GDAL reads the Go file as it reads its own: same
// description, pixels, overview count and sizes, COG layout, and overview
// pixels by downsample's documented rule.
func TestCOGRoundTrip(t *testing.T) {
	for _, c := range cogCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			goPath := filepath.Join(dir, "go", "x.tif")
			gdalPath := filepath.Join(dir, "gdal", "x.tif")
			os.MkdirAll(filepath.Dir(goPath), 0o755)
			os.MkdirAll(filepath.Dir(gdalPath), 0o755)
			bytesPer := map[bool]int{false: 1, true: 2}[c.u16]
			if p, why := planCOG(c.grid(), bytesPer, make([]BandInfo, c.bands), c.options()); p == nil {
				t.Fatalf("the Go encoder refuses the case: %s", why)
			}
			c.write(t, goPath)
			gc := c
			gc.opt.GDALDriver = true
			gc.write(t, gdalPath)

			if tf, err := readTIFF(goPath); err != nil || !strings.Contains(string(tf.data[:64]), "GDAL_STRUCTURAL_METADATA_SIZE") {
				t.Fatalf("not the Go encoder's file: %v", err)
			}
			gi, err := Inspect(goPath)
			if err != nil {
				t.Fatal(err)
			}
			ri, err := Inspect(gdalPath)
			if err != nil {
				t.Fatal(err)
			}
			if gi.Layout != "COG" {
				t.Errorf("layout %q, want COG", gi.Layout)
			}
			// The layout checker holds for GDAL's own file too.
			checkCOGLayout(t, goPath)
			checkCOGLayout(t, gdalPath)
			if infoString(gi) != infoString(ri) {
				t.Errorf("Inspect differs:\n go   %s\n gdal %s", infoString(gi), infoString(ri))
			}
			if gv, rv := vrtOf(t, goPath), vrtOf(t, gdalPath); gv != rv {
				t.Errorf("gdal describes the files differently:\n--- go\n%s\n--- gdal\n%s", gv, rv)
			}
			if c.classes {
				gc, _ := os.ReadFile(goPath + ".aux.xml")
				rc, _ := os.ReadFile(gdalPath + ".aux.xml")
				if len(gc) == 0 || !bytes.Equal(gc, rc) {
					t.Errorf("category sidecars differ:\n%s\n%s", gc, rc)
				}
			}

			goSizes, goPx := readLevels(t, goPath)
			gdalSizes, _ := readLevels(t, gdalPath)
			if !slices.Equal(goSizes, gdalSizes) {
				t.Errorf("levels %v, gdal makes %v", goSizes, gdalSizes)
			}
			for b := range c.bands {
				want := cogPixels(c, b)
				if !c.u16 {
					want = u8Widened(want)
				}
				if !slices.Equal(goPx[0][b], want) {
					t.Fatalf("band %d: pixels differ", b+1)
				}
				w, h := c.width, c.height
				for l := 1; l < len(goSizes); l++ {
					want, w, h = refOverview(want, w, h, strings.ToUpper(c.opt.OverviewResampling), c.opt.NoData)
					if [2]int{w, h} != goSizes[l] {
						t.Fatalf("level %d is %v, the rule gives %d×%d", l, goSizes[l], w, h)
					}
					if i := firstDiff(goPx[l][b], want); i >= 0 {
						t.Fatalf("band %d level %d: pixel (%d, %d) is %d, the rule gives %d", b+1, l, i%w, i/w, goPx[l][b][i], want[i])
					}
				}
			}
		})
	}
}

func infoString(i Info) string {
	nd := ndString(i.NoData)
	i.NoData = nil
	return fmt.Sprintf("%+v nodata %s", i, nd)
}

func ndString(nd *float64) string {
	if nd == nil {
		return "none"
	}
	return fmt.Sprint(*nd)
}

func u8Widened(v []uint16) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(uint8(x))
	}
	return out
}

func firstDiff(a, b []uint16) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// checkCOGLayout checks the rules of GDAL's COG layout on a file, with a
// TIFF reader of its own: the ghost metadata first, then every IFD and its
// values, the tile arrays, and the tiles of the smallest overview first and
// of full resolution last, row-major, each with a leader holding its size
// and a trailer repeating its last 4 bytes, nothing in between.
func checkCOGLayout(t *testing.T, path string) *tiffFile {
	t.Helper()
	tf, err := readTIFF(path)
	if err != nil {
		t.Fatal(err)
	}
	head := 8
	if tf.big {
		head = 16
	}
	ghost := string(tf.data[head:])
	const prefix = "GDAL_STRUCTURAL_METADATA_SIZE="
	if !strings.HasPrefix(ghost, prefix) {
		t.Fatalf("no ghost metadata after the header: %q", ghost[:40])
	}
	var size int
	if _, err := fmt.Sscanf(ghost[len(prefix):], "%06d bytes\n", &size); err != nil {
		t.Fatal(err)
	}
	body := ghost[43 : 43+size]
	for _, item := range []string{"LAYOUT=IFDS_BEFORE_DATA\n", "BLOCK_ORDER=ROW_MAJOR\n", "BLOCK_LEADER=SIZE_AS_UINT4\n", "BLOCK_TRAILER=LAST_4_BYTES_REPEATED\n", "KNOWN_INCOMPATIBLE_EDITION=NO\n"} {
		if !strings.Contains(body, item) {
			t.Errorf("ghost metadata lacks %q", item)
		}
	}
	if end := int64(head + 43 + size); tf.first != end+end%2 {
		t.Errorf("first IFD at %d, not right after the ghost metadata (%d)", tf.first, end)
	}
	// Everything that is not tile data ends before the first tile.
	var metaEnd int64
	for i, ifd := range tf.ifds {
		if i > 0 && ifd.offset < tf.ifds[i-1].end {
			t.Errorf("IFD %d overlaps the previous one", i)
		}
		metaEnd = max(metaEnd, ifd.end)
		for _, tag := range ifd.tags {
			if tag.at >= 0 {
				metaEnd = max(metaEnd, tag.at+tag.size)
			}
		}
		if i > 0 && ifd.tags[tagNewSubfileType].ints[0] != 1 {
			t.Errorf("IFD %d is not marked as an overview", i)
		}
	}
	pos := metaEnd + metaEnd%2
	le := binary.LittleEndian
	for i := len(tf.ifds) - 1; i >= 0; i-- {
		ifd := tf.ifds[i]
		offs, counts := ifd.tags[tagTileOffsets].ints, ifd.tags[tagTileByteCounts].ints
		w, h := int(ifd.tags[tagImageWidth].ints[0]), int(ifd.tags[tagImageLength].ints[0])
		bw, bh := int(ifd.tags[tagTileWidth].ints[0]), int(ifd.tags[tagTileLength].ints[0])
		if n := ((w + bw - 1) / bw) * ((h + bh - 1) / bh); len(offs) != n || len(counts) != n {
			t.Fatalf("IFD %d: %d offsets and %d counts for %d tiles", i, len(offs), len(counts), n)
		}
		for k := range offs {
			o, n := int64(offs[k]), int64(counts[k])
			if o != pos+4 {
				t.Fatalf("IFD %d tile %d at %d, expected %d (after the previous tile and a leader)", i, k, o, pos+4)
			}
			if got := int64(le.Uint32(tf.data[o-4:])); got != n {
				t.Fatalf("IFD %d tile %d: leader says %d bytes, TileByteCounts %d", i, k, got, n)
			}
			if !bytes.Equal(tf.data[o+n:o+n+4], tf.data[o+n-4:o+n]) {
				t.Fatalf("IFD %d tile %d: trailer does not repeat the last 4 bytes", i, k)
			}
			pos = o + n + 4
		}
	}
	if pos != int64(len(tf.data)) {
		t.Errorf("file has %d bytes after the last tile", int64(len(tf.data))-pos)
	}
	return tf
}

// TestCOGLayout checks the layout rules on every case, and on the same
// raster written as a BigTIFF.
func TestCOGLayout(t *testing.T) {
	dir := t.TempDir()
	for _, c := range cogCases {
		path := filepath.Join(dir, c.name+".tif")
		c.write(t, path)
		if tf := checkCOGLayout(t, path); tf.big {
			t.Errorf("%s: a BigTIFF", c.name)
		}
	}

	c := cogCases[4]
	px := cogPixels(c, 0)
	p, why := planCOG(c.grid(), 2, []BandInfo{{}}, c.options())
	if p == nil {
		t.Fatal(why)
	}
	p.big = true
	path := filepath.Join(dir, "big.tif")
	if err := writeGoCOG(path, p, px, nil); err != nil {
		t.Fatal(err)
	}
	if tf := checkCOGLayout(t, path); !tf.big {
		t.Error("not a BigTIFF")
	}
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Layout != "COG" || info.Overviews != len(p.levels)-1 {
		t.Errorf("BigTIFF: %+v", info)
	}
	back, _, err := ReadBand[uint16](path, 1)
	if err != nil || !slices.Equal(back, px) {
		t.Errorf("BigTIFF pixels differ (%v)", err)
	}
}

// TestCOGBigTIFFRule: BigTIFF where GDAL's BIGTIFF=IF_SAFER makes one.
func TestCOGBigTIFFRule(t *testing.T) {
	for _, c := range []struct {
		w, h, bands, bytes int
		big                bool
	}{{10980, 10980, 1, 1, false}, {10980, 10980, 10, 2, true}, {44500, 22250, 2, 1, false}, {44700, 22350, 2, 1, true}} {
		g := geo.Grid{EPSG: 32631, Width: c.w, Height: c.h, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
		p, why := planCOG(g, c.bytes, make([]BandInfo, c.bands), COGOptions{BlockSize: 256})
		if p == nil {
			t.Fatal(why)
		}
		if p.big != c.big {
			t.Errorf("%+v: big %v", c, p.big)
		}
	}
}

// TestCOGDeterministic: the same file whatever GOMAXPROCS and Threads.
func TestCOGDeterministic(t *testing.T) {
	dir := t.TempDir()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []cogCase{cogCases[0], cogCases[4], cogCases[5]} {
		var first []byte
		for _, procs := range []int{1, 4, 3} {
			runtime.GOMAXPROCS(procs)
			path := filepath.Join(dir, fmt.Sprint(c.name, procs, ".tif"))
			c.write(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = b
			} else if !bytes.Equal(b, first) {
				t.Errorf("%s: GOMAXPROCS=%d gives another file", c.name, procs)
			}
		}
	}
}

// TestWriterFileStaging stages in a mapped file (as rasters over 1 GiB
// are) and must give the same bytes as staging in memory, leaving no file
// behind; Abort must leave nothing either.
func TestWriterFileStaging(t *testing.T) {
	c := cogCases[4]
	dir := t.TempDir()
	c.write(t, filepath.Join(dir, "mem.tif"))
	defer func(v int64) { stageInMemoryMax = v }(stageInMemoryMax)
	stageInMemoryMax = 0
	c.write(t, filepath.Join(dir, "file.tif"))
	a, _ := os.ReadFile(filepath.Join(dir, "mem.tif"))
	b, _ := os.ReadFile(filepath.Join(dir, "file.tif"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("staging in a file gives another COG than staging in memory")
	}

	w, err := NewWriter(filepath.Join(dir, "aborted.tif"), c.grid(), "uint16", make([]BandInfo, 2), c.options())
	if err != nil {
		t.Fatal(err)
	}
	if w.stage == nil {
		t.Fatal("not staged by the Go encoder")
	}
	if err := w.Write(1, 10, 10, 2, 1, []uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(2, 0, 0, 1, 1, []uint16{1}); err == nil {
		t.Error("wrote to band 3 of 2")
	}
	if err := w.Write(0, c.width-1, 0, 2, 1, []uint16{1, 2}); err == nil {
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

// TestWriterUnwritten: pixels of windows never written read as nodata,
// as from GDAL's staging raster.
func TestWriterUnwritten(t *testing.T) {
	dir := t.TempDir()
	g := geo.Grid{EPSG: 32631, Width: 1000, Height: 700, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
	for _, nd := range []*float64{nil, ptrf(0), ptrf(3)} {
		var got [2][]uint8
		for i, enc := range []string{"go", "gdal"} {
			path := filepath.Join(dir, enc+".tif")
			w, err := NewWriter(path, g, "uint8", []BandInfo{{}}, COGOptions{NoData: nd, GDALDriver: enc == "gdal"})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(0, 100, 200, 2, 1, []uint8{9, 8}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got[i], _, err = ReadBand[uint8](path, 1); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got[0], got[1]) || got[0][200*1000+101] != 8 {
			t.Errorf("nodata %s: unwritten pixels differ from GDAL's", ndString(nd))
		}
	}
}

// TestWriterConverts: a Byte writer takes uint16 windows, clamped as GDAL
// clamps them.
func TestWriterConverts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.tif")
	g := geo.Grid{EPSG: 32631, Width: 3, Height: 1, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
	w, err := NewWriter(path, g, "uint8", []BandInfo{{}}, COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(0, 0, 0, 3, 1, []uint16{7, 255, 300}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	px, _, err := ReadBand[uint8](path, 1)
	if err != nil || !slices.Equal(px, []uint8{7, 255, 255}) {
		t.Errorf("read %v (%v)", px, err)
	}
}

// TestCOGFallsBackToGDAL: options the Go encoder does not implement go
// through GDAL as before.
func TestCOGFallsBackToGDAL(t *testing.T) {
	g := geo.Grid{EPSG: 32631, Width: 600, Height: 600, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
	for _, c := range []struct {
		opt   COGOptions
		bands int
		grid  func(geo.Grid) geo.Grid
	}{
		{opt: COGOptions{Compress: "LZW"}, bands: 1},
		{opt: COGOptions{OverviewResampling: "CUBIC"}, bands: 1},
		{opt: COGOptions{NoData: ptrf(-1)}, bands: 1},
		{opt: COGOptions{NoData: ptrf(0.5)}, bands: 1},
		{opt: COGOptions{Metadata: map[string]string{"AREA_OR_POINT": "Point"}}, bands: 1},
		{opt: COGOptions{Metadata: map[string]string{"x": "bell\a"}}, bands: 1},
		{opt: COGOptions{}, bands: 3},
		{opt: COGOptions{Compress: "NONE"}, bands: 2},
		{opt: COGOptions{}, bands: 1, grid: func(g geo.Grid) geo.Grid { g.Transform[5] = 10; return g }},
	} {
		gg := g
		if c.grid != nil {
			gg = c.grid(g)
		}
		if p, _ := planCOG(gg, 1, make([]BandInfo, c.bands), c.opt); p != nil {
			t.Errorf("%+v: the Go encoder takes it", c)
		}
	}
	path := filepath.Join(t.TempDir(), "lzw.tif")
	if err := WriteCOG(path, g, make([]uint8, 600*600), COGOptions{Compress: "LZW"}); err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(path)
	if err != nil || info.Compression != "LZW" || info.Layout != "COG" {
		t.Errorf("%+v %v", info, err)
	}
}

// TestDownsampleRule checks downsample on random data, with and without
// nodata, on levels of odd and one-pixel sizes, against refOverview.
func TestDownsampleRule(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, size := range [][2]int{{7, 5}, {1, 9}, {9, 1}, {1, 1}, {64, 33}} {
		for _, rule := range []string{"NEAREST", "AVERAGE", "MODE"} {
			for _, nd := range []*float64{nil, ptrf(2)} {
				sw, sh := size[0], size[1]
				src := make([]uint16, sw*sh)
				for i := range src {
					src[i] = uint16(r.IntN(4))
				}
				want, dw, dh := refOverview(src, sw, sh, rule, nd)
				res, _ := parseResampling(rule)
				var ndv *uint16
				if nd != nil {
					v := uint16(*nd)
					ndv = &v
				}
				got := make([]uint16, dw*dh)
				downsample(level[uint16]{got, dw, dh}, level[uint16]{src, sw, sh}, res, ndv, 3)
				if i := firstDiff(got, want); i >= 0 {
					t.Errorf("%v %s nodata %v: pixel %d is %d, want %d", size, rule, nd, i, got[i], want[i])
				}
				got8 := make([]uint8, dw*dh)
				var nd8 *uint8
				if nd != nil {
					v := uint8(*nd)
					nd8 = &v
				}
				downsample(level[uint8]{got8, dw, dh}, level[uint8]{toU8(src), sw, sh}, res, nd8, 1)
				if i := firstDiff(u8Widened(toU16(got8)), want); i >= 0 {
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
