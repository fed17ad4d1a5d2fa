// Package inference predicts land cover window by window: a streaming
// pipeline of goroutine stages (read → features → predict → write) joined
// by bounded queues, so memory stays bounded whatever the tile size and
// every core is busy. Predictors sit behind a small interface: the CPU one
// is here; the GPU's (package cuda's predictor, which takes a window's
// digital numbers and keeps a device busy while reads and writes overlap)
// is the caller's engine's; a MirrorPredictor reads the windows' digital
// numbers from its device's own copy of the tile, so the readers only wait
// for their rows. The caller opens the stack (Tile.Open), or hands it in
// memory (Tile.Memory, read as its rows become whole while it is still
// being filled), and the outputs (BandWriter): this package reads and
// writes no file itself, needs no cgo or device, and knows nothing about
// STAC.
package inference

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/bufpool"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// Predictor classifies feature planes: feats[f][i] for n pixels; it writes
// class indices into cls and the winning probability into conf. Pixels
// marked missing (valid[i] false) are skipped. Once ctx is done (an
// interrupt) Predict may stop early and return ctx's error.
type Predictor interface {
	Predict(ctx context.Context, feats [][]float32, valid []bool, cls []uint8, conf []float32) error
}

// CPU predicts with the model's forest in Go.
type CPU struct {
	Model    *forest.Model
	compiled *forest.Compiled
}

// NewCPU packs the model's forest for prediction once.
func NewCPU(m *forest.Model) *CPU { return &CPU{Model: m, compiled: m.Forest.Compile()} }

// cpuBand is how many rows the CPU predictor walks between looks at its
// context: a second or less of one core's walk, so that an interrupt
// stops a window's prediction promptly; many of the forest's 4096-row
// chunks, so that every core still has work.
const cpuBand = 1 << 16

// Predict implements Predictor: it bins the planes with the model's edges
// (the planes are already the column-major layout the forest walks) and
// averages tree probabilities, band of rows by band, stopping between
// bands once ctx is done.
func (p *CPU) Predict(ctx context.Context, feats [][]float32, valid []bool, cls []uint8, conf []float32) error {
	n := len(valid)
	for lo := 0; lo < n; lo += cpuBand {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(n, lo+cpuBand)
		band := make([][]float32, len(feats))
		for f, plane := range feats {
			band[f] = plane[lo:hi]
		}
		if err := p.predict(band, cls[lo:hi], conf[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// predict classifies every row of feats.
func (p *CPU) predict(feats [][]float32, cls []uint8, conf []float32) error {
	n := len(cls)
	m := p.Model
	xb := &forest.Binned{N: n, F: len(feats), Codes: make([]uint8, n*len(feats))}
	for f, plane := range feats {
		col := xb.Codes[f*n : (f+1)*n]
		m.Bins.Keys(f).CodeAll(plane, col)
	}
	c, pr, err := p.compiled.Classify(xb)
	if err != nil {
		return err
	}
	copy(cls, c)
	copy(conf, pr)
	return nil
}

// DNPredictor is a Predictor that can also take a window's digital-number
// planes (nodata 0) and compute reflectance and features itself, in the
// same pass (the GPU's, where neither leaves the device). Run uses it when
// the predictor offers it; the classes are those of composite.Reflectance,
// the features computer, then Predict.
type DNPredictor interface {
	Predictor
	// dn holds the planes of a block of pixels around the window (its
	// halo, for context features; the window itself when its Rect's
	// inner rectangle is the whole block); cls and conf the window's.
	PredictDN(dn features.DN, cls []uint8, conf []float32) error
}

// SinkDNPredictor is a DNPredictor that serves the tile's sink in the
// pass that predicts a window: the GPU's, which computes a window's
// features on the device once, for the forest and the area of
// applicability alike. Run calls PredictDNSink in place of the sink's DN
// and PredictDN; it gives sink what DN would have (x, y, w, h: the
// window in the tile), or calls sink.DN itself.
type SinkDNPredictor interface {
	DNPredictor
	PredictDNSink(sink WindowSink, x, y, w, h int, dn features.DN, cls []uint8, conf []float32) error
}

// MirrorPredictor is a DNPredictor whose device holds the tile it
// predicts (lulc run's composite, copied on the GPU as it is made): a
// context window is predicted from its place in the tile, so that its
// digital numbers never cross to the host, and its validity comes back
// with its classes. Run uses it for a tile in memory (Tile.Memory) with
// context features when Mirrored says so for the tile's sink.
type MirrorPredictor interface {
	DNPredictor
	// Mirrored says whether windows are predicted from the device's copy
	// with sink (nil: none) beside them.
	Mirrored(sink WindowSink) bool
	// PredictMirrored predicts the w × h window at (x, y), whose block
	// with its halo lies at (ox, oy) of the tile, dn.Rect's size (dn has
	// no planes): valid receives the window's validity (every band's DN
	// not 0), cls and conf its classes and confidences, and sink what
	// PredictDNSink gives it. The block's rows are whole in the tile.
	PredictMirrored(sink WindowSink, x, y, w, h, ox, oy int, dn features.DN, valid []bool, cls []uint8, conf []float32) error
}

// WindowSink takes every window's inputs beside the prediction (the
// area of applicability): the window's feature planes where features are
// computed on the host, or, where a DNPredictor computes them, the
// digital numbers of the window's block (rect: the window with its halo,
// as PredictDN takes them). Windows arrive from many goroutines at once.
type WindowSink interface {
	Features(x, y, w, h int, feats [][]float32) error
	DN(x, y, w, h int, dn features.DN) error
}

// Tile describes one prediction job: the stack to read, the model, where
// the outputs go.
type Tile struct {
	// Open opens the stack (a multi-band raster of UInt16 DNs, NoData 0)
	// for one reader: each reader opens its own, as GDAL's handles are
	// not to be shared. Unused when Memory is set.
	Open       func() (BandReader, error)
	Grid       geo.Grid
	Scale      float64
	Offset     float64
	Window     int // window side in pixels
	Workers    int // feature+predict goroutines (0: all CPUs)
	Readers    int // reading goroutines (0: up to 4, half the workers)
	Class      BandWriter
	Confidence BandWriter // optional
	Codes      []uint8    // class index → code
	// Features computes the feature planes; nil uses features.CPU.
	Features features.Computer
	// Memory, when set, is the stack in memory (lulc run): windows are
	// copied from it rather than decoded from Stack, each once its rows
	// are whole when the tile is still being filled (stack.Tile.Await).
	Memory *stack.Tile
	// Reference, when set, holds reference labels on Grid (class codes, 0
	// unlabelled): Run counts the predictions against them, window by
	// window, into Confusion ([reference][predicted] class indices in the
	// order of Codes). Pixels whose label is not one of Codes, or that have
	// no prediction, are left out, as lulc evaluate leaves them out.
	Reference []uint8
	Confusion [][]int64
	// Remap counts reference codes as these codes (a model's label
	// remap), codes of Codes too.
	Remap map[uint8]uint8
	// Classes, when set (Grid-sized), receives the predicted codes, so that
	// a quicklook needs no second read of the class COG.
	Classes []uint8
	// Sink, when set, receives every window's features or DNs.
	Sink WindowSink
}

// BandReader reads windows of a stack's bands (package raster's Source
// through ReadBandWindowInto, in lulc).
type BandReader interface {
	// ReadBand reads band b (from 0) over the w×h window at (x, y) into
	// dn.
	ReadBand(b, x, y, w, h int, dn []uint16) error
	Close()
}

// BandWriter takes the class and confidence windows (package raster's
// Writer, in lulc): band from 0, the window at (x, y), buf its w×h
// pixels.
type BandWriter interface {
	Write(band, x, y, w, h int, buf any) error
}

// Timings splits the pipeline's time by stage, summed over goroutines.
type Timings struct {
	Read, Features, Predict, Write time.Duration
	// Wait is the readers' time waiting for the rows of a tile still
	// being filled, left out of Read.
	Wait    time.Duration
	Windows int
	Pixels  int64
	// Mirrored says that the windows were read from the predictor's
	// device (MirrorPredictor), not by the readers: a log's, not a
	// report's (lulc predict never reads a device's copy).
	Mirrored bool `json:"-"`
}

type window struct {
	g      geo.Grid
	x, y   int
	planes [][]float32 // reflectance, for a Predictor
	dn     [][]uint16  // digital numbers, for a DNPredictor, over rect
	rect   features.Rect
	// mirrored: the predictor reads the window's block, at (ox, oy), from
	// its device's copy of the tile (MirrorPredictor), and gives valid.
	mirrored bool
	ox, oy   int
	valid    []bool
	cls      []uint8
	conf     []uint8
}

// buffers recycles a tile's per-window slices between windows.
type buffers struct {
	dn    bufpool.Pool[uint16]
	valid bufpool.Pool[bool]
	bytes bufpool.Pool[uint8]
	f32   bufpool.Pool[float32]
}

// Run streams the tile through read → features → predict → write.
func Run(ctx context.Context, t Tile, set *features.Set, pred Predictor, bar progress.Bar) (Timings, error) {
	var tm Timings
	workers := t.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wins []window
	for y := 0; y < t.Grid.Height; y += t.Window {
		for x := 0; x < t.Grid.Width; x += t.Window {
			w, h := min(t.Window, t.Grid.Width-x), min(t.Window, t.Grid.Height-y)
			g := geo.Grid{EPSG: t.Grid.EPSG, Width: w, Height: h, Transform: t.Grid.Transform}
			g.Transform[0] += float64(x) * t.Grid.Transform[1]
			g.Transform[3] += float64(y) * t.Grid.Transform[5]
			wins = append(wins, window{g: g, x: x, y: y})
		}
	}
	tm.Windows = len(wins)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(err error) { cancel(err) }
	var readNs, waitNs, featNs, predNs, writeNs atomic.Int64

	// Stage 1: readers, each with its own GDAL handle (GDAL decodes on the
	// calling thread, so decoding scales with readers).
	readers := t.Readers
	if readers <= 0 {
		readers = max(1, min(4, workers/2))
	}
	read := make(chan window, 2*readers)
	var rg sync.WaitGroup
	var bufs buffers
	_, dnMode := pred.(DNPredictor)
	mp, mirrored := pred.(MirrorPredictor)
	mirrored = mirrored && t.Memory != nil && set.Radius() > 0 && mp.Mirrored(t.Sink)
	tm.Mirrored = mirrored
	if t.Memory != nil && !mirrored && !t.Memory.HasPlanes() {
		return tm, errors.New("predict: the tile's planes are on a device whose predictor does not read them")
	}
	q := &readQueue{wins: wins, out: read, ns: &readNs, waitNs: &waitNs, bufs: &bufs, fail: fail, mirrored: mirrored}
	for range readers {
		rg.Go(func() { readWindows(ctx, t, set, dnMode, q) })
	}
	go func() { rg.Wait(); close(read) }()

	// Stage 2: features and prediction on every core.
	done := make(chan window, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var comp features.Computer = features.CPU{Set: set}
			if t.Features != nil {
				comp = t.Features
			}
			for w := range read {
				featSec, predSec, err := t.classify(ctx, &w, comp, pred, len(set.Features), &bufs)
				if err != nil {
					fail(err)
					return
				}
				featNs.Add(int64(featSec))
				predNs.Add(int64(predSec))
				select {
				case done <- w:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	// Stage 3: the writer (GDAL datasets are not shared across threads).
	start := time.Now()
	index := t.codeIndex()
	refIndex := t.referenceIndex(index)
	for w := range done {
		t0 := time.Now()
		t.keep(w, index, refIndex)
		if err := t.Class.Write(0, w.x, w.y, w.g.Width, w.g.Height, w.cls); err != nil {
			fail(err)
			break
		}
		if t.Confidence != nil {
			if err := t.Confidence.Write(0, w.x, w.y, w.g.Width, w.g.Height, w.conf); err != nil {
				fail(err)
				break
			}
		}
		writeNs.Add(int64(time.Since(t0)))
		tm.Pixels += int64(len(w.cls))
		// The writers copied the window: its slices serve the next ones.
		bufs.bytes.Put(w.cls)
		bufs.bytes.Put(w.conf)
		bufs.valid.Put(w.valid)
		bar.Add(1)
		bar.Describe(fmt.Sprintf("predict: %.1f Mpx/s, windows", float64(tm.Pixels)/1e6/time.Since(start).Seconds()))
	}
	for range done { // drain after a failure so workers exit
	}
	tm.Read, tm.Features, tm.Predict, tm.Write = time.Duration(readNs.Load()), time.Duration(featNs.Load()), time.Duration(predNs.Load()), time.Duration(writeNs.Load())
	tm.Wait = time.Duration(waitNs.Load())
	if err := context.Cause(ctx); err != nil {
		return tm, err
	}
	return tm, nil
}

// classify computes a window's features and predictions and turns them
// into class codes and confidence percentages (0 where the window has no
// valid pixel). It returns the time each step took.
func (t Tile) classify(ctx context.Context, w *window, comp features.Computer, pred Predictor, nf int, bufs *buffers) (time.Duration, time.Duration, error) {
	n := len(w.valid)
	t0 := time.Now()
	cls := bufs.bytes.Get(n)
	conf := bufs.f32.Get(n)
	defer bufs.bytes.Put(cls)
	defer bufs.f32.Put(conf)
	t1 := t0
	if w.mirrored {
		// Read, reflectance, features and prediction on the device: the
		// time is prediction's.
		dn := features.DN{Rect: w.rect, Scale: float32(t.Scale), Offset: float32(t.Offset)}
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if err := pred.(MirrorPredictor).PredictMirrored(t.Sink, w.x, w.y, w.g.Width, w.g.Height, w.ox, w.oy, dn, w.valid, cls, conf); err != nil {
			return 0, 0, err
		}
	} else if dp, ok := pred.(DNPredictor); ok && w.dn != nil {
		// Reflectance, features and prediction in one pass: the time is
		// prediction's.
		// The stack's nodata DN is 0.
		dn := features.DN{Planes: w.dn, Rect: w.rect, Scale: float32(t.Scale), Offset: float32(t.Offset)}
		sp, shared := dp.(SinkDNPredictor)
		shared = shared && t.Sink != nil
		if t.Sink != nil && !shared {
			if err := t.Sink.DN(w.x, w.y, w.g.Width, w.g.Height, dn); err != nil {
				return 0, 0, err
			}
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		var err error
		if shared {
			err = sp.PredictDNSink(t.Sink, w.x, w.y, w.g.Width, w.g.Height, dn, cls, conf)
		} else {
			err = dp.PredictDN(dn, cls, conf)
		}
		if err != nil {
			return 0, 0, err
		}
		for _, p := range w.dn {
			bufs.dn.Put(p)
		}
		w.dn = nil
	} else {
		feats := make([][]float32, nf)
		for f := range feats {
			feats[f] = make([]float32, n)
		}
		if err := comp.Compute(feats, w.planes); err != nil {
			return 0, 0, err
		}
		if t.Sink != nil {
			if err := t.Sink.Features(w.x, w.y, w.g.Width, w.g.Height, feats); err != nil {
				return 0, 0, err
			}
		}
		t1 = time.Now()
		if err := pred.Predict(ctx, feats, w.valid, cls, conf); err != nil {
			return 0, 0, err
		}
	}
	w.cls, w.conf = bufs.bytes.Get(n), bufs.bytes.Get(n)
	clear(w.cls)
	clear(w.conf)
	for i := range n {
		if w.valid[i] {
			w.cls[i] = t.Codes[cls[i]]
			w.conf[i] = uint8(math.Round(float64(conf[i]) * 100))
			if w.conf[i] == 0 {
				w.conf[i] = 1 // 0 is nodata; a winning class has ≥ 1/classes
			}
		}
	}
	w.planes = nil
	return t1.Sub(t0), time.Since(t1), nil
}

// codeIndex maps class codes to indices into Codes (-1: not a class).
func (t Tile) codeIndex() [256]int {
	var index [256]int
	for i := range index {
		index[i] = -1
	}
	for i, c := range t.Codes {
		index[c] = i
	}
	return index
}

// referenceIndex is index for reference codes: with the remap's codes
// counted as the classes they map onto, the classes' own codes too (as
// training drew them).
func (t Tile) referenceIndex(index [256]int) [256]int {
	ref := index
	for from, to := range t.Remap {
		ref[from] = index[to]
	}
	return ref
}

// keep copies a predicted window into Classes and counts it into
// Confusion, where the tile asks for them: predictions by index, the
// reference by refIndex (index with the remap).
func (t Tile) keep(w window, index, refIndex [256]int) {
	stride := t.Grid.Width
	for r := range w.g.Height {
		row := w.cls[r*w.g.Width:][:w.g.Width]
		if t.Classes != nil {
			copy(t.Classes[(w.y+r)*stride+w.x:], row)
		}
		if t.Reference == nil {
			continue
		}
		ref := t.Reference[(w.y+r)*stride+w.x:][:w.g.Width]
		for i, p := range row {
			ri, pi := refIndex[ref[i]], index[p]
			if ri >= 0 && pi >= 0 && ref[i] != 0 && p != 0 {
				t.Confusion[ri][pi]++
			}
		}
	}
}

// readQueue is what a tile's readers share: the windows, the index of the
// next one unread, where read windows go, the time spent reading, the
// recycled slices, and how a reader fails the run.
type readQueue struct {
	wins   []window
	next   atomic.Int64
	out    chan<- window
	ns     *atomic.Int64
	waitNs *atomic.Int64 // waiting for a filling tile's rows, out of ns
	bufs   *buffers
	fail   func(error)
	// mirrored: the predictor reads the windows' DNs itself
	// (MirrorPredictor); the readers only wait for their rows.
	mirrored bool
}

// readWindows reads windows, taking the next unread one from q, until
// none is left or ctx ends; each reader has its own GDAL handle, or copies
// from the stack in memory.
// With dnMode the windows keep their digital numbers (for a DNPredictor)
// instead of reflectance.
func readWindows(ctx context.Context, t Tile, set *features.Set, dnMode bool, q *readQueue) {
	wins, bufs, next, read, readNs, fail := q.wins, q.bufs, &q.next, q.out, q.ns, q.fail
	readBand := func(b, x, y, w, h int, dn []uint16) error {
		// A tile still being composited is read as its rows become
		// whole (at once for a whole one). The wait is not reading.
		w0 := time.Now()
		err := t.Memory.Await(ctx, y+h)
		waited := int64(time.Since(w0))
		q.waitNs.Add(waited)
		readNs.Add(-waited)
		if err != nil {
			return err
		}
		t.Memory.ReadBand(b, x, y, w, h, dn)
		return nil
	}
	if t.Memory == nil {
		if t.Open == nil {
			fail(errors.New("predict: the tile has neither a stack in memory nor a way to open one"))
			return
		}
		src, err := t.Open()
		if err != nil {
			fail(err)
			return
		}
		defer src.Close()
		readBand = src.ReadBand
	}
	bands := len(set.Bands)
	for {
		k := int(next.Add(1) - 1)
		if k >= len(wins) {
			return
		}
		w := wins[k]
		t0 := time.Now()
		n := w.g.Width * w.g.Height
		if q.mirrored {
			// The block with its halo, as readContext reads it, whose
			// rows must be whole in the tile (in every plane) before the
			// device reads them; the predictor gives the validity.
			w.ox, w.oy, w.rect = features.Halo(w.x, w.y, w.g.Width, w.g.Height, t.Grid.Width, t.Grid.Height, set.Radius())
			w.mirrored, w.valid = true, bufs.valid.Get(n)
			err := t.Memory.Await(ctx, w.oy+w.rect.Height)
			q.waitNs.Add(int64(time.Since(t0)))
			if err != nil {
				fail(err)
				return
			}
			select {
			case read <- w:
			case <-ctx.Done():
				return
			}
			continue
		}
		w.valid = bufs.valid.Get(n)
		for i := range w.valid {
			w.valid[i] = true
		}
		w.rect = features.Rect{Width: w.g.Width, Height: w.g.Height, InnerW: w.g.Width, InnerH: w.g.Height}
		if dnMode {
			w.dn = make([][]uint16, bands)
		} else {
			w.planes = make([][]float32, bands)
		}
		if r := set.Radius(); r > 0 {
			// Context features: the window with its halo, cut at the
			// tile's edges, so that its features are the whole tile's.
			if err := readContext(t, set, &w, dnMode, readBand, bufs); err != nil {
				fail(err)
				return
			}
			readNs.Add(int64(time.Since(t0)))
			select {
			case read <- w:
			case <-ctx.Done():
				return
			}
			continue
		}
		for b := range bands {
			dn := bufs.dn.Get(n)
			if err := readBand(b, w.x, w.y, w.g.Width, w.g.Height, dn); err != nil {
				fail(err)
				return
			}
			if dnMode {
				w.dn[b] = dn
			} else {
				w.planes[b] = composite.Reflectance(dn, 0, float32(t.Scale), float32(t.Offset))
			}
			for i, v := range dn {
				if v == 0 {
					w.valid[i] = false
				}
			}
			if !dnMode {
				bufs.dn.Put(dn)
			}
		}
		readNs.Add(int64(time.Since(t0)))
		select {
		case read <- w:
		case <-ctx.Done():
			return
		}
	}
}

// readContext reads window w's bands with the set's halo. With dnMode the
// window keeps the block's digital numbers and its rect (the device
// computes the rest); otherwise it gets its planes: the inner window's
// reflectance, then its context features (features.Set.ContextCompute
// over the halo). Validity is the inner window's, as without context.
func readContext(t Tile, set *features.Set, w *window, dnMode bool, readBand func(b, x, y, w, h int, dn []uint16) error, bufs *buffers) error {
	iw, ih := w.g.Width, w.g.Height
	ox, oy, rect := features.Halo(w.x, w.y, iw, ih, t.Grid.Width, t.Grid.Height, set.Radius())
	w.rect = rect
	if dnMode {
		for b := range w.dn {
			dn := bufs.dn.Get(rect.Width * rect.Height)
			if err := readBand(b, ox, oy, rect.Width, rect.Height, dn); err != nil {
				return err
			}
			for r := range ih {
				at := (rect.Y+r)*rect.Width + rect.X
				for i, v := range dn[at : at+iw] {
					if v == 0 {
						w.valid[r*iw+i] = false
					}
				}
			}
			w.dn[b] = dn
		}
		return nil
	}
	halo := make([][]float32, len(set.Bands))
	dn := bufs.dn.Get(rect.Width * rect.Height)
	defer bufs.dn.Put(dn)
	for b := range halo {
		if err := readBand(b, ox, oy, rect.Width, rect.Height, dn); err != nil {
			return err
		}
		halo[b] = composite.Reflectance(dn, 0, float32(t.Scale), float32(t.Offset))
		inner := make([]float32, iw*ih)
		for r := range ih {
			at := (rect.Y+r)*rect.Width + rect.X
			copy(inner[r*iw:(r+1)*iw], halo[b][at:at+iw])
			for i, v := range dn[at : at+iw] {
				if v == 0 {
					w.valid[r*iw+i] = false
				}
			}
		}
		w.planes[b] = inner
	}
	nctx := len(set.ContextFeatures())
	for range nctx {
		w.planes = append(w.planes, make([]float32, iw*ih))
	}
	return set.ContextCompute(w.planes[len(set.Bands):], halo, rect)
}
