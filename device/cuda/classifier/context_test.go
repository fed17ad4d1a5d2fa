package classifier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// TestPredictDNContextBitExact checks the device's context features and
// prediction from a block with its halo against the CPU's: reflectance,
// Set.ContextCompute over the halo, CPU.Compute of the inner window, the
// bins and the walk. Blocks inside a tile (a halo all round), at its
// corner (none above or left) and with the window as wide as the block;
// each again from more goroutines at once than the predictor has DN
// blocks, with the DNs copied on the owner goroutine, and with the area
// of applicability measured in the same pass (PredictDNContextDI), its
// DIs the CPU's.
func TestPredictDNContextBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	bands := []string{"B02", "B03", "B04", "B08", "B11", "p50(ndvi)"}
	names := []string{"B04", "ndvi", "mean(B08,15)", "std(B08,15)", "range(B08,15)", "std(ndvi,7)", "mean(ndwi,3)",
		"range(evi,5)", "mean(nd(B03,B11),31)", "range(nd(B03,B11),3)", "std(bsi,31)", "B11", "p50(ndvi)", "std(p50(ndvi),7)",
		"std(ndwi,9)", "mean(B11,21)", "range(B11,21)"}
	// Every base but nd(B03,B11) fits features_context's shared memory; that
	// one (a 31-px window and a range) takes the two-pass kernels.
	set, err := features.NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(41, 42))
	const k = 5
	const scale, offset = float32(1e-4), float32(-0.1)
	for _, rect := range []features.Rect{
		{Width: 330, Height: 290, X: 15, Y: 15, InnerW: 300, InnerH: 260},
		{Width: 315, Height: 275, X: 0, Y: 0, InnerW: 300, InnerH: 260},
		{Width: 211, Height: 97, X: 0, Y: 15, InnerW: 211, InnerH: 67},
	} {
		n := rect.InnerW * rect.InnerH
		dn := testDN(r, len(bands), rect.Width, rect.Height)
		feats := cpuContextFeatures(t, set, dn, rect, scale, offset)
		nf := len(names)
		rows := features.Rows(feats)
		y := make([]uint8, n)
		for i := range y {
			y[i] = uint8(r.IntN(k))
		}
		p := forest.Params{Trees: 12, MaxDepth: 14, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 9}
		fo, bins := fitForest(t, rows, y, nf, k, p)
		xb, _ := bins.Bin(rows, nf)
		wantCls, wantConf, _ := fo.Compile().Classify(xb)

		g, err := NewPredictor(d, &forest.Model{Bins: bins, Forest: fo})
		if err != nil {
			t.Fatal(err)
		}
		fe, err := NewFeatures(d, set)
		if err != nil {
			t.Fatal(err)
		}
		block := features.DN{Planes: dn, Rect: rect, Scale: scale, Offset: offset}
		cls, conf := make([]uint8, n), make([]float32, n)
		if err := g.PredictDNContext(fe, block, cls, conf); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if cls[i] != wantCls[i] || math.Float32bits(conf[i]) != math.Float32bits(wantConf[i]) {
				var in []float32
				for f := range feats {
					in = append(in, feats[f][i])
				}
				t.Fatalf("block %+v, pixel %d: CPU %d/%v, GPU %d/%v; features %v", rect, i, wantCls[i], wantConf[i], cls[i], conf[i], in)
			}
		}
		// differs names the first pixel whose class or confidence is not
		// the CPU's.
		differs := func(c []uint8, f []float32) error {
			for i := range n {
				if c[i] != wantCls[i] || math.Float32bits(f[i]) != math.Float32bits(wantConf[i]) {
					return fmt.Errorf("pixel %d: CPU %d/%v, GPU %d/%v", i, wantCls[i], wantConf[i], c[i], f[i])
				}
			}
			return nil
		}
		bad := rect
		bad.X = rect.Width
		if err := g.PredictDNContext(fe, features.DN{Planes: dn, Rect: bad, Scale: scale, Offset: offset}, cls, conf); err == nil {
			t.Error("an inner block outside its halo was accepted")
		}
		// Windows from more goroutines than the predictor has blocks for
		// their DNs, each block filled beside the owner while it runs
		// another window's pass.
		var wg sync.WaitGroup
		errs := make([]error, 2*contextBlocks)
		for k := range errs {
			wg.Go(func() {
				c, f := make([]uint8, n), make([]float32, n)
				if errs[k] = g.PredictDNContext(fe, block, c, f); errs[k] == nil {
					errs[k] = differs(c, f)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("block %+v, windows at once: %v", rect, err)
			}
		}
		// The DNs copied on the owner goroutine (LULC_WINDOW_ASIDE=off).
		func() {
			do := gpuWith(t, cuda.Options{OwnerCopies: true})
			defer do.Close()
			gp, err := NewPredictor(do, &forest.Model{Bins: bins, Forest: fo})
			if err != nil {
				t.Fatal(err)
			}
			defer gp.Close()
			feo, err := NewFeatures(do, set)
			if err != nil {
				t.Fatal(err)
			}
			defer feo.Close()
			c, f := make([]uint8, n), make([]float32, n)
			if err := gp.PredictDNContext(feo, block, c, f); err != nil {
				t.Fatal(err)
			}
			if err := differs(c, f); err != nil {
				t.Fatalf("block %+v, copies on the owner, %v", rect, err)
			}
		}()
		// The same pass measuring the area of applicability at a grid's
		// cells: the classes and confidences as above, the DIs the CPU's.
		var samples []aoa.Sample
		for i := 0; i < n; i += 29 {
			samples = append(samples, aoa.Sample{X: rows[i*nf : (i+1)*nf], Fold: uint64(i % 3), Key: r.Uint64()})
		}
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = float64(1 + f%4)
		}
		ref, err := aoa.Build(context.Background(), samples, nf, imp, 1500, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewAOA(d, ref)
		if err != nil {
			t.Fatal(err)
		}
		grid := aoa.Grid{Width: rect.InnerW, Height: rect.InnerH, Step: 7}
		want := aoa.NewMap(grid)
		want.Features(aoa.NewIndex(ref), ref, 0, 0, rect.InnerW, rect.InnerH, feats)
		cells, pixels := grid.In(0, 0, rect.InnerW, rect.InnerH)
		px := make([]int32, len(pixels))
		for k, q := range pixels {
			px[k] = int32(q)
		}
		di := make([]float32, len(px))
		clear(cls)
		clear(conf)
		if err := g.PredictDNContextDI(fe, block, cls, conf, a, px, di); err != nil {
			t.Fatal(err)
		}
		if err := differs(cls, conf); err != nil {
			t.Fatalf("block %+v with the DI, %v", rect, err)
		}
		for k, c := range cells {
			if math.Float32bits(di[k]) != math.Float32bits(want.DI[c]) {
				t.Fatalf("block %+v, cell %d: CPU DI %v, GPU %v", rect, c, want.DI[c], di[k])
			}
		}
		if len(px) > 1 {
			px[0], px[1] = px[1], px[0]
			if err := g.PredictDNContextDI(fe, block, cls, conf, a, px, di); err == nil {
				t.Error("pixels out of order were accepted")
			}
		}
		a.Close()
		fe.Close()
		g.Close()
	}
}

// TestPredictDNContextBeside checks windows whose passes are waited for
// beside the owner goroutine (every base in features_context's shared
// memory, no two-pass buffers from the device's pool): windows of two
// predictors (two tiles) from several goroutines at once, with their
// area of applicability, each window's classes, confidences and DIs the
// CPU's.
func TestPredictDNContextBeside(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	bands := []string{"B03", "B04", "B08", "B11"}
	names := []string{"B04", "ndvi", "mean(B08,15)", "std(B08,15)", "range(ndvi,5)", "std(ndwi,9)", "mean(B11,21)", "B11"}
	set, err := features.NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(43, 44))
	const scale, offset = float32(1e-4), float32(-0.1)
	rect := features.Rect{Width: 280, Height: 250, X: 10, Y: 10, InnerW: 260, InnerH: 230}
	n, nf := rect.InnerW*rect.InnerH, len(names)
	type tile struct {
		block        features.DN
		cls          []uint8
		conf, di     []float32
		pixels       []int32
		g            *Predictor
		a            *AOA
		cellsOfPixel []int
	}
	fe, err := NewFeatures(d, set)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	if fe.ctx.twoPass {
		t.Fatal("the set takes the two-pass kernels, whose windows are waited for on the owner")
	}
	var tiles []*tile
	for k := range 2 {
		dn := testDN(r, len(bands), rect.Width, rect.Height)
		feats := cpuContextFeatures(t, set, dn, rect, scale, offset)
		rows := features.Rows(feats)
		y := make([]uint8, n)
		for i := range y {
			y[i] = uint8(r.IntN(4))
		}
		fo, bins := fitForest(t, rows, y, nf, 4, forest.Params{Trees: 8, MaxDepth: 12, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: uint64(7 + k)})
		xb, _ := bins.Bin(rows, nf)
		cls, conf, _ := fo.Compile().Classify(xb)
		var samples []aoa.Sample
		for i := 0; i < n; i += 31 {
			samples = append(samples, aoa.Sample{X: rows[i*nf : (i+1)*nf], Fold: uint64(i % 3), Key: r.Uint64()})
		}
		imp := make([]float64, nf)
		for f := range imp {
			imp[f] = float64(1 + f%3)
		}
		ref, err := aoa.Build(context.Background(), samples, nf, imp, 1000, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		grid := aoa.Grid{Width: rect.InnerW, Height: rect.InnerH, Step: 5}
		want := aoa.NewMap(grid)
		want.Features(aoa.NewIndex(ref), ref, 0, 0, rect.InnerW, rect.InnerH, feats)
		cells, pixels := grid.In(0, 0, rect.InnerW, rect.InnerH)
		tl := &tile{block: features.DN{Planes: dn, Rect: rect, Scale: scale, Offset: offset}, cls: cls, conf: conf, cellsOfPixel: cells}
		for _, q := range pixels {
			tl.pixels = append(tl.pixels, int32(q))
		}
		for _, c := range cells {
			tl.di = append(tl.di, want.DI[c])
		}
		if tl.g, err = NewPredictor(d, &forest.Model{Bins: bins, Forest: fo}); err != nil {
			t.Fatal(err)
		}
		defer tl.g.Close()
		if tl.a, err = NewAOA(d, ref); err != nil {
			t.Fatal(err)
		}
		defer tl.a.Close()
		tiles = append(tiles, tl)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4*contextBlocks)
	for k := range errs {
		tl := tiles[k%2]
		wg.Go(func() {
			cls, conf, di := make([]uint8, n), make([]float32, n), make([]float32, len(tl.pixels))
			if errs[k] = tl.g.PredictDNContextDI(fe, tl.block, cls, conf, tl.a, tl.pixels, di); errs[k] != nil {
				return
			}
			for i := range n {
				if cls[i] != tl.cls[i] || math.Float32bits(conf[i]) != math.Float32bits(tl.conf[i]) {
					errs[k] = fmt.Errorf("tile %d, pixel %d: CPU %d/%v, GPU %d/%v", k%2, i, tl.cls[i], tl.conf[i], cls[i], conf[i])
					return
				}
			}
			for i := range di {
				if math.Float32bits(di[i]) != math.Float32bits(tl.di[i]) {
					errs[k] = fmt.Errorf("tile %d, cell %d: CPU DI %v, GPU %v", k%2, tl.cellsOfPixel[i], tl.di[i], di[i])
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// cpuContextFeatures is the CPU's features of a block's inner window:
// reflectance of the block, context over the halo, the inner window's
// bands, features.
func cpuContextFeatures(t *testing.T, set *features.Set, dn [][]uint16, rect features.Rect, scale, offset float32) [][]float32 {
	t.Helper()
	n, nb := rect.InnerW*rect.InnerH, len(set.Bands)
	refl := make([][]float32, nb)
	for b := range refl {
		refl[b] = composite.Reflectance(dn[b], 0, scale, offset)
	}
	src := make([][]float32, set.Planes())
	for b := range nb {
		src[b] = make([]float32, n)
		for i := range rect.InnerH {
			copy(src[b][i*rect.InnerW:(i+1)*rect.InnerW], refl[b][(rect.Y+i)*rect.Width+rect.X:])
		}
	}
	for c := nb; c < len(src); c++ {
		src[c] = make([]float32, n)
	}
	if err := set.ContextCompute(src[nb:], refl, rect); err != nil {
		t.Fatal(err)
	}
	feats := make([][]float32, len(set.Features))
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	if err := (features.CPU{Set: set}).Compute(feats, src); err != nil {
		t.Fatal(err)
	}
	return feats
}

// testDN makes a block's DN planes with patches, noise, nodata (0) and
// values past the context features' clamp.
func testDN(r *rand.Rand, nb, w, h int) [][]uint16 {
	dn := make([][]uint16, nb)
	for b := range dn {
		dn[b] = make([]uint16, w*h)
		for i := range dn[b] {
			dn[b][i] = uint16(800 + (i/w/11+i%w/13+b)%5*900 + r.IntN(700))
			if r.IntN(60) == 0 {
				dn[b][i] = 0 // nodata
			}
			if r.IntN(500) == 0 {
				dn[b][i] = 65535 // past the clamp
			}
		}
	}
	return dn
}

// contextOver is the context features stats of each base over each
// window size, base by base.
func contextOver(bases []string, sizes []int, stats ...string) []string {
	var names []string
	for _, b := range bases {
		for _, w := range sizes {
			for _, s := range stats {
				names = append(names, fmt.Sprintf("%s(%s,%d)", s, b, w))
			}
		}
	}
	return names
}

// The default set's context features (configs/train-full.yaml), and the
// default's before them.
var (
	defaultContext    = contextOver([]string{"B04", "B08", "B11", "ndvi", "ndwi", "ndbi"}, []int{7, 15}, "mean", "std", "range")
	oldDefaultContext = contextOver([]string{"B04", "B08", "B11", "ndvi", "ndwi"}, []int{7, 15}, "mean", "std")
)

// flatten makes a third of the 16×16 patches of the planes dn (w×h)
// flat: every band the same DN, whose reflectance is −0.01, 0 or 0.01
// with the tests' offset of −0.1, so that normalised differences are +0
// or −0 there and windows hold zeros of both signs, ties and spans of
// nothing but equal values.
func flatten(r *rand.Rand, dn [][]uint16, w, h int) {
	for py := 0; py < h; py += 16 {
		for px := 0; px < w; px += 16 {
			if r.IntN(3) != 0 {
				continue
			}
			v := uint16(900 + 100*r.IntN(3))
			for y := py; y < min(h, py+16); y++ {
				for x := px; x < min(w, px+16); x++ {
					for b := range dn {
						dn[b][y*w+x] = v
					}
				}
			}
		}
	}
}

// mend gives the nodata DNs of the planes dn (w×h) below their top third
// a value, so that windows there are whole: features_context then sums
// without counting, and divides by a window's reciprocal.
func mend(dn [][]uint16, w, h int) {
	for b := range dn {
		for i := h / 3 * w; i < w*h; i++ {
			if dn[b][i] == 0 {
				dn[b][i] = 1234
			}
		}
	}
}

// TestContextPassBitExact compares every feature plane of the device's
// features pass over a block (Features.contextPass) with the CPU's, bit
// for bit: the default context set; a set with a base left to the
// two-pass kernels, a radius not known when compiled, ranges, indices of
// indices and a temporal plane; and a set reading more planes than a
// tile stages 256 pixels of (fewer at once), on blocks inside a tile, at
// its corner and cut to odd sizes, with nodata everywhere or only in
// their top third (whole windows below).
func TestContextPassBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	ten := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	pixel := append(slices.Clone(ten), "ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "evi", "savi", "bsi", "ndre1")
	def := append(slices.Clone(pixel), oldDefaultContext...)
	ranged := append(slices.Clone(pixel), defaultContext...)
	mixedBands := []string{"B02", "B03", "B04", "B08", "B11", "p50(ndvi)"}
	mixed := []string{"B04", "ndvi", "mean(B08,15)", "std(B08,15)", "range(B08,15)", "std(ndvi,7)", "mean(ndwi,3)",
		"range(evi,5)", "mean(nd(B03,B11),31)", "range(nd(B03,B11),3)", "std(bsi,31)", "B11", "p50(ndvi)", "std(p50(ndvi),7)",
		"std(ndwi,9)", "mean(B11,21)", "range(B11,21)"}
	var manyBands, many []string
	for p := 1; p <= 52; p++ {
		manyBands = append(manyBands, fmt.Sprintf("p%d(B08)", p))
		many = append(many, fmt.Sprintf("p%d(B08)", p))
	}
	manyBands = append(manyBands, "B04", "B08")
	many = append(many, "ndvi", "mean(ndvi,7)", "std(B08,15)", "range(p50(B08),3)")
	layerBands := append(slices.Clone(ten[:5]), "elevation", "VV")
	layers := []features.Layer{{Name: "elevation", Map: features.Affine{Scale: 2375, Offset: -500}},
		{Name: "VV", Map: features.Affine{Scale: -17.5, Offset: -50.3}}}
	layered := []string{"B04", "elevation", "VV", "ndvi", "mean(elevation,7)", "std(elevation,7)", "range(elevation,15)",
		"mean(VV,5)", "std(VV,31)", "range(VV,31)", "mean(ndvi,7)"}
	r := rand.New(rand.NewPCG(43, 44))
	const scale, offset = float32(1e-4), float32(-0.1)
	for _, c := range []struct {
		name         string
		bands, names []string
		flat, whole  bool
		layers       []features.Layer
	}{{"layers", layerBands, layered, false, false, layers}, {"layers, whole windows", layerBands, layered, true, true, layers},
		{"old default", ten, def, false, false, nil}, {"default", ten, ranged, false, false, nil}, {"default, flat patches", ten, ranged, true, false, nil},
		{"default, whole windows", ten, ranged, false, true, nil}, {"old default, flat patches, whole windows", ten, def, true, true, nil},
		{"mixed", mixedBands, mixed, false, false, nil}, {"mixed, flat patches", mixedBands, mixed, true, false, nil},
		{"mixed, whole windows", mixedBands, mixed, false, true, nil}, {"many planes", manyBands, many, false, true, nil}} {
		set, err := features.NewSet(c.names, c.bands, c.layers...)
		if err != nil {
			t.Fatal(err)
		}
		fe, err := NewFeatures(d, set)
		if err != nil {
			t.Fatal(err)
		}
		R := set.Radius()
		for _, rect := range []features.Rect{
			{Width: 300 + 2*R, Height: 260 + 2*R, X: R, Y: R, InnerW: 300, InnerH: 260},
			{Width: 300 + R, Height: 260 + R, X: 0, Y: 0, InnerW: 300, InnerH: 260},
			{Width: 211, Height: 67 + 2*R, X: 0, Y: R, InnerW: 211, InnerH: 67},
		} {
			dn := testDN(r, len(c.bands), rect.Width, rect.Height)
			if c.flat {
				flatten(r, dn, rect.Width, rect.Height)
			}
			if c.whole {
				mend(dn, rect.Width, rect.Height)
			}
			want := cpuContextFeatures(t, set, dn, rect, scale, offset)
			n, nf := rect.InnerW*rect.InnerH, len(c.names)
			got := make([]float32, n*nf)
			must(t, d.Do(func() error {
				in, err := driver.Upload(slices.Concat(usedPlanes(fe, dn)...))
				if err != nil {
					return err
				}
				defer in.Free()
				out, err := driver.Alloc(uint64(n * nf * 4))
				if err != nil {
					return err
				}
				defer out.Free()
				// A plane the pass leaves unwritten holds a NaN no feature
				// gives.
				if err := driver.Memset32(out.Ptr, 0x7fc00bad, uint64(n*nf)); err != nil {
					return err
				}
				prog, err := fe.program()
				if err != nil {
					return err
				}
				if err := fe.contextPass(0, in.Ptr, features.DN{Rect: rect, Scale: scale, Offset: offset}, prog, out.Ptr, true); err != nil {
					return err
				}
				if err := driver.Synchronize(); err != nil {
					return err
				}
				return driver.Download(got, out)
			}))
			bad := 0
			for f := range nf {
				for i := range n {
					if g, w := got[f*n+i], want[f][i]; math.Float32bits(g) != math.Float32bits(w) && bad < 5 {
						bad++
						t.Errorf("%s, block %+v: feature %s, pixel %d: GPU %v (%#x), CPU %v", c.name, rect, c.names[f], i, g, math.Float32bits(g), w)
					}
				}
			}
		}
		if chunk, _ := fe.ctx.chunk(len(fe.used)); c.name == "many planes" && chunk > 256 || c.name != "many planes" && chunk != contextPixels*256 {
			t.Errorf("%s: %d planes staged %d pixels at a time", c.name, len(fe.used), chunk)
		}
		if (strings.HasPrefix(c.name, "mixed") || strings.HasPrefix(c.name, "layers")) != fe.ctx.twoPass {
			t.Errorf("%s: two-pass kernels %v", c.name, fe.ctx.twoPass)
		}
		fe.Close()
	}
}

// TestGPUContextReport times the features pass with context features on
// the device for one 1024² window with its halo (data resident, median of
// repeats after a warm-up): the default context set against the
// per-pixel features, with the pass's traffic (DNs in, features out)
// against the device's copy bandwidth; then the default set in larger
// windows (predict.window), whose grids leave less of a last wave. Run
// with LULC_GPU_BENCH=1.
func TestGPUContextReport(t *testing.T) {
	if os.Getenv("LULC_GPU_BENCH") != "1" {
		t.Skip("set LULC_GPU_BENCH=1 to measure")
	}
	d := gpu(t)
	defer d.Close()
	const reps = 20
	var copyGBs float64
	must(t, d.Do(func() error {
		const size = 1 << 30
		a, err := driver.Alloc(size)
		if err != nil {
			return err
		}
		defer a.Free()
		b, err := driver.Alloc(size)
		if err != nil {
			return err
		}
		defer b.Free()
		ms, err := driver.TimeIt(reps, func() error { return driver.CopyOnDevice(b.Ptr, a.Ptr, size) })
		copyGBs = 2 * size / (ms / 1e3) / 1e9
		fmt.Printf("device %s: device-to-device copy %.0f GB/s (read + written)\n", d.Name, copyGBs)
		return err
	}))
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	pixel := append(append([]string{}, bands...), "ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "evi", "savi", "bsi", "ndre1")
	wide := oldDefaultContext
	var ranges []string
	for _, b := range []string{"B04", "B08", "B11", "ndvi", "ndwi"} {
		for _, w := range []int{3, 7, 15} {
			ranges = append(ranges, fmt.Sprintf("mean(%s,%d)", b, w), fmt.Sprintf("std(%s,%d)", b, w))
		}
		ranges = append(ranges, fmt.Sprintf("range(%s,7)", b))
	}
	r := rand.New(rand.NewPCG(5, 6))
	def := append(slices.Clone(pixel), defaultContext...)
	for _, c := range []struct {
		name  string
		names []string
		side  int
	}{{"per-pixel", pixel, 1024}, {"context, 7 and 15 px", append(slices.Clone(pixel), wide...), 1024},
		{"context, 3, 7, 15 px and ranges", append(slices.Clone(pixel), ranges...), 1024},
		{"context and ranges over 7 and 15 px (the default)", def, 1024},
		{"the default, 2048² windows (predict.window)", def, 2048}, {"the default, 4096² windows", def, 4096}} {
		side := c.side
		tileWindows := float64(10980*10980) / float64(side*side)
		set, err := features.NewSet(c.names, bands)
		if err != nil {
			t.Fatal(err)
		}
		fe, err := NewFeatures(d, set)
		if err != nil {
			t.Fatal(err)
		}
		_, _, rect := features.Halo(side, side, side, side, 3*side, 3*side, set.Radius())
		ph, n, nf := rect.Width*rect.Height, side*side, len(c.names)
		dn := make([]uint16, ph*len(bands))
		for i := range dn {
			dn[i] = uint16(500 + r.IntN(5000))
		}
		must(t, d.Do(func() error {
			in, err := driver.Upload(dn)
			if err != nil {
				return err
			}
			defer in.Free()
			out, err := driver.Alloc(uint64(n * nf * 4))
			if err != nil {
				return err
			}
			defer out.Free()
			prog, err := fe.program()
			if err != nil {
				return err
			}
			refl, err := driver.Alloc(uint64(n * len(bands) * 4))
			if err != nil {
				return err
			}
			defer refl.Free()
			ms, err := driver.TimeIt(reps, func() error {
				if set.Radius() == 0 {
					// PredictDN's pass: reflectance, then the features.
					if err := d.Launch("reflectance", int64(n*len(bands)), in.Ptr, int64(n*len(bands)), int32(0), float32(1e-4), float32(0), refl.Ptr); err != nil {
						return err
					}
					return d.Launch("features", int64(n), refl.Ptr, int32(len(bands)), int64(n), prog, int32(nf), out.Ptr)
				}
				return fe.contextPass(0, in.Ptr, features.DN{Rect: rect, Scale: 1e-4}, prog, out.Ptr, true)
			})
			bytes := float64(ph*len(bands)*2 + n*nf*4)
			gbs := bytes / (ms / 1e3) / 1e9
			fmt.Printf("%s (%d features, radius %d): %.3f ms a %d² window, %.0f ms a 10980² tile; traffic %.0f GB/s = %.0f %% of copy\n",
				c.name, nf, set.Radius(), ms, side, ms*tileWindows, gbs, 100*gbs/copyGBs)
			return err
		}))
		fe.Close()
	}
}
