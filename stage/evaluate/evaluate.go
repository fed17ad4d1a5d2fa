package evaluate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/npy"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/stage"
)

// Result is the comparison of a class map with reference labels.
type Result struct {
	Dir     string
	Metrics forest.Metrics
	Names   []string
	Pixels  int // compared pixels (both sides labelled with a known class)
	// Area is the accuracy and class areas estimated from a sample of the
	// compared pixels stratified by map class (EvaluateConfig), with 95 %
	// intervals; nil when a mapped class has fewer than two labelled
	// pixels to sample (AreaSkipped says why).
	Area        *forest.AreaEstimate
	AreaSkipped string
}

// Config says how a map is compared with labels: how the labels
// are resampled onto the map's grid (mode or nearest), and the stratified
// sample the area-adjusted estimates come from: per map class, the
// SamplePerClass labelled pixels with the smallest hashes seeded by Seed
// (every labelled pixel when SamplePerClass is 0).
type Config struct {
	Resampling     string
	SamplePerClass int
	Seed           uint64
	// Counts prints pixel counts in the confusion chart's cells instead
	// of the rows' shares.
	Counts bool
	// Split, when set, is a split plane on the map's grid (a uint8 .npy
	// of lulc export chips: tiles/<tile>_split.npy): only its validation
	// pixels are compared, the forest's held-out pixels.
	Split string
}

// DefaultConfig is lulc evaluate's: mode resampling, 1,000 sample
// pixels per map class.
func DefaultConfig() Config {
	return Config{Resampling: "mode", SamplePerClass: 1000, Seed: 1}
}

// Evaluate compares a class map with a label raster, warping the labels
// onto the class map's grid with ec.Resampling (mode or nearest) when
// the grids differ. Classes are the class map's categories (from its GDAL category
// names), else WorldCover's. Pixels where either side is 0 or a code
// outside the classes are left out. It writes metrics.json and, with
// opt.Charts, confusion.png into opt.Out.
func Evaluate(ctx context.Context, prediction, labels string, ec Config, opt stage.Options) (Result, error) {
	opt.Fill()
	alg := ec.Resampling
	if err := atomicfs.CheckInputs(opt.Out, append([]string{prediction, labels, ec.Split}, opt.Inputs...)...); err != nil {
		return Result{}, err
	}
	pred, err := raster.Open(prediction)
	if err != nil {
		return Result{}, err
	}
	defer pred.Close()
	lab, err := raster.Open(labels)
	if err != nil {
		return Result{}, err
	}
	defer lab.Close()
	// Progress by step: the map and the labels are read whole.
	bar := opt.NewBar(4, "evaluate: map read, labels read, pixels counted, area estimated")
	defer bar.Finish()
	n := pred.Width * pred.Height
	p := make([]uint8, n)
	if err := raster.ReadBandWindowInto(pred, 1, 0, 0, pred.Width, pred.Height, p); err != nil {
		return Result{}, err
	}
	bar.Add(1)
	l := make([]uint8, n)
	if err := lab.Read(pred.Grid, alg, l); err != nil {
		return Result{}, err
	}
	bar.Add(1)
	if ec.Split != "" {
		if err := keepValidation(l, ec.Split, pred.Width, pred.Height); err != nil {
			return Result{}, err
		}
	}
	scheme := landcover.WorldCover
	if names, err := raster.Categories(prediction); err == nil && len(names) > 0 {
		scheme = landcover.Scheme{Name: "prediction"}
		for code, name := range names {
			if code > 0 && name != "" {
				c, _ := landcover.WorldCover.Class(uint8(code))
				scheme.Classes = append(scheme.Classes, landcover.Class{Code: uint8(code), Name: name, Color: c.Color})
			}
		}
	}
	index := map[uint8]uint8{}
	// The same index as a table (-1: not a class), for the pixels' loop.
	var table [256]int16
	for i := range table {
		table[i] = -1
	}
	for i, c := range scheme.Classes {
		index[c.Code] = uint8(i)
		table[c.Code] = int16(i)
	}
	var ref, got []uint8
	for i := range n {
		ri, pi := table[l[i]], table[p[i]]
		if ri >= 0 && pi >= 0 {
			ref, got = append(ref, uint8(ri)), append(got, uint8(pi))
		}
	}
	bar.Add(1)
	if len(ref) == 0 {
		return Result{}, fmt.Errorf("no pixel of %s has a known class in both the prediction and the labels (%s)", prediction, labels)
	}
	m, err := forest.Evaluate(ref, got, scheme.Codes())
	if err != nil {
		return Result{}, err
	}
	res := Result{Dir: opt.Out, Metrics: m, Pixels: len(ref)}
	area, err := AreaEstimate(p, l, index, pred.Width, len(scheme.Classes), ec)
	if err != nil {
		res.AreaSkipped = err.Error()
		opt.Log.Warn("no area-adjusted estimate", "why", err)
	} else {
		res.Area = &area
	}
	bar.Add(1)
	for _, c := range scheme.Classes {
		res.Names = append(res.Names, c.Name)
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, fmt.Sprintf("evaluate %s %s %s", prediction, labels, alg))
	if err != nil {
		return res, err
	}
	defer staging.Release()
	body, err := json.MarshalIndent(struct {
		forest.Metrics
		Names       []string             `json:"class_names"`
		Prediction  string               `json:"prediction"`
		Labels      string               `json:"labels"`
		Resampling  string               `json:"label_resampling"`
		Area        *forest.AreaEstimate `json:"area_estimate,omitempty"`
		AreaSample  int                  `json:"area_sample_per_class"`
		AreaSeed    uint64               `json:"area_sample_seed"`
		AreaSkipped string               `json:"area_estimate_skipped,omitempty"`
	}{m, res.Names, prediction, labels, alg, res.Area, ec.SamplePerClass, ec.Seed, res.AreaSkipped}, "", "  ")
	if err != nil {
		return res, err
	}
	if err := atomicfs.WriteFile(staging.Path(stage.MetricsFile), append(body, '\n')); err != nil {
		return res, err
	}
	if opt.Charts != nil {
		if err := opt.Charts.Confusion(staging.Path("confusion.png"), m.Confusion, res.Names,
			fmt.Sprintf("Prediction vs labels: OA %.3f, κ %.3f", m.Accuracy, m.Kappa), ec.Counts); err != nil {
			return res, err
		}
	}
	return res, staging.Commit()
}

// AreaEstimate draws the stratified sample of EvaluateConfig from the
// pixels both the map (pred) and the labels (lab) give a known class
// (index maps codes to class indices), counts every mapped pixel per
// class, and estimates accuracy and areas from them. The sample is, per
// map class, the pixels with the smallest hashes of (seed, row, column):
// a seeded simple random sample without replacement within each stratum,
// the same whatever order the pixels are visited in. Each stratum keeps
// only its sample_per_class smallest so far (a bounded max-heap), so
// memory does not grow with the map.
func AreaEstimate(pred, lab []uint8, index map[uint8]uint8, width, k int, ec Config) (forest.AreaEstimate, error) {
	mapped := make([]int64, k)
	sample := make([][]int64, k)
	for j := range sample {
		sample[j] = make([]int64, k)
	}
	strata := make([]stratumSample, k)
	for i, p := range pred {
		pi, ok := index[p]
		if !ok {
			continue
		}
		mapped[pi]++
		ri, ok := index[lab[i]]
		if !ok {
			continue
		}
		if ec.SamplePerClass <= 0 {
			// Every pixel is in the sample: no draw to keep.
			sample[ri][pi]++
			continue
		}
		key := rng.Hash(ec.Seed, 0xa4ea, uint64(i/width), uint64(i%width))
		strata[pi].offer(areaCand{key, i, ri}, ec.SamplePerClass)
	}
	for pi, st := range strata {
		for _, c := range st {
			sample[c.ref][pi]++
		}
	}
	return forest.EstimateAreas(sample, mapped)
}

// areaCand is a pixel that may be in the area estimate's sample: its key,
// its place in the map (ties), and its reference class.
type areaCand struct {
	Key uint64
	pos int
	ref uint8
}

// less orders candidates by (key, pos).
func (a areaCand) less(b areaCand) bool {
	return a.Key < b.Key || a.Key == b.Key && a.pos < b.pos
}

// stratumSample holds a stratum's smallest candidates so far, at most a
// cap, as a max-heap: the largest at [0].
type stratumSample []areaCand

// offer adds c when the stratum has fewer than max candidates or c is
// smaller than its largest, which then goes.
func (h *stratumSample) offer(c areaCand, max int) {
	s := *h
	if len(s) < max {
		s = append(s, c)
		// Sift up.
		for i := len(s) - 1; i > 0; {
			p := (i - 1) / 2
			if !s[p].less(s[i]) {
				break
			}
			s[p], s[i] = s[i], s[p]
			i = p
		}
		*h = s
		return
	}
	if !c.less(s[0]) {
		return
	}
	s[0] = c
	// Sift down.
	for i := 0; ; {
		l, big := 2*i+1, i
		if l < len(s) && s[big].less(s[l]) {
			big = l
		}
		if r := l + 1; r < len(s) && s[big].less(s[r]) {
			big = r
		}
		if big == i {
			return
		}
		s[i], s[big] = s[big], s[i]
		i = big
	}
}

// keepValidation unlabels every pixel of l that the split plane at path
// (width × height, as the map) does not mark validation.
func keepValidation(l []uint8, path string, width, height int) error {
	split, rows, cols, err := npy.ReadUint8(path)
	if err != nil {
		return fmt.Errorf("--split: %w", err)
	}
	if rows != height || cols != width {
		return fmt.Errorf("--split %s is %d×%d (rows × columns), the prediction %d×%d", path, rows, cols, height, width)
	}
	kept := 0
	for i, v := range split {
		if v != sampling.PlaneValidation {
			l[i] = 0
		} else {
			kept++
		}
	}
	if kept == 0 {
		return fmt.Errorf("--split %s marks no validation pixel", path)
	}
	return nil
}
