package raster

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/decode"
)

// BenchmarkTileDecode decodes every tile of a 2048² UInt16 DEFLATE band,
// as a 10 m Sentinel-2 band is stored (512-pixel tiles, no predictor), on
// one goroutine: through GDAL (a fresh handle each time, so its block
// cache does not serve it) and through ReadRanges and package decode.
func BenchmarkTileDecode(b *testing.B) {
	const n = 2048
	r := rand.New(rand.NewPCG(5, 6))
	px := make([]uint16, n*n)
	for i := range px {
		px[i] = uint16(300 + (i%n)/7 + (i/n)/5 + r.IntN(600))
	}
	path := filepath.Join(b.TempDir(), "b.tif")
	g := geo.Grid{EPSG: 32631, Width: n, Height: n, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	if err := WriteCOG(path, g, px, COGOptions{BlockSize: 512, Compress: "DEFLATE", GDALDriver: true}); err != nil {
		b.Fatal(err)
	}
	b.Run("gdal", func(b *testing.B) {
		b.SetBytes(int64(2 * n * n))
		buf := make([]uint16, 512*512)
		for b.Loop() {
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			for ty := range n / 512 {
				for tx := range n / 512 {
					if err := ReadBandWindowInto(s, 1, tx*512, ty*512, 512, 512, buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			s.Close()
		}
	})
	b.Run("lulc", func(b *testing.B) {
		b.SetBytes(int64(2 * n * n))
		buf := make([]uint16, 512*512)
		s, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		l, err := s.Layout()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			raw, err := ReadRanges(l.Path, l.Offsets, l.Sizes)
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range raw {
				if err := decode.Tile(buf, t, l.Compression, l.Predictor, l.BigEndian, 512, 512); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
