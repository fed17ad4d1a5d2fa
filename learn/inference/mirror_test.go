package inference

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// mirrorCPU is a MirrorPredictor on the CPU: tile stands for the device's
// copy of the tile being filled, which the fill writes before the host's,
// read at the moment a window is predicted, so a window predicted before
// its rows are whole reads what is not yet there.
type mirrorCPU struct {
	cpu      *CPU
	set      *features.Set
	tile     *stack.Tile
	mirrored bool
	// calls counts PredictMirrored's windows, dnCalls PredictDN's.
	calls, dnCalls atomic.Int64
}

func (p *mirrorCPU) Predict(ctx context.Context, feats [][]float32, valid []bool, cls []uint8, conf []float32) error {
	return p.cpu.Predict(ctx, feats, valid, cls, conf)
}

func (p *mirrorCPU) Mirrored(sink WindowSink) bool { return p.mirrored && sink == nil }

// PredictDN computes the block's features on the CPU and predicts them.
func (p *mirrorCPU) PredictDN(dn features.DN, cls []uint8, conf []float32) error {
	p.dnCalls.Add(1)
	return p.predictBlock(dn, cls, conf)
}

func (p *mirrorCPU) predictBlock(dn features.DN, cls []uint8, conf []float32) error {
	feats, err := blockFeatures(p.set, dn)
	if err != nil {
		return err
	}
	return p.cpu.Predict(context.Background(), feats, make([]bool, len(cls)), cls, conf)
}

// blockFeatures is the set's features of a block's inner window on the
// CPU: reflectance, context over the halo, then the features.
func blockFeatures(set *features.Set, dn features.DN) ([][]float32, error) {
	rect, nb := dn.Rect, len(set.Bands)
	n := rect.InnerW * rect.InnerH
	refl := make([][]float32, nb)
	src := make([][]float32, set.Planes())
	for b := range nb {
		refl[b] = composite.Reflectance(dn.Planes[b], 0, dn.Scale, dn.Offset)
		src[b] = make([]float32, n)
		for r := range rect.InnerH {
			copy(src[b][r*rect.InnerW:(r+1)*rect.InnerW], refl[b][(rect.Y+r)*rect.Width+rect.X:])
		}
	}
	for c := nb; c < len(src); c++ {
		src[c] = make([]float32, n)
	}
	if err := set.ContextCompute(src[nb:], refl, rect); err != nil {
		return nil, err
	}
	feats := make([][]float32, len(set.Features))
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	return feats, (features.CPU{Set: set}).Compute(feats, src)
}

// PredictMirrored reads the block from the tile as it is now, marks the
// window's validity and predicts it.
func (p *mirrorCPU) PredictMirrored(sink WindowSink, x, y, w, h, ox, oy int, dn features.DN, valid []bool, cls []uint8, conf []float32) error {
	p.calls.Add(1)
	if dn.Planes != nil {
		return errors.New("a mirrored window came with its planes")
	}
	rect := dn.Rect
	if ox+rect.X != x || oy+rect.Y != y || rect.InnerW != w || rect.InnerH != h {
		return errors.New("the block is not around its window")
	}
	dn.Planes = make([][]uint16, len(p.set.Bands))
	for b := range dn.Planes {
		dn.Planes[b] = make([]uint16, rect.Width*rect.Height)
		p.tile.ReadBand(b, ox, oy, rect.Width, rect.Height, dn.Planes[b])
	}
	for i := range valid {
		valid[i] = true
		for _, plane := range dn.Planes {
			if plane[(rect.Y+i/w)*rect.Width+rect.X+i%w] == 0 {
				valid[i] = false
			}
		}
	}
	return p.predictBlock(dn, cls, conf)
}

// TestMirroredWindowsAgree predicts a tile while it is filled in shuffled
// windows, each prediction window read from the device's copy of the
// tile (MirrorPredictor), and again with the windows' DNs read by the
// host (Mirrored false): both maps are the forest's over the whole
// tile's features, each way taken for every window. A tile without
// context features, or given as a stack to open rather than in memory, is
// not read from the mirror.
func TestMirroredWindowsAgree(t *testing.T) {
	const w, h = 97, 61
	bands := []string{"B04", "B08", "B11", "p50(ndvi)"}
	g := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	whole := stack.New("t", g, bands, 1e-4, 0)
	r := rand.New(rand.NewPCG(8, 3))
	for b := range whole.DN {
		for i := range whole.DN[b] {
			x, y := i%w, i/w
			whole.DN[b][i] = uint16(1000*(1+(x/7+y/5+b)%4) + r.IntN(300))
			if r.IntN(40) == 0 {
				whole.DN[b][i] = 0
			}
		}
	}
	set, err := features.NewSet([]string{"B04", "ndvi", "mean(B08,9)", "std(ndvi,5)", "range(B11,3)", "p50(ndvi)"}, bands)
	if err != nil {
		t.Fatal(err)
	}
	// The model: fitted to the whole tile's features (one block, no halo
	// to cut) against random labels.
	full := &mirrorCPU{set: set}
	nf := len(set.Features)
	block := features.DN{Planes: whole.DN, Rect: features.Rect{Width: w, Height: h, InnerW: w, InnerH: h}, Scale: 1e-4}
	feats, err := blockFeatures(set, block)
	if err != nil {
		t.Fatal(err)
	}
	rows := features.Rows(feats)
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = uint8(r.IntN(3))
	}
	bins, err := forest.QuantileBins(rows, nf, 255, w*h, 1)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := bins.Bin(rows, nf)
	if err != nil {
		t.Fatal(err)
	}
	p := forest.Params{Trees: 7, MaxDepth: 20, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 2}
	fo, err := forest.Train(context.Background(), xb, labels, 3, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	m := &forest.Model{Features: set.Names(), Bands: bands, Scale: 1e-4, Bins: bins, Forest: fo, Params: p}
	full.cpu = NewCPU(m)
	codes := []uint8{10, 20, 30}
	cls, conf := make([]uint8, w*h), make([]float32, w*h)
	if err := full.predictBlock(block, cls, conf); err != nil {
		t.Fatal(err)
	}
	want := make([]uint8, w*h)
	for i := range want {
		if whole.DN[0][i] != 0 && whole.DN[1][i] != 0 && whole.DN[2][i] != 0 && whole.DN[3][i] != 0 {
			want[i] = codes[cls[i]]
		}
	}

	// fill writes the tile into dst in shuffled 24×11 windows, each into
	// dev first (the device's copy, which the composite places first).
	fill := func(dst, dev *stack.Tile) {
		type win struct{ x, y, w, h int }
		var wins []win
		for y := 0; y < h; y += 11 {
			for x := 0; x < w; x += 24 {
				wins = append(wins, win{x, y, min(24, w-x), min(11, h-y)})
			}
		}
		rand.New(rand.NewPCG(1, 9)).Shuffle(len(wins), func(i, j int) { wins[i], wins[j] = wins[j], wins[i] })
		for _, v := range wins {
			dn := make([][]uint16, len(bands))
			for b := range dn {
				dn[b] = make([]uint16, v.w*v.h)
				whole.ReadBand(b, v.x, v.y, v.w, v.h, dn[b])
			}
			if err := dev.Write(v.x, v.y, v.w, v.h, dn, make([]uint8, v.w*v.h), make([]uint8, v.w*v.h)); err != nil {
				dst.EndFilling(err)
				return
			}
			if err := dst.Write(v.x, v.y, v.w, v.h, dn, make([]uint8, v.w*v.h), make([]uint8, v.w*v.h)); err != nil {
				dst.EndFilling(err)
				return
			}
			time.Sleep(300 * time.Microsecond)
		}
		dst.EndFilling(nil)
	}
	const side = 20
	windows := int64(((w + side - 1) / side) * ((h + side - 1) / side))
	for _, mirrored := range []bool{true, false} {
		// Read from the device, the host's tile holds no planes.
		filling, dev := stack.New("t", g, bands, 1e-4, 0), stack.New("t", g, bands, 1e-4, 0)
		if mirrored {
			filling = stack.NewElsewhere("t", g, bands, 1e-4, 0)
		}
		filling.StartFilling(len(bands))
		go fill(filling, dev)
		pred := &mirrorCPU{cpu: full.cpu, set: set, tile: dev, mirrored: mirrored}
		got := make([]uint8, w*h)
		tt := Tile{Grid: g, Scale: 1e-4, Window: side, Class: &memWriter{w: w, pix: make([]uint8, w*h)}, Codes: codes, Memory: filling, Classes: got}
		tm, err := Run(context.Background(), tt, set, pred, progress.Nop{})
		if err != nil {
			t.Fatal(err)
		}
		if tm.Mirrored != mirrored {
			t.Errorf("mirrored %v: Timings.Mirrored %v", mirrored, tm.Mirrored)
		}
		if !slices.Equal(got, want) {
			t.Errorf("mirrored %v: the map differs from the whole tile's", mirrored)
		}
		if mirrored && (pred.calls.Load() != windows || pred.dnCalls.Load() != 0) {
			t.Errorf("from the mirror: %d windows from it and %d from the host, want %d and 0", pred.calls.Load(), pred.dnCalls.Load(), windows)
		}
		if !mirrored && (pred.calls.Load() != 0 || pred.dnCalls.Load() != windows) {
			t.Errorf("from the host: %d windows from the mirror and %d from the host, want 0 and %d", pred.calls.Load(), pred.dnCalls.Load(), windows)
		}
	}

	// A tile whose planes are elsewhere, with a predictor that does not
	// read them there, fails rather than reads nothing.
	elsewhere := stack.NewElsewhere("t", g, bands, 1e-4, 0)
	tt := Tile{Grid: g, Scale: 1e-4, Window: side, Class: &memWriter{w: w, pix: make([]uint8, w*h)}, Codes: codes, Memory: elsewhere}
	if _, err := Run(context.Background(), tt, set, &mirrorCPU{cpu: full.cpu, set: set, tile: whole}, progress.Nop{}); err == nil {
		t.Error("a tile without its planes was predicted from the host")
	}
	if _, err := Run(context.Background(), tt, set, full.cpu, progress.Nop{}); err == nil {
		t.Error("a tile without its planes was predicted on the CPU")
	}

	// A set without context features is predicted from the host.
	flat, err := features.NewSet([]string{"B04", "ndvi"}, bands)
	if err != nil {
		t.Fatal(err)
	}
	if flat.Radius() != 0 {
		t.Fatal("the flat set has context")
	}
	pred := &mirrorCPU{cpu: full.cpu, set: flat, tile: whole, mirrored: true}
	tt = Tile{Grid: g, Scale: 1e-4, Window: side, Class: &memWriter{w: w, pix: make([]uint8, w*h)}, Codes: codes, Memory: whole}
	// The flat set's windows reach PredictDN (which this fake computes
	// as a context block): only that no window came from the mirror
	// matters here.
	tm, _ := Run(context.Background(), tt, flat, pred, progress.Nop{})
	if pred.calls.Load() != 0 || tm.Mirrored {
		t.Errorf("a set without context features: %d windows from the mirror", pred.calls.Load())
	}
}
