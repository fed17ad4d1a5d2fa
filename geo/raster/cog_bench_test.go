package raster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog/cogtest"
	"github.com/lulc/lulc/geo/landcover"
)

// The encoders compared on lulc's outputs: the class map of a Sentinel-2
// tile and a stack. Run with
//
//	go test ./geo/raster -run '^$' -bench COG -benchtime 3x
//
// bytes/file is the COG's size; encoder "gdal" is GDAL's COG driver as
// lulc used it before the Go encoder.

func benchEncoders(b *testing.B, opt COGOptions, run func(b *testing.B, path string, opt COGOptions)) {
	for _, enc := range []string{"go", "gdal"} {
		b.Run(enc, func(b *testing.B) {
			opt := opt
			opt.GDALDriver = enc == "gdal"
			path := filepath.Join(b.TempDir(), "x.tif")
			b.ResetTimer()
			for range b.N {
				run(b, path, opt)
			}
			b.StopTimer()
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size()), "bytes/file")
		})
	}
}

// BenchmarkCOGClassMap encodes a 10980² class map as lulc predict does:
// Writer windows of 512 rows, MODE overviews, the WorldCover palette.
func BenchmarkCOGClassMap(b *testing.B) {
	const n = 10980
	px := cogtest.ClassMap(n)
	g := geo.Grid{EPSG: 32631, Width: n, Height: n, Transform: [6]float64{600000, 10, 0, 5100000, 0, -10}}
	for _, compress := range []string{"DEFLATE", "ZSTD"} {
		opt := COGOptions{BlockSize: 512, Compress: compress, NoData: cogtest.Ptr(0), OverviewResampling: "MODE", Classes: &landcover.WorldCover}
		b.Run(compress, func(b *testing.B) {
			benchEncoders(b, opt, func(b *testing.B, path string, opt COGOptions) {
				w, err := NewWriter(path, g, "uint8", []BandInfo{{Description: "land cover class"}}, opt)
				if err != nil {
					b.Fatal(err)
				}
				for y := 0; y < n; y += 512 {
					h := min(512, n-y)
					if err := w.Write(0, 0, y, n, h, px[y*n:(y+h)*n]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	b.Run("WriteCOG", func(b *testing.B) {
		opt := COGOptions{BlockSize: 512, NoData: cogtest.Ptr(0), OverviewResampling: "MODE", Classes: &landcover.WorldCover}
		benchEncoders(b, opt, func(b *testing.B, path string, opt COGOptions) {
			if err := WriteCOG(path, g, px, opt); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// stackBands makes a 10-band n×n stack from the real Sentinel-2 bands in
// shared/data (10 m bands at 1098², 20 m ones at 549² repeated 2×2, all
// mirrored to fill n×n), or from a synthetic texture without them.
func stackBands(b *testing.B, n int) [][]uint16 {
	dir := "../../../shared/data/earthsearch-s2-l2a-29RKH-2020-02-19"
	names := []string{"B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"}
	out := make([][]uint16, len(names))
	for i, name := range names {
		src, g, err := ReadBand[uint16](filepath.Join(dir, name+".tif"), 1)
		if err != nil {
			b.Logf("synthetic stack (%v)", err)
			for i := range out {
				out[i] = make([]uint16, n*n)
				for p := range out[i] {
					x, y := p%n, p/n
					out[i][p] = uint16(800 + 40*i + (x*7+y*3)%500 + (x*y)%37)
				}
			}
			return out
		}
		scale := 1098 / g.Width
		size := g.Width * scale
		out[i] = make([]uint16, n*n)
		for y := range n {
			sy := y % (2 * size)
			if sy >= size {
				sy = 2*size - 1 - sy
			}
			for x := range n {
				sx := x % (2 * size)
				if sx >= size {
					sx = 2*size - 1 - sx
				}
				out[i][y*n+x] = src[(sy/scale)*g.Width+sx/scale]
			}
		}
	}
	return out
}

// BenchmarkCOGStack encodes a 10-band UInt16 2048² stack as lulc ingest
// does: Writer windows, DEFLATE with the predictor, AVERAGE overviews,
// nodata 0, scale and offset per band.
func BenchmarkCOGStack(b *testing.B) {
	const n = 2048
	bands := stackBands(b, n)
	g := geo.Grid{EPSG: 32629, Width: n, Height: n, Transform: [6]float64{300000, 10, 0, 3300000, 0, -10}}
	infos := make([]BandInfo, len(bands))
	for i := range infos {
		infos[i] = BandInfo{Description: []string{"B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"}[i], Scale: 0.0001, Offset: -0.1}
	}
	for _, compress := range []string{"DEFLATE", "ZSTD"} {
		opt := COGOptions{BlockSize: 512, Compress: compress, Predictor: true, NoData: cogtest.Ptr(0)}
		b.Run(compress, func(b *testing.B) {
			benchEncoders(b, opt, func(b *testing.B, path string, opt COGOptions) {
				w, err := NewWriter(path, g, "uint16", infos, opt)
				if err != nil {
					b.Fatal(err)
				}
				for y := 0; y < n; y += 512 {
					for bi, band := range bands {
						if err := w.Write(bi, 0, y, n, 512, band[y*n:(y+512)*n]); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
