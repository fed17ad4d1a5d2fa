package stage

import (
	"context"
	"errors"
	"sync"
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

// cpuEngine computes on the host's cores: GDAL decodes local bands as
// they are read, windows composite and sample from the host's copy, the
// forest grows on workers goroutines. Remote bands are taken compressed,
// read rows of windows ahead with many ranges in flight, and decoded by
// package decode in composite.Resample (the path of a device that
// decodes): a window that reads its own through GDAL waits for each
// block's round trip, one a worker at a time.
type cpuEngine struct {
	workers int
	// raw makes the CPU take local bands compressed too (hooks.RawOnCPU);
	// remoteGDAL has GDAL read remote bands window by window, as local
	// ones (Compare.RemoteGDAL).
	raw, remoteGDAL bool
}

func (cpuEngine) Name() string                                  { return "cpu" }
func (e cpuEngine) RawBands(remote bool) bool                   { return e.raw || remote && !e.remoteGDAL }
func (cpuEngine) DecodeAhead(*cuda.AheadBatch) error            { return nil } // each window decodes its own
func (cpuEngine) ReleaseAhead(*cuda.AheadBatch)                 {}
func (cpuEngine) HoldsAheadFormat(decode.Format) bool           { return false }
func (cpuEngine) AheadDeviceBudget() int64                      { return 0 }
func (cpuEngine) Mirror(geo.Grid, int) (*cuda.Mirror, error)    { return nil, nil }
func (cpuEngine) Mirrors() bool                                 { return false }
func (cpuEngine) MapMirror(geo.Grid, int) (*cuda.Mirror, error) { return nil, nil }
func (cpuEngine) Busy() time.Duration                           { return 0 }

func (cpuEngine) Composite(dates []composite.Date, s composite.Spec, out [][]uint16, count []uint8, into *cuda.MirrorWindow) (time.Duration, error) {
	if into != nil {
		return 0, errors.New("composite: a device mirror on the CPU")
	}
	t := time.Now()
	if err := composite.Resample(dates); err != nil {
		return 0, err
	}
	resample := time.Since(t)
	return resample, composite.WindowTemporal(dates, s, out, count)
}

func (cpuEngine) Features(set *features.Set) (features.Computer, func(), error) {
	return features.CPU{Set: set}, func() {}, nil
}

func (e cpuEngine) Predictor(set *features.Set, model *forest.Model) (features.Computer, inference.Predictor, func(), error) {
	return features.CPU{Set: set}, inference.NewCPU(model), func() {}, nil
}

func (cpuEngine) di(_ *features.Set, ref *aoa.Reference) (diComputer, func(), error) {
	return cpuDI{aoa.NewIndex(ref)}, func() {}, nil
}

func (cpuEngine) AOAPairs(ctx context.Context, p []float64, nf int, fold []uint64) (float64, []float64, error) {
	return aoa.CPUPairs(ctx, p, nf, fold)
}

func (cpuEngine) Classes(w *classrule.Window, buf []uint8) error {
	w.Apply(buf)
	return nil
}

func (e cpuEngine) Fit(ctx context.Context, xb *forest.Binned, y []uint8, classes int, p forest.Params, _ func(string, ...any)) (*forest.Forest, error) {
	return forest.Train(ctx, xb, y, classes, p, e.workers)
}

// classify splits the rows over the workers, at least 4096 rows each.
func (e cpuEngine) classify(ctx context.Context, model *forest.Model, planes [][]float32, n int) ([]uint8, error) {
	cls, conf, valid := make([]uint8, n), make([]float32, n), allValid(n)
	cpu := inference.NewCPU(model)
	parts := max(1, min(e.workers, n/4096))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Go(func() {
			sub := make([][]float32, len(planes))
			for f := range sub {
				sub[f] = planes[f][lo:hi]
			}
			errs[p] = cpu.Predict(ctx, sub, valid[lo:hi], cls[lo:hi], conf[lo:hi])
		})
	}
	wg.Wait()
	return cls, errors.Join(errs...)
}

// allValid is a mask of n valid rows.
func allValid(n int) []bool {
	v := make([]bool, n)
	for i := range v {
		v[i] = true
	}
	return v
}
