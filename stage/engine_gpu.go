package stage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/classifier"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/classrule"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/inference"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// gpuEngine computes on CUDA devices: the per-window twins on gpu, the
// forest's growth over every device of gpus.
type gpuEngine struct {
	gpu  *cuda.Device
	gpus []*cuda.Device
	// hostDecode keeps decoding on the host (Compare.HostDecode: for
	// comparing both ways on one machine).
	hostDecode bool
	// hostDraw keeps the draw of samples on the host (Compare.HostDraw),
	// for the same comparison.
	hostDraw bool
	// hostAOA measures the area of applicability's training points on
	// the host (Compare.HostAOA).
	hostAOA bool
	// apartAOA keeps a window's area of applicability apart from its
	// prediction (Compare.ApartAOA).
	apartAOA bool
	// hostLabels maps label rasters onto the grid on the host
	// (Compare.HostLabels).
	hostLabels bool
	// hostWindows has predictions send windows up from the host
	// (Compare.HostWindows).
	hostWindows bool
}

func (e gpuEngine) Name() string       { return fmt.Sprintf("gpu:%d", e.gpu.Index) }
func (e gpuEngine) RawBands(bool) bool { return !e.hostDecode }
func (gpuEngine) Mirrors() bool        { return true }

func (e gpuEngine) DecodeAhead(b *cuda.AheadBatch) error { return cuda.DecodeAhead(e.gpu, b) }
func (e gpuEngine) ReleaseAhead(b *cuda.AheadBatch)      { cuda.ReleaseAhead(e.gpu, b) }
func (gpuEngine) HoldsAheadFormat(f decode.Format) bool  { return cuda.HoldsAhead(f) }

// AheadDeviceBudget is three eighths of the device's memory. The windows
// in flight span about two rows (16 workers, 11 windows a row of a full
// tile), a row is kept until the next is done (its halo), and a 48-date
// row takes 7 GB: at a quarter of an H100's memory the reader kept only
// one row ahead and the windows waited for it (docs/benchmarks.md, "A
// year of dates").
func (e gpuEngine) AheadDeviceBudget() int64 {
	_, total, err := e.gpu.MemInfo()
	if err != nil {
		return 1 << 30
	}
	return int64(total / 8 * 3)
}

// Composite is cuda.CompositeMirrored: the device resamples too, so no
// host time is spent resampling.
func (e gpuEngine) Composite(dates []composite.Date, s composite.Spec, out [][]uint16, count []uint8, into *cuda.MirrorWindow) (time.Duration, error) {
	return 0, cuda.CompositeMirrored(e.gpu, dates, s, out, count, into)
}

// Mirror is nil when the draw stays on the host (hostDraw).
func (e gpuEngine) Mirror(grid geo.Grid, bands int) (*cuda.Mirror, error) {
	if e.hostDraw {
		return nil, nil
	}
	return cuda.NewMirror(e.gpu, grid.Width, grid.Height, bands)
}

// MapMirror is a planes mirror of the tile: one that a tile mapped
// before gave back, or a new one when the device can spare it
// (cuda.SparesMirror). Otherwise, or with hostWindows, it is nil: the
// windows then go up from the host's stack, the same bits more slowly.
func (e gpuEngine) MapMirror(grid geo.Grid, bands int) (*cuda.Mirror, error) {
	if e.hostWindows {
		return nil, nil
	}
	if m := cuda.SpareMirror(e.gpu, grid.Width, grid.Height, bands); m != nil {
		return m, nil
	}
	if ok, err := cuda.SparesMirror(e.gpu, cuda.MirrorBytes(grid.Width, grid.Height, bands)); !ok {
		return nil, err
	}
	return cuda.NewPlanesMirror(e.gpu, grid.Width, grid.Height, bands)
}

// ReadsMirror gives pred, a tile's predictor from a GPU engine's
// Predictor, m, the device's copy of the tile's composite, to read the
// windows from where it can (inference.MirrorPredictor's Mirrored); a
// mirror of another device is not given.
func ReadsMirror(pred inference.Predictor, m *cuda.Mirror) {
	if p, ok := pred.(*gpuDNPredictor); ok && m != nil && m.Device() == p.p.Dev {
		p.mirror = m
	}
}

func (e gpuEngine) Features(set *features.Set) (features.Computer, func(), error) {
	g, err := classifier.NewFeatures(e.gpu, set)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Close, nil
}

// Predictor keeps the features on the device: the predictor computes
// them from the bands in the same pass.
func (e gpuEngine) Predictor(set *features.Set, model *forest.Model) (features.Computer, inference.Predictor, func(), error) {
	comp, err := classifier.NewFeatures(e.gpu, set)
	if err != nil {
		return nil, nil, nil, err
	}
	gp, err := newGPUDNPredictor(e.gpu, model, comp)
	if err != nil {
		comp.Close()
		return nil, nil, nil, err
	}
	gp.apartAOA = e.apartAOA
	return comp, gp, func() { gp.Close(); comp.Close() }, nil
}

func (e gpuEngine) di(set *features.Set, ref *aoa.Reference) (diComputer, func(), error) {
	var g gpuDI
	var err error
	if g.a, err = classifier.NewAOA(e.gpu, ref); err != nil {
		return nil, nil, err
	}
	if g.fe, err = classifier.NewFeatures(e.gpu, set); err != nil {
		g.a.Close()
		return nil, nil, err
	}
	return g, g.close, nil
}

func (e gpuEngine) Classes(w *classrule.Window, buf []uint8) error {
	if e.hostLabels {
		w.Apply(buf)
		return nil
	}
	return e.gpu.Classes(w, buf)
}

func (e gpuEngine) AOAPairs(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64, error) {
	if e.hostAOA {
		return aoa.CPUPairs(ctx, p, nf, fold)
	}
	return classifier.AOAPairs(ctx, e.gpu, p, nf, fold)
}

func (e gpuEngine) Fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, logf func(string, ...any)) (*forest.Forest, error) {
	return classifier.Train(ctx, e.gpus, xb, y, classes, p, logf)
}

func (e gpuEngine) classify(ctx context.Context, model *forest.Model, planes [][]float32, n int) ([]uint8, error) {
	g, err := newGPUPredictor(e.gpu, model)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	cls := make([]uint8, n)
	return cls, g.Predict(ctx, planes, allValid(n), cls, make([]float32, n))
}

func (e gpuEngine) Busy() time.Duration {
	var b time.Duration
	for _, d := range e.gpus {
		b += d.Busy()
	}
	return b
}

// MirrorSink is a tile's device mirror as a sink of its composite: a
// window composited on the host goes up to it; the device composite
// places its own windows (windowJob.window) and skips it.
type MirrorSink struct{ Mirror *cuda.Mirror }

// Write implements tileSink.
func (s MirrorSink) Write(x, y, w, h int, stack [][]uint16, _, labels []uint8) error {
	return s.Mirror.Write(x, y, w, h, stack, labels)
}

// WriteLayers places a tile's layer planes, whole, from plane first on.
func (s MirrorSink) WriteLayers(first int, planes [][]uint16) error {
	return s.Mirror.WritePlanes(first, planes)
}

// DevicePasses run a draw's passes on the device over a tile's mirror.
type DevicePasses struct{ Mirror *cuda.Mirror }

// Count implements sampling.Passes.
func (p DevicePasses) Count(r *sampling.DeviceRule, nres int, hist []uint32, off *[256]int64, buffered *int64) error {
	return p.Mirror.DrawCount(r, nres, hist, off, buffered)
}

// Collect implements sampling.Passes.
func (p DevicePasses) Collect(r *sampling.DeviceRule, bound []uint64, count []int) (sampling.Collected, error) {
	return p.Mirror.DrawCollect(r, bound, count)
}

// Context implements sampling.ContextPasses: the candidates' context
// features from the mirror.
func (p DevicePasses) Context(set *features.Set, refl *[65536]float32, xs, ys []int, dst []float32) error {
	return p.Mirror.Context(set, refl, xs, ys, dst)
}

// gpuPredictor is an inference.Predictor that bins features and walks
// the forest on the GPU (classifier.Predictor: the same codes, classes and confidences as the CPU), the
// codes staying on the device.
type gpuPredictor struct {
	p *classifier.Predictor
}

// newGPUPredictor uploads the model's forest and bin edges once.
func newGPUPredictor(dev *cuda.Device, m *forest.Model) (*gpuPredictor, error) {
	p, err := classifier.NewPredictor(dev, m)
	if err != nil {
		return nil, err
	}
	return &gpuPredictor{p: p}, nil
}

// gpuDNPredictor is an inference.DNPredictor computing reflectance and
// features on the device too (classifier.Predictor.PredictDN): a window's
// digital numbers go up and only its classes and confidences come back.
type gpuDNPredictor struct {
	gpuPredictor
	fe *classifier.Features
	// apartAOA leaves the sink's DN to the sink (Compare.ApartAOA).
	apartAOA bool
	// mirror, when set, is the device's copy of the tile (ReadsMirror).
	mirror *cuda.Mirror
}

// newGPUDNPredictor uploads the model once; fe computes the model's
// features.
func newGPUDNPredictor(dev *cuda.Device, m *forest.Model, fe *classifier.Features) (*gpuDNPredictor, error) {
	g, err := newGPUPredictor(dev, m)
	if err != nil {
		return nil, err
	}
	return &gpuDNPredictor{gpuPredictor: *g, fe: fe}, nil
}

// PredictDN implements inference.DNPredictor: with context features, their
// statistics are computed on the device from the block's halo too.
func (p *gpuDNPredictor) PredictDN(dn features.DN, cls []uint8, conf []float32) error {
	if p.fe.Set.Radius() > 0 {
		return p.p.PredictDNContext(p.fe, dn, cls, conf)
	}
	if r := dn.Rect; r.InnerW != r.Width || r.InnerH != r.Height {
		return fmt.Errorf("gpu predict: a halo around a window without context features")
	}
	return p.p.PredictDN(p.fe, dn, cls, conf)
}

// PredictDNSink implements inference.SinkDNPredictor: for an area of
// applicability measured on the same device from the same feature set,
// with context features, the window's DNs go up once and its features are computed once for both
// (classifier.Predictor.PredictDNContextDI: the same bits as the sink's DN
// and PredictDN); any other sink gets its DN call first.
func (p *gpuDNPredictor) PredictDNSink(sink inference.WindowSink, x, y, w, h int, dn features.DN, cls []uint8, conf []float32) error {
	if s, g, ok := p.sharedAOA(sink); ok {
		return measureCells(s.Map, x, y, w, h, func(px []int32, di []float32) error {
			return p.p.PredictDNContextDI(p.fe, dn, cls, conf, g.a, px, di)
		})
	}
	if err := sink.DN(x, y, w, h, dn); err != nil {
		return err
	}
	return p.PredictDN(dn, cls, conf)
}

// sharedAOA is sink as an area of applicability measured on the
// predictor's device from its feature set, with context features: the
// predictor's features are then the sink's too.
func (p *gpuDNPredictor) sharedAOA(sink inference.WindowSink) (*AOASink, gpuDI, bool) {
	s, ok := sink.(*AOASink)
	if !ok || p.fe.Set.Radius() == 0 || p.apartAOA {
		return nil, gpuDI{}, false
	}
	g, ok := s.di.(gpuDI)
	return s, g, ok && g.a.Dev == p.p.Dev && g.fe.Set == p.fe.Set
}

// Mirrored implements inference.MirrorPredictor: with the tile's mirror,
// windows are predicted from it when nothing but the predictor's own
// area of applicability needs their DNs.
func (p *gpuDNPredictor) Mirrored(sink inference.WindowSink) bool {
	if p.mirror == nil || p.fe.Set.Radius() == 0 {
		return false
	}
	if sink == nil {
		return true
	}
	_, _, ok := p.sharedAOA(sink)
	return ok
}

// PredictMirrored implements inference.MirrorPredictor
// (classifier.Predictor.PredictMirrorContextDI).
func (p *gpuDNPredictor) PredictMirrored(sink inference.WindowSink, x, y, w, h, ox, oy int, dn features.DN, valid []bool, cls []uint8, conf []float32) error {
	mb := classifier.MirrorBlock{Mirror: p.mirror, X: ox, Y: oy, Valid: valid}
	if sink == nil {
		return p.p.PredictMirrorContextDI(p.fe, mb, dn, cls, conf, nil, nil, nil)
	}
	s, g, ok := p.sharedAOA(sink)
	if !ok {
		return errors.New("gpu predict: a window from the device's copy of its tile with a sink that needs its DNs")
	}
	return measureCells(s.Map, x, y, w, h, func(px []int32, di []float32) error {
		return p.p.PredictMirrorContextDI(p.fe, mb, dn, cls, conf, g.a, px, di)
	})
}

// Close frees the forest on the device.
func (p *gpuPredictor) Close() { p.p.Close() }

// Predict implements inference.Predictor. A window's walk on the device takes
// milliseconds: ctx is looked at only before it.
func (p *gpuPredictor) Predict(ctx context.Context, feats [][]float32, valid []bool, cls []uint8, conf []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.p.Predict(feats, cls, conf)
}
