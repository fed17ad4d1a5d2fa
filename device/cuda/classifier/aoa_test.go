package classifier

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// TestAOABitExact checks the GPU's dissimilarity index against the CPU's
// (aoa.Map on the CPU's grid, through gonum's k-d tree and brute force):
// from feature planes at every pixel, and from digital numbers
// (reflectance and features on the device) at the centres of coarser
// grids, over several chunks, with nodata DNs and NaN features; with
// context features from a window's block with its halo.
func TestAOABitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	bands := []string{"B02", "B03", "B04", "B08", "B11"}
	r := rand.New(rand.NewPCG(41, 42))
	const w, h = 300, 211
	const scale, offset = float32(1e-4), float32(-0.1)
	dn := make([][]uint16, len(bands))
	for b := range dn {
		dn[b] = make([]uint16, w*h)
		for i := range dn[b] {
			dn[b][i] = uint16(1 + r.IntN(9000) + 1000*(i/w%3))
		}
	}
	for i := 0; i < w*h; i += 97 {
		dn[i%len(bands)][i] = 0 // nodata: NaN features, NaN DI
	}
	src := make([][]float32, len(bands))
	for b := range src {
		src[b] = composite.Reflectance(dn[b], 0, scale, offset)
	}
	for _, names := range [][]string{
		{"ndvi", "B04", "B11"}, // a k-d tree on the CPU
		{"B02", "B03", "B04", "B08", "B11", "ndvi", "ndwi", "evi", "bsi", "savi"}, // brute force
		{"B04", "ndvi", "mean(B08,9)", "std(ndvi,5)", "range(B11,3)"},             // context features
	} {
		set, err := features.NewSet(names, bands)
		if err != nil {
			t.Fatal(err)
		}
		nf := len(names)
		// The whole image's features: the CPU's specification.
		planes := src
		if nc := len(set.ContextFeatures()); nc > 0 {
			ctx := make([][]float32, nc)
			for k := range ctx {
				ctx[k] = make([]float32, w*h)
			}
			if err := set.ContextCompute(ctx, src, features.Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
				t.Fatal(err)
			}
			planes = append(append([][]float32{}, src...), ctx...)
		}
		feats := make([][]float32, nf)
		for f := range feats {
			feats[f] = make([]float32, w*h)
		}
		if err := (features.CPU{Set: set}).Compute(feats, planes); err != nil {
			t.Fatal(err)
		}
		// Training points: every 37th pixel.
		var s []aoa.Sample
		for i := 0; i < w*h; i += 37 {
			x := make([]float32, nf)
			for f := range x {
				x[f] = feats[f][i]
			}
			s = append(s, aoa.Sample{X: x, Fold: uint64(i / w / 20), Key: r.Uint64()})
		}
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = float64(1 + f%3)
		}
		ref, err := aoa.Build(context.Background(), s, nf, imp, 1000, "test")
		if err != nil {
			t.Fatal(err)
		}
		g, err := NewAOA(d, ref)
		if err != nil {
			t.Fatal(err)
		}
		fe, err := NewFeatures(d, set)
		if err != nil {
			t.Fatal(err)
		}
		// Every pixel, from feature planes.
		full := aoa.NewMap(aoa.Grid{Width: w, Height: h, Step: 1})
		full.Features(aoa.NewIndex(ref), ref, 0, 0, w, h, feats)
		di := make([]float32, w*h)
		if err := g.DI(feats, di); err != nil {
			t.Fatal(err)
		}
		for i := range di {
			if math.Float32bits(di[i]) != math.Float32bits(full.DI[i]) {
				t.Fatalf("%v, pixel %d: CPU %v, GPU %v", names, i, full.DI[i], di[i])
			}
		}
		// From digital numbers: a window of the image (the whole image
		// without context features; with them, a window inside it read
		// with its halo), on the CPU's grids.
		x0, y0, iw, ih := 0, 0, w, h
		if set.Radius() > 0 {
			x0, y0, iw, ih = 37, 23, 200, 150
		}
		ox, oy, rect := features.Halo(x0, y0, iw, ih, w, h, set.Radius())
		block := make([][]uint16, len(bands))
		for b := range block {
			for y := range rect.Height {
				block[b] = append(block[b], dn[b][(oy+y)*w+ox:][:rect.Width]...)
			}
		}
		inner := make([][]float32, nf)
		for f := range inner {
			for y := range ih {
				inner[f] = append(inner[f], feats[f][(y0+y)*w+x0:][:iw]...)
			}
		}
		for _, step := range []int{1, 7, 10} {
			grid := aoa.Grid{Width: iw, Height: ih, Step: step}
			cpu := aoa.NewMap(grid)
			cpu.Features(aoa.NewIndex(ref), ref, 0, 0, iw, ih, inner)
			cells, pixels := grid.In(0, 0, iw, ih)
			px := make([]int32, len(pixels))
			for k, p := range pixels {
				px[k] = int32(p)
			}
			for _, chunk := range []int{5003, iw * ih} {
				func() {
					defer func() { g.maxChunk = 0 }()
					g.maxChunk = chunk
					got := make([]float32, len(px))
					if err := g.DIFromDN(fe, features.DN{Planes: block, Rect: rect, Scale: scale, Offset: offset}, px, got); err != nil {
						t.Fatal(err)
					}
					for k, c := range cells {
						if math.Float32bits(got[k]) != math.Float32bits(cpu.DI[c]) {
							t.Fatalf("%v, step %d, chunks of %d, cell %d: CPU %v, GPU %v", names, step, chunk, c, cpu.DI[c], got[k])
						}
					}
				}()
			}
		}
		fe.Close()
		g.Close()
	}
}
