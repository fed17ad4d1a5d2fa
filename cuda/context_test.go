package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lulc/lulc/composite"
	"github.com/lulc/lulc/features"
	"github.com/lulc/lulc/forest"
)

// TestPredictDNContextBitExact checks the device's context features and
// prediction from a block with its halo against the CPU's: reflectance,
// Set.ContextCompute over the halo, CPU.Compute of the inner window, the
// bins and the walk. Blocks inside a tile (a halo all round), at its
// corner (none above or left) and with the window as wide as the block.
func TestPredictDNContextBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	bands := []string{"B02", "B03", "B04", "B08", "B11"}
	names := []string{"B04", "ndvi", "mean(B08,15)", "std(B08,15)", "range(B08,15)", "std(ndvi,7)", "mean(ndwi,3)",
		"range(evi,5)", "mean(nd(B03,B11),31)", "B11"}
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
		ph, n := rect.Width*rect.Height, rect.InnerW*rect.InnerH
		dn := make([][]uint16, len(bands))
		for b := range dn {
			dn[b] = make([]uint16, ph)
			for i := range dn[b] {
				dn[b][i] = uint16(800 + (i/rect.Width/11+i%rect.Width/13+b)%5*900 + r.IntN(700))
				if r.IntN(60) == 0 {
					dn[b][i] = 0 // nodata
				}
				if r.IntN(500) == 0 {
					dn[b][i] = 65535 // past the clamp
				}
			}
		}
		// The CPU: reflectance of the block, context over the halo, the
		// inner window's bands, features.
		refl := make([][]float32, len(bands))
		for b := range refl {
			refl[b] = composite.Reflectance(dn[b], 0, scale, offset)
		}
		src := make([][]float32, set.Planes())
		for b := range bands {
			src[b] = make([]float32, n)
			for i := range rect.InnerH {
				copy(src[b][i*rect.InnerW:(i+1)*rect.InnerW], refl[b][(rect.Y+i)*rect.Width+rect.X:])
			}
		}
		for c := len(bands); c < len(src); c++ {
			src[c] = make([]float32, n)
		}
		if err := set.ContextCompute(src[len(bands):], refl, rect); err != nil {
			t.Fatal(err)
		}
		feats := make([][]float32, len(names))
		for f := range feats {
			feats[f] = make([]float32, n)
		}
		if err := (features.CPU{Set: set}).Compute(feats, src); err != nil {
			t.Fatal(err)
		}
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
		cls, conf := make([]uint8, n), make([]float32, n)
		if err := g.PredictDNContext(fe, dn, rect, 0, scale, offset, cls, conf); err != nil {
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
		bad := rect
		bad.X = rect.Width
		if err := g.PredictDNContext(fe, dn, bad, 0, scale, offset, cls, conf); err == nil {
			t.Error("an inner block outside its halo was accepted")
		}
		fe.Close()
		g.Close()
	}
}
