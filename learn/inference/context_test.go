package inference

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

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

	// The same tile predicted while it is being filled (lulc run maps a
	// tile beside its composite): windows of 20×13 arrive in a shuffled
	// order, and each prediction window, halo included, waits for its
	// rows. The map is the whole tile's.
	fill := func(dst *stack.Tile, failAfter int) {
		type win struct{ x, y, w, h int }
		var wins []win
		for y := 0; y < h; y += 13 {
			for x := 0; x < w; x += 20 {
				wins = append(wins, win{x, y, min(20, w-x), min(13, h-y)})
			}
		}
		rand.New(rand.NewPCG(7, 7)).Shuffle(len(wins), func(i, j int) { wins[i], wins[j] = wins[j], wins[i] })
		for k, v := range wins {
			if k == failAfter {
				dst.EndFilling(errors.New("a window's read failed"))
				return
			}
			dn := make([][]uint16, len(bands))
			for b := range dn {
				dn[b] = make([]uint16, v.w*v.h)
				tile.ReadBand(b, v.x, v.y, v.w, v.h, dn[b])
			}
			if err := dst.Write(v.x, v.y, v.w, v.h, dn, make([]uint8, v.w*v.h), make([]uint8, v.w*v.h)); err != nil {
				dst.EndFilling(err)
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
		dst.EndFilling(nil)
	}
	filling := stack.New("t", g, bands, 1e-4, 0)
	filling.StartFilling(len(bands))
	go fill(filling, -1)
	got := make([]uint8, w*h)
	tt := Tile{Grid: g, Scale: 1e-4, Window: 16, Class: &memWriter{w: w, pix: make([]uint8, w*h)}, Codes: codes, Memory: filling, Classes: got}
	if _, err := Run(context.Background(), tt, set, NewCPU(m), progress.Nop{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("a tile predicted while it was filled: the map differs from the whole tile's")
	}
	// A fill that fails fails the prediction with its reason.
	failing := stack.New("t", g, bands, 1e-4, 0)
	failing.StartFilling(len(bands))
	go fill(failing, 9)
	tt.Memory, tt.Class = failing, &memWriter{w: w, pix: make([]uint8, w*h)}
	if _, err := Run(context.Background(), tt, set, NewCPU(m), progress.Nop{}); err == nil || !strings.Contains(err.Error(), "a window's read failed") {
		t.Errorf("a tile whose fill failed: %v", err)
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
