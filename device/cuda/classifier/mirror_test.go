package classifier

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/features"
)

// TestPredictMirrorContextBitExact predicts windows of a tile from the
// device's copy of it (PredictMirrorContextDI) and from the same blocks'
// DNs sent up from the host (PredictDNContextDI): the classes,
// confidences and DIs are the same bits, and the validity is the host
// readers' (every band's DN not 0 over the inner window). Windows inside
// the tile, at its corners and edges (their halos cut), cut short at its
// right and bottom; with the area of applicability and without; from
// several goroutines at once; a set that reads fewer bands than the tile
// has planes; and blocks that do not fit the tile fail. A mirror given
// back (Recycle) serves the next tile of its shape only.
func TestPredictMirrorContextBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	// The tile has one plane more than the set's bands: a stack's last
	// temporal plane that the model does not read.
	planes := []string{"B02", "B03", "B04", "B08", "B11", "p50(ndvi)", "p90(ndvi)"}
	bands := planes[:6]
	names := []string{"B04", "ndvi", "mean(B08,15)", "std(B08,15)", "range(B08,15)", "std(ndvi,7)", "mean(ndwi,3)",
		"range(evi,5)", "mean(nd(B03,B11),31)", "B11", "p50(ndvi)", "std(p50(ndvi),7)", "mean(B11,21)"}
	set, err := features.NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	const tw, th, win = 613, 517, 200
	const scale, offset = float32(1e-4), float32(-0.1)
	r := rand.New(rand.NewPCG(5, 6))
	tile := testDN(r, len(planes), tw, th)
	flatten(r, tile, tw, th)
	// A band with no data over a patch: its pixels are invalid whatever
	// the others hold.
	for y := 300; y < 340; y++ {
		for x := 100; x < 180; x++ {
			tile[4][y*tw+x] = 0
		}
	}
	m, err := cuda.NewPlanesMirror(d, tw, th, len(planes))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Write(0, 0, tw, th, tile, nil); err != nil {
		t.Fatal(err)
	}

	// block is the host's copy of a block of the tile's first nb planes.
	block := func(ox, oy int, rect features.Rect, nb int) [][]uint16 {
		out := make([][]uint16, nb)
		for b := range out {
			out[b] = make([]uint16, rect.Width*rect.Height)
			for y := range rect.Height {
				copy(out[b][y*rect.Width:(y+1)*rect.Width], tile[b][(oy+y)*tw+ox:])
			}
		}
		return out
	}
	// The model and the area of applicability, from the first window.
	ox, oy, rect := features.Halo(0, 0, win, win, tw, th, set.Radius())
	feats := cpuContextFeatures(t, set, block(ox, oy, rect, len(bands)), rect, scale, offset)
	nf, n0 := len(names), rect.InnerW*rect.InnerH
	rows := features.Rows(feats)
	y := make([]uint8, n0)
	for i := range y {
		y[i] = uint8(r.IntN(4))
	}
	fo, bins := fitForest(t, rows, y, nf, 4, forest.Params{Trees: 8, MaxDepth: 12, MinSamplesLeaf: 1, Bins: 255, Bootstrap: true, Seed: 3})
	var samples []aoa.Sample
	for i := 0; i < n0; i += 37 {
		samples = append(samples, aoa.Sample{X: rows[i*nf : (i+1)*nf], Fold: uint64(i % 3), Key: r.Uint64()})
	}
	imp := make([]float64, nf)
	for f := range imp {
		imp[f] = float64(1 + f%3)
	}
	ref, err := aoa.Build(context.Background(), samples, nf, imp, 1500, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewPredictor(d, &forest.Model{Bins: bins, Forest: fo})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fe, err := NewFeatures(d, set)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	a, err := NewAOA(d, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	grid := aoa.Grid{Width: tw, Height: th, Step: 9}

	// window predicts the window at (x, y) both ways and compares;
	// invalid counts the invalid pixels it met.
	var invalid atomic.Int64
	window := func(x, y, w, h int, withAOA bool) error {
		ox, oy, rect := features.Halo(x, y, w, h, tw, th, set.Radius())
		n := w * h
		var px []int32
		if withAOA {
			_, pixels := grid.In(x, y, w, h)
			for _, p := range pixels {
				px = append(px, int32(p))
			}
		}
		aa := a
		if !withAOA {
			aa = nil
		}
		wantCls, wantConf, wantDI := make([]uint8, n), make([]float32, n), make([]float32, len(px))
		host := features.DN{Planes: block(ox, oy, rect, len(bands)), Rect: rect, Scale: scale, Offset: offset}
		var err error
		if withAOA {
			err = g.PredictDNContextDI(fe, host, wantCls, wantConf, aa, px, wantDI)
		} else {
			err = g.PredictDNContext(fe, host, wantCls, wantConf)
		}
		if err != nil {
			return err
		}
		cls, conf, di, valid := make([]uint8, n), make([]float32, n), make([]float32, len(px)), make([]bool, n)
		mb := MirrorBlock{Mirror: m, X: ox, Y: oy, Valid: valid}
		if err := g.PredictMirrorContextDI(fe, mb, features.DN{Rect: rect, Scale: scale, Offset: offset}, cls, conf, aa, px, di); err != nil {
			return err
		}
		for i := range n {
			if cls[i] != wantCls[i] || math.Float32bits(conf[i]) != math.Float32bits(wantConf[i]) {
				t.Errorf("window (%d, %d) %d × %d, pixel %d: from the host %d/%v, from the mirror %d/%v", x, y, w, h, i, wantCls[i], wantConf[i], cls[i], conf[i])
				return nil
			}
			ok := true
			for b := range bands {
				if tile[b][(y+i/w)*tw+x+i%w] == 0 {
					ok = false
				}
			}
			if !ok {
				invalid.Add(1)
			}
			if valid[i] != ok {
				t.Errorf("window (%d, %d), pixel %d: valid %v, want %v", x, y, i, valid[i], ok)
				return nil
			}
		}
		for k := range di {
			if math.Float32bits(di[k]) != math.Float32bits(wantDI[k]) {
				t.Errorf("window (%d, %d), AOA pixel %d: from the host %v, from the mirror %v", x, y, px[k], wantDI[k], di[k])
				return nil
			}
		}
		return nil
	}
	for _, w := range [][4]int{{0, 0, win, win}, {200, 200, win, win}, {400, 0, 213, win}, {0, 400, win, 117}, {400, 400, 213, 117}, {50, 290, 160, 80}} {
		for _, withAOA := range []bool{true, false} {
			if err := window(w[0], w[1], w[2], w[3], withAOA); err != nil {
				t.Fatalf("window %v: %v", w, err)
			}
		}
	}
	if invalid.Load() < 80*40 {
		t.Fatalf("%d invalid pixels seen, fewer than the patch without data", invalid.Load())
	}
	// Windows from several goroutines at once.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for k := range errs {
		wg.Go(func() { errs[k] = window(200*(k%3), 200*(k/3), win, win, k%2 == 0) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Blocks that do not fit the tile, and a mirror of fewer planes than
	// the set's bands.
	_, _, rect = features.Halo(0, 0, win, win, tw, th, set.Radius())
	n := rect.InnerW * rect.InnerH
	cls, conf, valid := make([]uint8, n), make([]float32, n), make([]bool, n)
	dn := features.DN{Rect: rect, Scale: scale, Offset: offset}
	if err := g.PredictMirrorContextDI(fe, MirrorBlock{Mirror: m, X: tw - 10, Y: 0, Valid: valid}, dn, cls, conf, nil, nil, nil); err == nil {
		t.Error("a block past the tile's right edge was predicted")
	}
	if err := g.PredictMirrorContextDI(fe, MirrorBlock{Mirror: m, X: 0, Y: 0, Valid: valid[1:]}, dn, cls, conf, nil, nil, nil); err == nil {
		t.Error("a validity of the wrong size was accepted")
	}
	small, err := cuda.NewPlanesMirror(d, tw, th, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.PredictMirrorContextDI(fe, MirrorBlock{Mirror: small, X: 0, Y: 0, Valid: valid}, dn, cls, conf, nil, nil, nil); err == nil {
		t.Error("a mirror of 3 planes served a set of 6 bands")
	}
	// A mirror given back serves the next tile of its shape.
	small.Recycle()
	if got := cuda.SpareMirror(d, tw, th, len(planes)); got != nil {
		t.Error("a mirror of 3 planes was given for 7")
	}
	if got := cuda.SpareMirror(d, tw, th, 3); got != small {
		t.Errorf("the spare mirror is %p, want %p", got, small)
	}
	if got := cuda.SpareMirror(d, tw, th, 3); got != nil {
		t.Error("a spare mirror was given twice")
	}
	small.Recycle()
	m.Recycle() // Close frees both
}
