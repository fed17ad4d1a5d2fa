package raster

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog/cogtest"
	"github.com/lulc/lulc/geo/landcover"
)

// cogOptions are the case's options for WriteCOG and Writer.
func cogOptions(c cogtest.Case) COGOptions {
	opt := COGOptions{BlockSize: c.BlockSize, Compress: c.Compress, Predictor: c.Predictor, OverviewResampling: c.Resampling,
		OverviewCount: c.OverviewCount, NoData: c.NoData, Description: c.Description, Metadata: c.Metadata}
	if c.Classes {
		opt.Classes = &landcover.WorldCover
	}
	return opt
}

// cogInfos are the case's bands for Writer.
func cogInfos(c cogtest.Case) []BandInfo {
	infos := make([]BandInfo, c.Bands)
	for i, b := range c.Infos {
		infos[i] = BandInfo{Description: b.Description, Scale: b.Scale, Offset: b.Offset}
	}
	return infos
}

// writeCase writes the case at path with opt: through Writer in shuffled
// windows on several goroutines, or WriteCOG.
func writeCase(t testing.TB, c cogtest.Case, path string, opt COGOptions) {
	t.Helper()
	g := c.Grid()
	if !c.Writer {
		px := c.Pixels(0)
		var err error
		if c.U16 {
			err = WriteCOG(path, g, px, opt)
		} else {
			err = WriteCOG(path, g, cogtest.ToU8(px), opt)
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	dtype := map[bool]string{false: "uint8", true: "uint16"}[c.U16]
	w, err := NewWriter(path, g, dtype, cogInfos(c), opt)
	if err != nil {
		t.Fatal(err)
	}
	wins := c.Windows()
	planes := make([][]uint16, c.Bands)
	for b := range planes {
		planes[b] = c.Pixels(b)
	}
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
// GDAL, as T.
func readLevels[T uint16 | float32](t testing.TB, path string) (sizes [][2]int, px [][][]T) {
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
			buf := make([]T, st.SizeX*st.SizeY)
			if err := lb.Read(0, 0, buf, st.SizeX, st.SizeY); err != nil {
				t.Fatal(err)
			}
			px[l] = append(px[l], buf)
		}
	}
	return sizes, px
}

// TestCOGRoundTrip writes each case with the Go encoder and with GDAL's COG
// driver and checks that GDAL reads the Go file as it reads its own: same
// description, pixels, overview count and sizes, COG layout, and overview
// pixels by the encoder's documented rule (cogtest.Overview).
func TestCOGRoundTrip(t *testing.T) {
	for _, c := range cogtest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			goPath := filepath.Join(dir, "go", "x.tif")
			gdalPath := filepath.Join(dir, "gdal", "x.tif")
			os.MkdirAll(filepath.Dir(goPath), 0o755)
			os.MkdirAll(filepath.Dir(gdalPath), 0o755)
			bytesPer := map[bool]int{false: 1, true: 2}[c.U16]
			if _, err := goPlan(c.Grid(), bytesPer, cogInfos(c), cogOptions(c)); err != nil {
				t.Fatalf("the Go encoder refuses the case: %v", err)
			}
			writeCase(t, c, goPath, cogOptions(c))
			opt := cogOptions(c)
			opt.GDALDriver = true
			writeCase(t, c, gdalPath, opt)

			if tf, err := cogtest.Read(goPath); err != nil || !strings.Contains(string(tf.Data[:64]), "GDAL_STRUCTURAL_METADATA_SIZE") {
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
			cogtest.CheckLayout(t, goPath)
			cogtest.CheckLayout(t, gdalPath)
			if infoString(gi) != infoString(ri) {
				t.Errorf("Inspect differs:\n go   %s\n gdal %s", infoString(gi), infoString(ri))
			}
			if gv, rv := vrtOf(t, goPath), vrtOf(t, gdalPath); gv != rv {
				t.Errorf("gdal describes the files differently:\n--- go\n%s\n--- gdal\n%s", gv, rv)
			}
			if c.Classes {
				gc, _ := os.ReadFile(goPath + ".aux.xml")
				rc, _ := os.ReadFile(gdalPath + ".aux.xml")
				if len(gc) == 0 || !bytes.Equal(gc, rc) {
					t.Errorf("category sidecars differ:\n%s\n%s", gc, rc)
				}
			}

			goSizes, goPx := readLevels[uint16](t, goPath)
			gdalSizes, _ := readLevels[uint16](t, gdalPath)
			if !slices.Equal(goSizes, gdalSizes) {
				t.Errorf("levels %v, gdal makes %v", goSizes, gdalSizes)
			}
			for b := range c.Bands {
				want := c.Pixels(b)
				if !c.U16 {
					want = cogtest.U8Widened(want)
				}
				if !slices.Equal(goPx[0][b], want) {
					t.Fatalf("band %d: pixels differ", b+1)
				}
				w, h := c.Width, c.Height
				for l := 1; l < len(goSizes); l++ {
					want, w, h = cogtest.Overview(want, w, h, strings.ToUpper(c.Resampling), c.NoData)
					if [2]int{w, h} != goSizes[l] {
						t.Fatalf("level %d is %v, the rule gives %d×%d", l, goSizes[l], w, h)
					}
					if i := cogtest.FirstDiff(goPx[l][b], want); i >= 0 {
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

// TestWriterUnwritten: pixels of windows never written read as nodata,
// as from GDAL's staging raster.
func TestWriterUnwritten(t *testing.T) {
	dir := t.TempDir()
	g := geo.Grid{EPSG: 32631, Width: 1000, Height: 700, Transform: [6]float64{0, 10, 0, 0, 0, -10}}
	for _, nd := range []*float64{nil, cogtest.Ptr(0), cogtest.Ptr(3)} {
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
		{opt: COGOptions{GDALDriver: true}, bands: 1},
		{opt: COGOptions{OverviewResampling: "CUBIC"}, bands: 1},
		{opt: COGOptions{NoData: cogtest.Ptr(-1)}, bands: 1},
		{opt: COGOptions{NoData: cogtest.Ptr(0.5)}, bands: 1},
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
		if _, err := goPlan(gg, 1, make([]BandInfo, c.bands), c.opt); err == nil {
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

// TestCOGFloat32 writes Float32 rasters with NaN as nodata (the area of
// applicability's two bands) through Writer with the Go encoder and with
// GDAL's COG driver: GDAL describes both alike, with the same levels, and
// reads the written bits at full resolution; the overview pixels follow
// the encoder's rule (cog.Options, stated again in floatOverview) for
// AVERAGE (windows of four pixels and of fewer, where NaN are left out),
// NEAREST and MODE, with DEFLATE and ZSTD, at odd sizes. (GDAL's own
// overviews differ: its NEAREST keeps a NaN top-left pixel, its AVERAGE
// sums in float32.)
func TestCOGFloat32(t *testing.T) {
	nan := math.NaN()
	const w, h = 1100, 701
	g := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{600000, 100, 0, 5100000, 0, -100}}
	r := rand.New(rand.NewPCG(3, 4))
	planes := [2][]float32{make([]float32, w*h), make([]float32, w*h)}
	for b, p := range planes {
		for i := range p {
			x, y := i%w, i/w
			p[i] = float32(r.ExpFloat64()*0.05) + float32(b)
			switch {
			case (x/40+y/30)%9 == 0, i%101 == 0:
				p[i] = float32(nan)
			case x%50 < 3:
				p[i] = 0.25 // runs of one value, for MODE
			}
		}
	}
	for _, c := range []struct {
		compress, resampling string
		nodata               *float64
	}{{"DEFLATE", "AVERAGE", &nan}, {"ZSTD", "NEAREST", &nan}, {"DEFLATE", "MODE", nil}} {
		t.Run(c.compress+"-"+c.resampling, func(t *testing.T) {
			dir := t.TempDir()
			var files [2]string
			for k, gdal := range []bool{false, true} {
				files[k] = filepath.Join(dir, map[bool]string{false: "go", true: "gdal"}[gdal], "x.tif")
				os.MkdirAll(filepath.Dir(files[k]), 0o755)
				opt := COGOptions{BlockSize: 512, Compress: c.compress, NoData: c.nodata, OverviewResampling: c.resampling, GDALDriver: gdal,
					Metadata: map[string]string{"LULC_AOA_THRESHOLD": "0.1"}}
				wr, err := NewWriter(files[k], g, "float32", []BandInfo{{Description: "dissimilarity index"}, {Description: "mask"}}, opt)
				if err != nil {
					t.Fatal(err)
				}
				if gdal == (wr.enc != nil) {
					t.Fatalf("GDALDriver %v, Go encoder %v", gdal, wr.enc != nil)
				}
				for b, p := range planes {
					// Two windows a band, the second first.
					if err := wr.Write(b, 0, 300, w, h-300, p[300*w:]); err != nil {
						t.Fatal(err)
					}
					if err := wr.Write(b, 0, 0, w, 300, p[:300*w]); err != nil {
						t.Fatal(err)
					}
				}
				if err := wr.Close(); err != nil {
					t.Fatal(err)
				}
			}
			cogtest.CheckLayout(t, files[0])
			gi, err := Inspect(files[0])
			if err != nil {
				t.Fatal(err)
			}
			ri, err := Inspect(files[1])
			if err != nil {
				t.Fatal(err)
			}
			if gi.Layout != "COG" || infoString(gi) != infoString(ri) {
				t.Errorf("Inspect differs:\n go   %s\n gdal %s", infoString(gi), infoString(ri))
			}
			if gv, rv := vrtOf(t, files[0]), vrtOf(t, files[1]); gv != rv {
				t.Errorf("gdal describes the files differently:\n--- go\n%s\n--- gdal\n%s", gv, rv)
			}
			goSizes, goPx := readLevels[float32](t, files[0])
			gdalSizes, gdalPx := readLevels[float32](t, files[1])
			if !slices.Equal(goSizes, gdalSizes) || len(goSizes) < 2 {
				t.Fatalf("levels %v, gdal makes %v", goSizes, gdalSizes)
			}
			for b := range planes {
				want, ww, wh := planes[b], w, h
				for l := range goSizes {
					if l > 0 {
						want, ww, wh = floatOverview(want, ww, wh, c.resampling)
					}
					if [2]int{ww, wh} != goSizes[l] {
						t.Fatalf("level %d is %v, the rule gives %d×%d", l, goSizes[l], ww, wh)
					}
					for i, v := range goPx[l][b] {
						if math.Float32bits(v) != math.Float32bits(want[i]) {
							t.Fatalf("band %d level %d pixel (%d, %d): %v, the rule gives %v", b+1, l, i%ww, i/ww, v, want[i])
						}
					}
				}
				if !slices.EqualFunc(gdalPx[0][b], planes[b], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Errorf("band %d: GDAL's file holds other pixels", b+1)
				}
			}
		})
	}
}

// floatOverview is the encoder's overview rule for Float32 stated pixel
// by pixel: the level below src (sw×sh), from each 2×2 window's pixels
// that are not NaN.
func floatOverview(src []float32, sw, sh int, rule string) ([]float32, int, int) {
	dw, dh := max(1, sw/2), max(1, sh/2)
	out := make([]float32, dw*dh)
	for y := range dh {
		for x := range dw {
			var vals []float32
			for _, d := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				if sx, sy := 2*x+d[0], 2*y+d[1]; sx < sw && sy < sh && !math.IsNaN(float64(src[sy*sw+sx])) {
					vals = append(vals, src[sy*sw+sx])
				}
			}
			v := float32(math.NaN())
			if len(vals) > 0 {
				switch rule {
				case "NEAREST":
					v = vals[0]
				case "AVERAGE":
					sum := 0.0
					for _, p := range vals {
						sum += float64(p)
					}
					v = float32(sum / float64(len(vals)))
				default:
					count := map[float32]int{}
					for _, p := range vals {
						count[p]++
					}
					v = vals[0]
					for p, n := range count {
						if n > count[v] || n == count[v] && p < v {
							v = p
						}
					}
				}
			}
			out[y*dw+x] = v
		}
	}
	return out, dw, dh
}
