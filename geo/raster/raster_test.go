package raster

import (
	"github.com/lulc/lulc/geo"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNestedReadsHaveNoSeams reads a 20 m raster onto a 10 m grid whole and
// in four windows: GDAL's resampled RasterIO must give the same pixels at
// window borders as inside, or stacks would show seams.
func TestNestedReadsHaveNoSeams(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 300
	src := make([]uint16, n*n)
	for i := range src {
		src[i] = uint16(1000 + r.IntN(3000))
	}
	path := filepath.Join(t.TempDir(), "b20.tif")
	g20 := geo.Grid{EPSG: 32631, Width: n, Height: n, Transform: [6]float64{500000, 20, 0, 5000000, 0, -20}}
	if err := WriteCOG(path, g20, src, COGOptions{BlockSize: 512}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, alg := range []string{"bilinear", "cubic", "nearest"} {
		whole := geo.Grid{EPSG: 32631, Width: 2 * n, Height: 2 * n, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
		all := make([]uint16, 4*n*n)
		if err := s.Read(whole, alg, all); err != nil {
			t.Fatal(err)
		}
		for _, q := range [][2]int{{0, 0}, {n, 0}, {0, n}, {n, n}} {
			w := geo.Grid{EPSG: 32631, Width: n, Height: n, Transform: [6]float64{500000 + float64(q[0])*10, 10, 0, 5000000 - float64(q[1])*10, 0, -10}}
			part := make([]uint16, n*n)
			if err := s.Read(w, alg, part); err != nil {
				t.Fatal(err)
			}
			for y := range n {
				row := all[(q[1]+y)*2*n+q[0] : (q[1]+y)*2*n+q[0]+n]
				if !slices.Equal(part[y*n:(y+1)*n], row) {
					t.Fatalf("%s: window at %v row %d differs from the whole read", alg, q, y)
				}
			}
		}
	}
}

// worldCoverCrop opens the real WorldCover crop (EPSG:4326) of the shared
// data, skipping without it: its classes, grid and an open source, closed
// when the test ends.
func worldCoverCrop(t testing.TB) ([]uint8, geo.Grid, *Source) {
	t.Helper()
	path := "../../../shared/data/worldcover-N00E006/derived_crops/WorldCover_2021_v200_SaoTome_crop.tif"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	src, sg, err := ReadBand[uint8](path, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return src, sg, s
}

// TestWarpRealWorldCover warps the real WorldCover crop (EPSG:4326) onto a
// UTM grid and checks classes against a direct lookup at pixel centres.
func TestWarpRealWorldCover(t *testing.T) {
	src, sg, s := worldCoverCrop(t)
	if s.EPSG != 4326 || s.BlockSize != [2]int{512, 512} {
		t.Errorf("source %+v", s.Grid)
	}
	// A 6 km square of São Tomé in UTM 32N at 10 m.
	dst := geo.Grid{EPSG: 32632, Width: 600, Height: 600, Transform: [6]float64{240000, 10, 0, 38000, 0, -10}}
	out := make([]uint8, 600*600)
	if err := s.Read(dst, "nearest", out); err != nil {
		t.Fatal(err)
	}
	tr, err := NewTransformer(32632, 4326)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	agree, land := 0, 0
	real := map[uint8]bool{0: true, 10: true, 20: true, 30: true, 40: true, 50: true, 60: true, 80: true, 90: true, 95: true}
	for i := 0; i < len(out); i += 13 {
		if !real[out[i]] {
			t.Fatalf("warped class %d is not a WorldCover class", out[i])
		}
		x := []float64{dst.Transform[0] + (float64(i%600)+0.5)*10}
		y := []float64{dst.Transform[3] - (float64(i/600)+0.5)*10}
		if err := tr.Transform(x, y); err != nil {
			t.Fatal(err)
		}
		col := int((x[0] - sg.Transform[0]) / sg.Transform[1])
		row := int((y[0] - sg.Transform[3]) / sg.Transform[5])
		if src[row*sg.Width+col] == out[i] {
			agree++
		}
		if out[i] != 0 {
			land++
		}
	}
	total := len(out) / 13
	if land < total/4 {
		t.Fatalf("only %d of %d sampled pixels hold land cover: the window misses the island", land, total)
	}
	if float64(agree) < 0.97*float64(total) {
		t.Errorf("nearest warp agrees with a direct lookup at %d of %d pixels", agree, total)
	}
}

func TestGDALPath(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/x.tif":   "/vsicurl/https://h/x.tif",
		"s3://bucket/k.tif": "/vsis3/bucket/k.tif",
		"/data/x.tif":       "/data/x.tif",
		"/vsimem/x.tif":     "/vsimem/x.tif",
	} {
		if got := GDALPath(in); got != want {
			t.Errorf("GDALPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRemote: hrefs read over a network, by URL or GDAL network path,
// and local ones (files, GDAL's memory).
func TestRemote(t *testing.T) {
	for in, want := range map[string]bool{
		"https://h/x.tif": true, "http://127.0.0.1:8765/B04.tif": true, "s3://bucket/k.tif": true, "gs://b/k.tif": true,
		"/vsicurl/https://h/x.tif": true, "/vsis3/bucket/k.tif": true, "/vsiaz/c/k.tif": true, "/vsiswift/c/k.tif": true,
		"/data/x.tif": false, "x.tif": false, "/vsimem/x.tif": false, "": false, "/data/https/x.tif": false,
	} {
		if got := Remote(in); got != want {
			t.Errorf("Remote(%q) = %v, want %v", in, got, want)
		}
	}
}
