package stage

import (
	"context"
	"fmt"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/classrule"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/inference"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// Engine computes the stages' pixel work: cpuEngine on the host's cores,
// gpuEngine on CUDA devices. Options.engine is the one place that chooses
// it, from the devices cmd opened for --device; stages call its methods
// and never ask which one runs them. Every method computes the same bits
// on both (the cuda package's tests compare the twins).
type Engine interface {
	// Name names the engine in reports: "cpu" or "gpu:N".
	Name() string

	// RawBands says whether bands go to the composite still compressed
	// (the engine decodes them itself); remote says the tile's bands are
	// read over a network.
	RawBands(remote bool) bool
	// DecodeAhead decodes a batch of tiles read ahead and keeps them for
	// the windows; releaseAhead frees them once no window needs them.
	DecodeAhead(b *cuda.AheadBatch) error
	ReleaseAhead(b *cuda.AheadBatch)
	// HoldsAheadFormat says whether decodeAhead keeps tiles of format f,
	// so that rectangles pass cuda.Held for them.
	HoldsAheadFormat(f decode.Format) bool
	// AheadDeviceBudget bounds the compressed tiles kept by decodeAhead.
	AheadDeviceBudget() int64

	// Composite resamples a window's coarse bands, masks and composites
	// them as s says (temporal planes after the bands'), and says how
	// long the host spent resampling. into (when not nil) is where the
	// window goes in its tile's mirror.
	Composite(dates []composite.Date, s composite.Spec, out [][]uint16, count []uint8, into *cuda.MirrorWindow) (time.Duration, error)
	// Classes maps a label raster's window onto its grid by lulc's class
	// rule (classrule.Window.Apply is the specification).
	Classes(w *classrule.Window, buf []uint8) error
	// Mirror keeps a tile's composite where the engine draws its samples
	// from (nil: the host's copy); mirrors says whether the composite
	// writes its windows there itself.
	Mirror(grid geo.Grid, bands int) (*cuda.Mirror, error)
	Mirrors() bool
	// MapMirror keeps a tile's composite where the engine's predictor
	// reads its windows from (ReadsMirror), planes only: nil, with no
	// error, where the windows go up from the host (the CPU, the
	// comparison's switch, or a device without the memory to spare).
	MapMirror(grid geo.Grid, bands int) (*cuda.Mirror, error)

	// Features returns the features computer and its close.
	Features(set *features.Set) (features.Computer, func(), error)
	// Predictor returns the features computer and predictor for
	// streaming a model over windows, and their close.
	Predictor(set *features.Set, model *forest.Model) (features.Computer, inference.Predictor, func(), error)
	// di returns the computer of a tile's dissimilarity index and its
	// close.
	di(set *features.Set, ref *aoa.Reference) (diComputer, func(), error)
	// AOAPairs measures a model's area-of-applicability training points
	// among themselves (aoa.Pairs; aoa.CPUPairs is the specification).
	AOAPairs(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64, error)
	// Fit grows the forest on binned samples; an interrupt (ctx done)
	// stops it within a tree level.
	Fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, logf func(string, ...any)) (*forest.Forest, error)
	// classify gives the class index of each of the n rows of planes, as
	// the forest's own Classify does.
	classify(ctx context.Context, model *forest.Model, planes [][]float32, n int) ([]uint8, error)

	// Busy is the devices' busy time so far, summed (0 on the CPU):
	// differences of it say how much of a stage kept the devices busy.
	Busy() time.Duration
}

// Engine returns the options' engine: the devices' when cmd opened any,
// else the CPU's.
func (o Options) Engine() Engine {
	if len(o.GPUs) == 0 {
		return cpuEngine{workers: o.Workers, raw: o.Hooks.RawOnCPU, remoteGDAL: o.Compare.RemoteGDAL}
	}
	return gpuEngine{gpu: o.GPUs[0], gpus: o.GPUs, hostDecode: o.Compare.HostDecode, hostDraw: o.Compare.HostDraw, hostAOA: o.Compare.HostAOA, apartAOA: o.Compare.ApartAOA, hostLabels: o.Compare.HostLabels, hostWindows: o.Compare.HostWindows}
}

// Decodes says whether an engine that takes bands compressed (raw, its
// RawBands) decodes tiles of format f itself, and why not.
func Decodes(raw bool, f decode.Format) (bool, string) {
	switch {
	case !raw:
		return false, "decoded on the host"
	case !cuda.Decodable(f):
		return false, fmt.Sprintf("%s tiles with predictor %d are not decoded by lulc (GDAL decodes them)", f.Compression, f.Predictor)
	}
	return true, ""
}

// Classify predicts the class index of every row of x (nf features a
// row) on e: both engines bin with the model's edges and give the
// classes the forest's own Classify gives.
func Classify(ctx context.Context, e Engine, model *forest.Model, x []float32, nf int) ([]uint8, error) {
	return e.classify(ctx, model, features.Columns(x, nf), len(x)/nf)
}

// Fit grows a forest on binned samples on the options' engine (over
// every GPU of GPUs, else on Workers cores), as lulc train does.
func (o Options) Fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, logf func(string, ...any)) (*forest.Forest, error) {
	return o.Engine().Fit(ctx, xb, y, classes, p, logf)
}

// Classify predicts the class index of every row of x (nf features a
// row) on the options' engine (the first GPU, else Workers cores), as
// lulc train's validation does.
func (o Options) Classify(ctx context.Context, model *forest.Model, x []float32, nf int) ([]uint8, error) {
	return Classify(ctx, o.Engine(), model, x, nf)
}
