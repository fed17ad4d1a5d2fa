package cogtest

import (
	"math"
	"math/rand/v2"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
)

// Case is a raster the tests encode, with its options in plain values
// (each package turns them into its own).
type Case struct {
	Name                 string
	Width, Height, Bands int
	U16                  bool // UInt16 rather than Byte
	EPSG                 int  // 0: 32631
	Writer               bool // written window by window rather than at once
	Classes              bool // with WorldCover's colours and category names

	BlockSize     int
	Compress      string
	Predictor     bool
	Resampling    string
	OverviewCount int
	NoData        *float64
	Description   string
	Metadata      map[string]string
	Infos         []Band // nil: bands without description
}

// Band is a band's description, scale and offset.
type Band struct {
	Description   string
	Scale, Offset float64
}

// Ptr returns a pointer to v.
func Ptr(v float64) *float64 { return &v }

// Cases are the rasters both encoders write in the tests: one or more
// bands, Byte and UInt16, every compression, resampling and palette, odd
// sizes, several CRSs.
var Cases = []Case{
	{Name: "classmap", Width: 1300, Height: 700, Bands: 1, Classes: true,
		Compress: "DEFLATE", NoData: Ptr(0), Resampling: "MODE", Description: "land cover class",
		Metadata: map[string]string{"title": "a & b <c> \"d\" 'e' é", "legend": "10 tree\n20 shrub\ttab", "empty": ""}},
	{Name: "small-none", Width: 300, Height: 200, Bands: 1,
		Compress: "NONE", Resampling: "NEAREST"},
	{Name: "u8-zstd-predictor", Width: 1025, Height: 1030, Bands: 1,
		Compress: "ZSTD", Predictor: true, NoData: Ptr(255), Resampling: "AVERAGE"},
	{Name: "u16-deflate-predictor", Width: 1100, Height: 513, Bands: 1, U16: true,
		Predictor: true, NoData: Ptr(0)},
	{Name: "u16-stack", Width: 1300, Height: 900, Bands: 3, U16: true, Writer: true,
		Predictor: true, NoData: Ptr(0), Metadata: map[string]string{"lulc_config_sha": "abc123"},
		Infos: []Band{{Description: "B02", Scale: 0.0001, Offset: -0.1}, {Description: "B03", Scale: 0.0001, Offset: -0.1}, {Scale: 1}}},
	{Name: "u16-zstd-mode-256", Width: 700, Height: 1500, Bands: 2, U16: true, Writer: true,
		Compress: "zstd", BlockSize: 256, Resampling: "mode", OverviewCount: 2},
	{Name: "u8-two-bands-nearest", Width: 640, Height: 333, Bands: 2, Writer: true,
		BlockSize: 256, Resampling: "NEAREST", NoData: Ptr(3)},
	{Name: "u8-writer-classes", Width: 517, Height: 1029, Bands: 1, Writer: true, Classes: true,
		NoData: Ptr(0), Resampling: "MODE", Description: "ignored: the band has its own",
		Infos: []Band{{Description: "labels"}}},
	{Name: "geographic", Width: 900, Height: 600, Bands: 1, U16: true, EPSG: 4326,
		Compress: "DEFLATE", NoData: Ptr(0), OverviewCount: 5},
	{Name: "tiny-many-overviews", Width: 40, Height: 5, Bands: 1, U16: true,
		Resampling: "MODE", NoData: Ptr(0), OverviewCount: 9},
	{Name: "thin", Width: 2000, Height: 3, Bands: 1, EPSG: 3035,
		Resampling: "AVERAGE", NoData: Ptr(0), BlockSize: 128},
}

// Grid is the case's grid: 10 m UTM 31N, or its CRS's own.
func (c Case) Grid() geo.Grid {
	g := geo.Grid{EPSG: 32631, Width: c.Width, Height: c.Height, Transform: [6]float64{600000, 10, 0, 5100000, 0, -10}}
	switch c.EPSG {
	case 4326:
		g.EPSG, g.Transform = 4326, [6]float64{6.5, 1.0 / 12000, 0, 0.5, 0, -1.0 / 12000}
	case 0:
	default:
		g.EPSG, g.Transform = c.EPSG, [6]float64{4000000, 20, 0, 3000000, 0, -20}
	}
	return g
}

// Pixels makes band b of a case: patches of classes with nodata holes
// for Byte (values above 255 never occur), a gradient with noise for
// UInt16.
func (c Case) Pixels(b int) []uint16 {
	r := rand.New(rand.NewPCG(uint64(c.Width), uint64(b)))
	codes := landcover.WorldCover.Codes()
	px := make([]uint16, c.Width*c.Height)
	for i := range px {
		x, y := i%c.Width, i/c.Width
		if !c.U16 {
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

// Window is a window of one band.
type Window struct{ Band, X, Y, W, H int }

// Windows cuts the case's bands into 230×190 windows, shuffled.
func (c Case) Windows() []Window {
	var wins []Window
	for b := range c.Bands {
		for y := 0; y < c.Height; y += 190 {
			for x := 0; x < c.Width; x += 230 {
				wins = append(wins, Window{b, x, y, min(230, c.Width-x), min(190, c.Height-y)})
			}
		}
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(wins), func(i, j int) { wins[i], wins[j] = wins[j], wins[i] })
	return wins
}

// Cut copies window w of plane (the case's width) into a new slice.
func (c Case) Cut(plane []uint16, w Window) []uint16 {
	buf := make([]uint16, w.W*w.H)
	for r := range w.H {
		copy(buf[r*w.W:], plane[(w.Y+r)*c.Width+w.X:][:w.W])
	}
	return buf
}

// ToU8 narrows values to bytes, as a Byte raster keeps them.
func ToU8(v []uint16) []uint8 {
	out := make([]uint8, len(v))
	for i, x := range v {
		out[i] = uint8(x)
	}
	return out
}

// U8Widened is v narrowed to bytes and widened back.
func U8Widened(v []uint16) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(uint8(x))
	}
	return out
}

// FirstDiff is the first index where a and b differ, 0 when their
// lengths do, -1 when they are equal.
func FirstDiff(a, b []uint16) int {
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

// ClassMap is an n×n class map of 30×50-pixel patches of WorldCover
// classes, with nodata (0) in one patch out of twenty.
func ClassMap(n int) []uint8 {
	codes := landcover.WorldCover.Codes()
	px := make([]uint8, n*n)
	for y := range n {
		for x := range n {
			h := uint64(x/30)*0x9E3779B97F4A7C15 ^ uint64(y/50)*0xC2B2AE3D27D4EB4F
			h ^= h >> 29
			h *= 0xBF58476D1CE4E5B9
			h ^= h >> 32
			if h%20 == 0 {
				continue
			}
			px[y*n+x] = codes[h%uint64(len(codes))]
		}
	}
	return px
}

// Overview is an independent, per-pixel statement of the encoder's
// overview rule (cog.Options): the level below src (sw×sh) and its size.
func Overview(src []uint16, sw, sh int, rule string, nodata *float64) ([]uint16, int, int) {
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
			out[y*dw+x] = reduce(vals, rule)
		}
	}
	return out, dw, dh
}

// reduce applies rule to a window's values.
func reduce(vals []uint16, rule string) uint16 {
	switch rule {
	case "NEAREST":
		return vals[0]
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
		return best
	}
	// AVERAGE, also "".
	sum := 0.0
	for _, v := range vals {
		sum += float64(v)
	}
	return uint16(math.Floor(sum/float64(len(vals)) + 0.5))
}
