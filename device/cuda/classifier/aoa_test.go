package classifier

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/device/cuda"
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
		ref, err := aoa.Build(context.Background(), s, nf, imp, 1000, "test", nil)
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
		// The training points unsplit, one block measuring all of them.
		func() {
			du := gpuWith(t, cuda.Options{AOAUnsplit: true})
			defer du.Close()
			gu, err := NewAOA(du, ref)
			if err != nil {
				t.Fatal(err)
			}
			defer gu.Close()
			if err := gu.DI(feats, di); err != nil {
				t.Fatal(err)
			}
			for i := range di {
				if math.Float32bits(di[i]) != math.Float32bits(full.DI[i]) {
					t.Fatalf("%v unsplit, pixel %d: CPU %v, GPU %v", names, i, full.DI[i], di[i])
				}
			}
		}()
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

// TestAOAPairsBitExact: the GPU's measure of training points among
// themselves is aoa.CPUPairs's, bit for bit (the sum of distances and
// each point's nearest distance to another fold), and so is the
// Reference built with it; points all in one fold have no other-fold
// neighbour (+Inf).
func TestAOAPairsBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ n, nf, folds int }{{2, 1, 2}, {257, 5, 3}, {3001, 37, 7}, {500, 64, 1}} {
		p := make([]float64, c.n*c.nf)
		for i := range p {
			p[i] = r.NormFloat64() * float64(1+i%c.nf)
		}
		fold := make([]uint64, c.n)
		for i := range fold {
			fold[i] = uint64(r.IntN(c.folds)) << 20
		}
		ctx := context.Background()
		wantSum, wantCV, err := aoa.CPUPairs(ctx, p, c.nf, fold)
		if err != nil {
			t.Fatal(err)
		}
		gotSum, gotCV, err := AOAPairs(ctx, d, p, c.nf, fold)
		if err != nil {
			t.Fatal(err)
		}
		if math.Float64bits(gotSum) != math.Float64bits(wantSum) {
			t.Errorf("n %d nf %d: sum %v on the GPU, %v on the CPU", c.n, c.nf, gotSum, wantSum)
		}
		for i := range wantCV {
			if math.Float64bits(gotCV[i]) != math.Float64bits(wantCV[i]) {
				t.Fatalf("n %d nf %d: point %d's nearest other-fold distance %v on the GPU, %v on the CPU", c.n, c.nf, i, gotCV[i], wantCV[i])
			}
		}
		if c.folds == 1 && !math.IsInf(gotCV[0], 1) {
			t.Errorf("one fold: %v, want +Inf", gotCV[0])
		}
	}
	// A Reference built with either measure is the same.
	var s []aoa.Sample
	for i := range 2000 {
		x := make([]float32, 6)
		for f := range x {
			x[f] = float32(r.NormFloat64())
		}
		s = append(s, aoa.Sample{X: x, Fold: uint64(i % 5), Key: r.Uint64()})
	}
	imp := []float64{1, 2, 3, 0, 5, 1}
	cpu, err := aoa.Build(context.Background(), s, 6, imp, 1500, "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	gpuRef, err := aoa.Build(context.Background(), s, 6, imp, 1500, "f", func(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64, error) {
		return AOAPairs(ctx, d, p, nf, fold)
	})
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(cpu.MeanDistance) != math.Float64bits(gpuRef.MeanDistance) || math.Float64bits(cpu.Threshold) != math.Float64bits(gpuRef.Threshold) {
		t.Errorf("reference: mean distance %v / %v, threshold %v / %v (CPU / GPU)", cpu.MeanDistance, gpuRef.MeanDistance, cpu.Threshold, gpuRef.Threshold)
	}
}
