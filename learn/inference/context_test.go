package inference

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// TestContextWindowsAgree predicts one tile in memory with context
// features through windows of three sizes: each window is read with its
// halo, so the maps agree pixel for pixel, and equal the forest applied
// to the whole tile's features.
func TestContextWindowsAgree(t *testing.T) {
	const w, h = 83, 71
	bands := []string{"B04", "B08", "B11"}
	g := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	tile := stack.New("t", g, bands, 1e-4, 0)
	r := rand.New(rand.NewPCG(4, 2))
	for b := range tile.DN {
		for i := range tile.DN[b] {
			// Patches of similar values, so that context means something;
			// a few gaps (DN 0).
			x, y := i%w, i/w
			tile.DN[b][i] = uint16(1000*(1+(x/9+y/7+b)%4) + r.IntN(400))
			if r.IntN(50) == 0 {
				tile.DN[b][i] = 0
			}
		}
	}
	set, err := features.NewSet([]string{"B04", "ndvi", "mean(B08,9)", "std(ndvi,5)", "range(B11,3)"}, bands)
	if err != nil {
		t.Fatal(err)
	}
	// The whole tile's features: the specification.
	refl := make([][]float32, len(bands))
	for b, dn := range tile.DN {
		refl[b] = make([]float32, w*h)
		for i, v := range dn {
			refl[b][i] = float32(v) * 1e-4
			if v == 0 {
				refl[b][i] = float32(math.NaN())
			}
		}
	}
	src := append(slices.Clone(refl), make([][]float32, 3)...)
	for k := range 3 {
		src[len(bands)+k] = make([]float32, w*h)
	}
	if err := set.ContextCompute(src[len(bands):], refl, features.Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
		t.Fatal(err)
	}
	nf := len(set.Features)
	feats := make([][]float32, nf)
	for f := range feats {
		feats[f] = make([]float32, w*h)
	}
	if err := (features.CPU{Set: set}).Compute(feats, src); err != nil {
		t.Fatal(err)
	}
	// A forest overfitted to random labels: its map turns on small
	// differences in any feature.
	x := features.Rows(feats)
	y := make([]uint8, w*h)
	for i := range y {
		y[i] = uint8(r.IntN(2))
	}
	bins, err := forest.QuantileBins(x, nf, 255, w*h, 1)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := bins.Bin(x, nf)
	if err != nil {
		t.Fatal(err)
	}
	p := forest.Params{Trees: 9, MaxDepth: 24, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 1}
	fo, err := forest.Train(context.Background(), xb, y, 2, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	m := &forest.Model{Features: set.Names(), Bands: bands, Scale: 1e-4, Bins: bins, Forest: fo, Params: p}
	valid := make([]bool, w*h)
	for i := range valid {
		valid[i] = tile.DN[0][i] != 0 && tile.DN[1][i] != 0 && tile.DN[2][i] != 0
	}
	cls := make([]uint8, w*h)
	conf := make([]float32, w*h)
	if err := NewCPU(m).Predict(context.Background(), feats, valid, cls, conf); err != nil {
		t.Fatal(err)
	}
	codes := []uint8{10, 20}
	want := make([]uint8, w*h)
	for i := range want {
		if valid[i] {
			want[i] = codes[cls[i]]
		}
	}
	for _, side := range []int{16, 29, 128} {
		got := make([]uint8, w*h)
		written := &memWriter{w: w, pix: make([]uint8, w*h)}
		tt := Tile{Grid: g, Scale: 1e-4, Window: side, Class: written, Codes: codes, Memory: tile, Classes: got}
		if _, err := Run(context.Background(), tt, set, NewCPU(m), progress.Nop{}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !slices.Equal(written.pix, want) {
			t.Errorf("windows of %d: the map differs from the whole tile's", side)
		}
	}
}

// memWriter is a BandWriter into one band of pixels w wide.
type memWriter struct {
	w   int
	pix []uint8
}

func (m *memWriter) Write(band, x, y, w, h int, buf any) error {
	b := buf.([]uint8)
	for r := range h {
		copy(m.pix[(y+r)*m.w+x:(y+r)*m.w+x+w], b[r*w:(r+1)*w])
	}
	return nil
}
