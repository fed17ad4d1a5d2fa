package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lulc/lulc/aoa"
	"github.com/lulc/lulc/composite"
	"github.com/lulc/lulc/cuda"
	"github.com/lulc/lulc/decode"
	"github.com/lulc/lulc/features"
	"github.com/lulc/lulc/forest"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/inference"
	"github.com/lulc/lulc/sampling"
)

// engine is the one place where a stage's twin is chosen: the GPU's when
// the run has a device, else the CPU's. Every twin computes the same bits
// (the cuda package's tests compare them), so the stages above never ask
// which engine runs them.
type engine struct {
	gpu     *cuda.Device   // the device of per-window twins; nil: the CPU
	gpus    []*cuda.Device // every device, for training
	workers int
	// hostDecode keeps decoding on the host with a device
	// (Compare.HostDecode: for comparing both ways on one machine).
	hostDecode bool
	// hostDraw keeps the draw of samples on the host with a device
	// (Compare.HostDraw), for the same comparison.
	hostDraw bool
	hooks    hooks
}

// hooks let this package's tests take paths that runs take only on other
// machines or when something fails, through Options rather than package
// variables, so that tests may run in parallel.
type hooks struct {
	// rawOnCPU makes the CPU engine take bands compressed too, decoded by
	// package decode in composite.Resample: the path of a device that
	// decodes (reading ahead included), without one.
	rawOnCPU bool
	// aheadBudget replaces the read-ahead's budget when positive.
	aheadBudget int64
	// aheadFail makes reading row aheadFail − 1 ahead fail (0: none).
	aheadFail int
	// cpuLanes is how many tiles the CPU computes at once (0: one).
	cpuLanes int
}

// engine returns the options' engine.
func (o Options) engine() engine {
	return engine{gpu: o.GPU(), gpus: o.GPUs, workers: o.Workers, hostDecode: o.Compare.HostDecode, hostDraw: o.Compare.HostDraw, hooks: o.hooks}
}

// rawBands says whether bands go to the composite still compressed (the
// engine decodes them itself): on the device. The CPU's bands are decoded
// by GDAL as they are read.
func (e engine) rawBands() bool { return (e.gpu != nil || e.hooks.rawOnCPU) && !e.hostDecode }

// decodes says whether the engine decodes tiles of format f itself, and
// why not.
func (e engine) decodes(f decode.Format) (bool, string) {
	switch {
	case !e.rawBands():
		return false, "decoded on the host"
	case !cuda.Decodable(f):
		return false, fmt.Sprintf("%s tiles with predictor %d are not decoded on the device", f.Compression, f.Predictor)
	}
	return true, ""
}

// decodeAhead has the device decode a batch of tiles and keep them for
// the windows (nothing to do on the CPU, which decodes per window).
func (e engine) decodeAhead(b *cuda.AheadBatch) error {
	if e.gpu == nil {
		return nil
	}
	return cuda.DecodeAhead(e.gpu, b)
}

// aoaSink prepares the DI map of a tile on the engine's computer; done
// frees what it holds.
func (e engine) aoaSink(set *features.Set, ref *aoa.Reference, grid aoa.Grid) (sink *aoaSink, done func(), err error) {
	if sink, err = newAOASink(set, ref, grid); err != nil {
		return nil, nil, err
	}
	if e.gpu == nil {
		sink.di = cpuDI{aoa.NewIndex(ref)}
		return sink, func() {}, nil
	}
	var g gpuDI
	if g.a, err = cuda.NewAOA(e.gpu, ref); err != nil {
		return nil, nil, err
	}
	if g.fe, err = cuda.NewFeatures(e.gpu, set); err != nil {
		g.a.Close()
		return nil, nil, err
	}
	sink.di = g
	return sink, g.close, nil
}

// mirrors says whether the windows' composite may go straight into a
// tile's mirror in device memory (the device composites them).
func (e engine) mirrors() bool { return e.gpu != nil }

// holdsAheadFormat says whether decodeAhead leaves tiles of format f on
// the device, so that rectangles pass cuda.Held for them (the CPU decodes
// the host's bytes).
func (e engine) holdsAheadFormat(f decode.Format) bool { return e.gpu != nil && cuda.HoldsAhead(f) }

// releaseAhead frees what the device holds of a batch decoded ahead.
func (e engine) releaseAhead(b *cuda.AheadBatch) {
	if e.gpu != nil {
		cuda.ReleaseAhead(e.gpu, b)
	}
}

// aheadDeviceBudget bounds the compressed tiles the device holds for
// the windows of rows read ahead: three eighths of its memory (0 on the
// CPU, which holds none). The windows in flight span about two rows (16
// workers, 11 windows a row of a full tile), a row is kept until the next
// is done (its halo), and a 48-date row takes 7 GB: at a quarter of an
// H100's memory the reader kept only one row ahead and the windows waited
// for it (docs/benchmarks.md, "A year of dates").
func (e engine) aheadDeviceBudget() int64 {
	if e.gpu == nil {
		return 0
	}
	_, total, err := e.gpu.MemInfo()
	if err != nil {
		return 1 << 30
	}
	return int64(total / 8 * 3)
}

// composite resamples a window's coarse bands, masks and composites it
// with tp's temporal planes after the bands' (composite.Resample and
// composite.WindowTemporal, or cuda.CompositeMirrored), and says
// how long the CPU spent resampling (on the GPU that is part of the
// device's composite). On the GPU, into (when not nil) is where the
// window goes in its tile's mirror, width its width.
func (e engine) composite(dates []composite.Date, drop []uint8, tp *composite.Temporal, out [][]uint16, count []uint8, into *cuda.MirrorWindow, width int) (time.Duration, error) {
	if e.gpu != nil {
		return 0, cuda.CompositeMirrored(e.gpu, dates, drop, tp, StackScale, StackOffset, out, count, into, width)
	}
	if into != nil {
		return 0, errors.New("composite: a device mirror on the CPU")
	}
	t := time.Now()
	if err := composite.Resample(dates); err != nil {
		return 0, err
	}
	resample := time.Since(t)
	return resample, composite.WindowTemporal(dates, drop, tp, StackScale, StackOffset, out, count)
}

// mirror keeps a tile's composite in device memory too, for the draw of
// its samples on the device; nil on the CPU, which draws from the host's
// copy.
func (e engine) mirror(grid geo.Grid, bands int) (*cuda.Mirror, error) {
	if e.gpu == nil || e.hostDraw {
		return nil, nil
	}
	return cuda.NewMirror(e.gpu, grid.Width, grid.Height, bands)
}

// mirrorSink is a tile's device mirror as a sink of its composite: a
// window composited on the host goes up to it; the device composite
// places its own windows (windowJob.window) and skips it.
type mirrorSink struct{ m *cuda.Mirror }

// Write implements tileSink.
func (s mirrorSink) Write(x, y, w, h int, stack [][]uint16, _, labels []uint8) error {
	return s.m.Write(x, y, w, h, stack, labels)
}

// devicePasses run a draw's passes on the device over a tile's mirror.
type devicePasses struct{ m *cuda.Mirror }

// Count implements sampling.Passes.
func (p devicePasses) Count(r *sampling.DeviceRule, nres int, hist []uint32, off *[256]int64, buffered *int64) error {
	return p.m.DrawCount(r, nres, hist, off, buffered)
}

// Collect implements sampling.Passes.
func (p devicePasses) Collect(r *sampling.DeviceRule, bound []uint64, count []int) (sampling.Collected, error) {
	return p.m.DrawCollect(r, bound, count)
}

// Context implements sampling.ContextPasses: the candidates' context
// features from the mirror.
func (p devicePasses) Context(set *features.Set, refl *[65536]float32, xs, ys []int, dst []float32) error {
	return p.m.Context(set, refl, xs, ys, dst)
}

// features returns the features computer.
func (e engine) features(set *features.Set) (features.Computer, func(), error) {
	if e.gpu == nil {
		return features.CPU{Set: set}, func() {}, nil
	}
	g, err := cuda.NewFeatures(e.gpu, set)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Close, nil
}

// predictor returns the features computer and predictor for streaming a
// model over windows. On the GPU the features stay on the device: the
// predictor computes them from the bands in the same pass.
func (e engine) predictor(set *features.Set, model *forest.Model) (features.Computer, inference.Predictor, func(), error) {
	comp, closeComp, err := e.features(set)
	if err != nil || e.gpu == nil {
		return comp, inference.NewCPU(model), closeComp, err
	}
	gp, err := inference.NewGPUDN(e.gpu, model, comp.(*cuda.Features))
	if err != nil {
		closeComp()
		return nil, nil, nil, err
	}
	return comp, gp, func() { gp.Close(); closeComp() }, nil
}

// fit grows the forest on binned samples; an interrupt (ctx done) stops
// it within a tree level.
func (e engine) fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, logf func(string, ...any)) (*forest.Forest, error) {
	if e.gpu != nil {
		return cuda.Train(ctx, e.gpus, xb, y, classes, p, logf)
	}
	return forest.Train(ctx, xb, y, classes, p, e.workers)
}

// classify predicts the class index of every row of x (nf features a row):
// on the device, or on every worker. Both bin with the model's edges and
// give the classes the forest's own Classify gives.
func (e engine) classify(ctx context.Context, model *forest.Model, x []float32, nf int) ([]uint8, error) {
	n := len(x) / nf
	planes := features.Columns(x, nf)
	cls, conf, valid := make([]uint8, n), make([]float32, n), make([]bool, n)
	for i := range valid {
		valid[i] = true
	}
	if e.gpu != nil {
		g, err := inference.NewGPU(e.gpu, model)
		if err != nil {
			return nil, err
		}
		defer g.Close()
		return cls, g.Predict(ctx, planes, valid, cls, conf)
	}
	cpu := inference.NewCPU(model)
	parts := max(1, min(e.workers, n/4096))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Go(func() {
			sub := make([][]float32, nf)
			for f := range sub {
				sub[f] = planes[f][lo:hi]
			}
			errs[p] = cpu.Predict(ctx, sub, valid[lo:hi], cls[lo:hi], conf[lo:hi])
		})
	}
	wg.Wait()
	return cls, errors.Join(errs...)
}

// Fit grows a forest on binned samples on the options' engine (over
// every GPU of GPUs, else on Workers cores), as lulc train does.
func (o Options) Fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, logf func(string, ...any)) (*forest.Forest, error) {
	return o.engine().fit(ctx, xb, y, classes, p, logf)
}

// Classify predicts the class index of every row of x (nf features a
// row) on the options' engine (the first GPU, else Workers cores), as
// lulc train's validation does.
func (o Options) Classify(ctx context.Context, model *forest.Model, x []float32, nf int) ([]uint8, error) {
	return o.engine().classify(ctx, model, x, nf)
}

// busy is the devices' busy time so far, summed (0 on the CPU):
// differences of it say how much of a stage kept the devices busy.
func (e engine) busy() time.Duration {
	var b time.Duration
	for _, d := range e.gpus {
		b += d.Busy()
	}
	return b
}
