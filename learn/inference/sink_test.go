package inference

import (
	"context"
	"sync"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// dnOnly is a DNPredictor that predicts class 0 everywhere and counts its
// calls.
type dnOnly struct {
	mu    sync.Mutex
	calls int
}

func (p *dnOnly) Predict(context.Context, [][]float32, []bool, []uint8, []float32) error {
	panic("Predict on a DN predictor")
}

func (p *dnOnly) PredictDN(dn features.DN, cls []uint8, conf []float32) error {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	clear(cls)
	for i := range conf {
		conf[i] = 1
	}
	return nil
}

// sinkDN is a SinkDNPredictor that records the windows it serves.
type sinkDN struct {
	dnOnly
	windows map[[4]int]bool
}

func (p *sinkDN) PredictDNSink(sink WindowSink, x, y, w, h int, dn features.DN, cls []uint8, conf []float32) error {
	p.mu.Lock()
	p.windows[[4]int{x, y, w, h}] = true
	p.mu.Unlock()
	return p.PredictDN(dn, cls, conf)
}

// countSink counts the windows' DNs it is given.
type countSink struct {
	mu      sync.Mutex
	windows map[[4]int]bool
}

func (s *countSink) Features(int, int, int, int, [][]float32) error {
	panic("features reached a DN sink")
}

func (s *countSink) DN(x, y, w, h int, dn features.DN) error {
	s.mu.Lock()
	s.windows[[4]int{x, y, w, h}] = true
	s.mu.Unlock()
	return nil
}

// TestSinkDNPredictor: a predictor that serves the sink itself gets every
// window once, with its place in the tile, and the sink's DN is not
// called beside it; a plain DN predictor leaves every window to the
// sink's DN.
func TestSinkDNPredictor(t *testing.T) {
	const w, h, side = 70, 45, 32
	bands := []string{"B04", "B08"}
	g := geo.Grid{EPSG: 32631, Width: w, Height: h, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	tile := stack.New("t", g, bands, 1e-4, 0)
	for b := range tile.DN {
		for i := range tile.DN[b] {
			tile.DN[b][i] = uint16(1000 + i%700)
		}
	}
	set, err := features.NewSet([]string{"B04", "ndvi"}, bands)
	if err != nil {
		t.Fatal(err)
	}
	want := map[[4]int]bool{}
	for y := 0; y < h; y += side {
		for x := 0; x < w; x += side {
			want[[4]int{x, y, min(side, w-x), min(side, h-y)}] = true
		}
	}
	run := func(pred Predictor, sink *countSink) {
		written := &memWriter{w: w, pix: make([]uint8, w*h)}
		tt := Tile{Grid: g, Scale: 1e-4, Window: side, Class: written, Codes: []uint8{10}, Memory: tile, Sink: sink}
		if _, err := Run(context.Background(), tt, set, pred, progress.Nop{}); err != nil {
			t.Fatal(err)
		}
	}
	sp := &sinkDN{windows: map[[4]int]bool{}}
	sink := &countSink{windows: map[[4]int]bool{}}
	run(sp, sink)
	if len(sink.windows) != 0 {
		t.Errorf("the sink's DN was called for %d windows beside PredictDNSink", len(sink.windows))
	}
	if len(sp.windows) != len(want) || sp.calls != len(want) {
		t.Errorf("PredictDNSink served %d windows (%d predictions), want %d", len(sp.windows), sp.calls, len(want))
	}
	for k := range want {
		if !sp.windows[k] {
			t.Errorf("window %v not served", k)
		}
	}
	plain := &dnOnly{}
	sink = &countSink{windows: map[[4]int]bool{}}
	run(plain, sink)
	if len(sink.windows) != len(want) || plain.calls != len(want) {
		t.Errorf("a plain DN predictor: the sink saw %d windows, %d predictions, want %d", len(sink.windows), plain.calls, len(want))
	}
}
