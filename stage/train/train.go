package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// Result summarises a training run.
type Result struct {
	Dir        string
	Engine     string
	Samples    int // training rows
	Validation int
	// Buffered counts the training candidates dropped for lying within
	// sampling.buffer of a validation block.
	Buffered   int64
	Metrics    forest.Metrics
	ClassNames []string
	Sample     time.Duration
	Fit        time.Duration
	Warnings   []string
	Reused     bool // samples came from an earlier, interrupted run
	// Census counts the labelled pixels by code and what the split made
	// of them; nil when the samples were reused.
	Census *sampling.Census
}

// runInfo is written to run.json: what ran, on what, from which inputs.
type runInfo struct {
	Lulc        string            `json:"lulc_version"`
	Go          string            `json:"go_version"`
	GDAL        string            `json:"gdal_version"`
	ConfigHash  string            `json:"config_sha256"`
	Inputs      map[string]string `json:"input_sha256"`
	Engine      string            `json:"engine"`
	SampleTime  float64           `json:"sample_seconds"`
	FitTime     float64           `json:"fit_seconds"`
	TrainRows   int               `json:"training_samples"`
	ValRows     int               `json:"validation_samples"`
	Buffered    int64             `json:"buffered_training_pixels,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
	GolearnNote string            `json:"golearn_note,omitempty"`
}

// Train samples the inputs, fits the configured engine and writes a run
// directory: train.yaml, run.json, samples, model (lulc engine), metrics
// and, with opt.Charts, charts (confusion.png; importance.png with a
// model).
func Train(ctx context.Context, cfg config.TrainConfig, opt stage.Options) (res Result, err error) {
	opt.Fill()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append(cfg.Inputs(), opt.Inputs...)...); err != nil {
		return Result{}, err
	}
	ins, err := InputsOf(cfg)
	if err != nil {
		return Result{}, err
	}
	if err := cfg.ResolveLabels(inputSchemes(ins)); err != nil {
		return Result{}, err
	}
	scheme, _ := cfg.Scheme()
	// A job's draws train the model its one-process lulc run would: with
	// the config as that run trains with it, its input section cleared
	// (see Job.trainConfig).
	fitCfg := cfg
	if len(cfg.Input.Samples) > 0 {
		fitCfg.Input = config.TrainConfig{}.Input
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "train "+cfg.Hash())
	if err != nil {
		return Result{}, err
	}
	defer staging.Release()
	// A training that fails leaves nothing behind; one that is interrupted
	// keeps its samples for the rerun.
	defer func() {
		if err != nil && ctx.Err() == nil {
			os.RemoveAll(staging.Dir)
		}
	}()
	res = Result{Dir: staging.Final, Engine: cfg.Engine}
	for _, c := range scheme.Classes {
		res.ClassNames = append(res.ClassNames, c.Name)
	}

	// Samples: reused from an interrupted run of the same config, else drawn.
	t0 := time.Now()
	var set *sampleset.Set
	if body, err := os.ReadFile(staging.Path(stage.SamplesFile)); err == nil && staging.Resumed {
		notes, nerr := readDrawNotes(staging.Path(drawNotesFile))
		if set, err = sampleset.Decode(body); err == nil && nerr == nil && set.Config == fitCfg.SampleKey() {
			res.Reused = true
			res.Warnings, res.Census = append(res.Warnings, notes.Warnings...), notes.Census
		} else {
			set = nil
		}
	}
	if set == nil {
		var notes DrawNotes
		set, notes, err = Sample(fitCfg, ins, scheme, opt.Engine(), opt.NewBar(int64(len(ins)+1), "train: sampling tiles"))
		if err != nil {
			return res, err
		}
		res.Warnings, res.Census = append(res.Warnings, notes.warnings...), notes.census
		set.Config = fitCfg.SampleKey()
		body, err := set.Encode()
		if err != nil {
			return res, err
		}
		// The notes first: samples without them are drawn again.
		if err := writeDrawNotes(staging.Path(drawNotesFile), notes); err != nil {
			return res, err
		}
		if err := atomicfs.WriteFile(staging.Path(stage.SamplesFile), body); err != nil {
			return res, err
		}
	}
	res.Sample = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	// The model is measured on the validation split, then the run
	// directory's files are written: model, metrics, charts, resolved
	// config and run info.
	model, err := FitAndMeasure(ctx, fitCfg, scheme, set, ins, opt, &res)
	if err != nil {
		return res, err
	}
	if err := WriteTrainOutputs(fitCfg, set, ins, model, opt, staging.Dir, res); err != nil {
		return res, err
	}
	if err := os.Remove(staging.Path(drawNotesFile)); err != nil {
		return res, err
	}
	if err := staging.Commit(); err != nil {
		return res, err
	}
	return res, nil
}

// FitAndMeasure checks the samples, fits the configured engine on their
// training split and measures it on the validation split into res.
func FitAndMeasure(ctx context.Context, cfg config.TrainConfig, scheme landcover.Scheme, set *sampleset.Set, ins []Input, opt stage.Options, res *Result) (*forest.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The splits are copied out once: each is a few hundred megabytes on
	// a full tile.
	sp := splitOf(set)
	xt, yt, yv := sp.xt, sp.yt, sp.yv
	res.Samples, res.Validation, res.Buffered = len(yt), len(yv), set.Buffered
	// Said first, before the samples are checked and the forest fitted: a
	// scheme the labels do not fit explains what fails after it.
	fitWarning := schemeFitWarning(cfg, scheme, res.Census)
	if fitWarning != "" {
		opt.Log.Warn(fitWarning)
	}
	present, err := checkSamples(cfg, scheme, set, yt, yv, xt, res)
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		opt.Log.Warn(w)
	}
	if fitWarning != "" {
		res.Warnings = append(res.Warnings, fitWarning)
	}
	// The classes the labels hold, not the scheme's size; from the
	// samples when merged draws left no census.
	opt.Log.Info("samples", "training", len(yt), "validation", len(yv), "features", len(set.Features), "classes", present, "scheme_classes", len(scheme.Classes))
	logSplit(cfg, set, opt)
	logged := len(res.Warnings)
	// The model takes its bands and scaling from the inputs, which share
	// them; an empty shard's draw names none.
	in := ins[0]
	if i := slices.IndexFunc(ins, func(in Input) bool { return len(in.Bands) > 0 }); i >= 0 {
		in = ins[i]
	}
	model, pred, err := fit(ctx, cfg, scheme, set, sp, in, opt, res)
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings[logged:] {
		opt.Log.Warn(w)
	}
	if model != nil { // golearn's forests are not lulc models
		model.Dark, model.Remap = trainingDark(ins, model.Bands), cfg.Remap()
		// The validation rows' classes and the area of applicability's
		// reference need only the fitted forest: they are computed side by
		// side, the one's device work beside the other's host work.
		var ref *aoa.Reference
		var aoaErr error
		var wg sync.WaitGroup
		if !cfg.AOA.Off {
			wg.Go(func() {
				t0 := time.Now()
				opt.Log.Debug("area of applicability: measuring the training samples' distances")
				ref, aoaErr = trainAOA(ctx, cfg, set, model.Forest.Importance, opt.Engine().AOAPairs)
				if aoaErr == nil {
					opt.Log.Info("area of applicability", "points", ref.N, "of", ref.Training, "threshold", ref.Threshold, "s", time.Since(t0).Seconds())
				}
			})
		}
		t2 := time.Now()
		pred, err = stage.Classify(ctx, opt.Engine(), model, sp.xv, len(set.Features))
		opt.Log.Debug("fit: validation rows classified", "rows", len(yv), "s", time.Since(t2).Seconds())
		wg.Wait()
		if err != nil {
			return nil, err
		}
		if !cfg.AOA.Off {
			// A model is useful without its area of applicability: where the
			// samples cannot give one (all in one block), training says so
			// and goes on.
			if ctx.Err() != nil {
				return nil, ctx.Err()
			} else if aoaErr != nil {
				res.Warnings = append(res.Warnings, aoaErr.Error())
				opt.Log.Warn(aoaErr.Error())
			} else {
				model.AOA = ref
			}
		}
	}
	res.Metrics, err = forest.Evaluate(yv, pred, scheme.Codes())
	return model, err
}

// split is a sample set's training rows (xt, yt) and validation rows (xv,
// yv), copied out of it.
type split struct {
	xt, xv []float32
	yt, yv []uint8
}

func splitOf(set *sampleset.Set) split {
	var s split
	s.xt, s.yt = set.Subset(0)
	s.xv, s.yv = set.Subset(1)
	return s
}

// fit trains the configured engine: lulc's forest (the model, whose
// validation rows its caller classifies), or golearn's, which classifies
// the validation rows itself (their classes, and a nil model: lulc cannot
// save golearn's forests). An interrupt (ctx done) stops the fit promptly
// and returns ctx's error.
func fit(ctx context.Context, cfg config.TrainConfig, scheme landcover.Scheme, set *sampleset.Set, sp split, in Input, opt stage.Options, res *Result) (*forest.Model, []uint8, error) {
	if cfg.Engine == "golearn" {
		pred, err := fitGolearn(ctx, cfg, len(scheme.Classes), len(set.Features), sp, opt.Golearn, res)
		return nil, pred, err
	}
	xt, yt := sp.xt, sp.yt
	nf := len(set.Features)
	t1 := time.Now()
	bins, err := forest.QuantileBins(xt, nf, cfg.Forest.Bins, 200_000, cfg.Forest.Seed)
	if err != nil {
		return nil, nil, err
	}
	xb, err := bins.Bin(xt, nf)
	if err != nil {
		return nil, nil, err
	}
	opt.Log.Debug("fit: features binned", "s", time.Since(t1).Seconds())
	// The engines report each tree (or batch of trees) grown through the
	// context (progress.Step).
	bar := opt.NewBar(int64(cfg.Forest.Trees), "train: trees grown")
	f, err := opt.Engine().Fit(progress.WithSteps(ctx, func(n int) { bar.Add(n) }), xb, yt, len(scheme.Classes), cfg.Forest, func(format string, args ...any) {
		opt.Log.Info(fmt.Sprintf(format, args...))
	})
	bar.Finish()
	if err != nil {
		return nil, nil, err
	}
	res.Fit = time.Since(t1)
	model := &forest.Model{Features: set.Features, Bands: in.Bands, Scale: in.Scale, Offset: in.Offset,
		Params: cfg.Forest, ConfigHash: cfg.Hash(), Samples: len(yt), Bins: bins, Forest: f}
	for _, c := range scheme.Classes {
		model.Classes = append(model.Classes, forest.Class{Code: c.Code, Name: c.Name, Color: fmt.Sprintf("#%02x%02x%02x", c.Color.R, c.Color.G, c.Color.B)})
	}
	return model, nil, nil
}

// WriteTrainOutputs writes a training run's files into dir.
func WriteTrainOutputs(cfg config.TrainConfig, set *sampleset.Set, ins []Input, model *forest.Model, opt stage.Options, dir string, res Result) error {
	path := func(name string) string { return filepath.Join(dir, name) }
	if model != nil {
		body, err := model.Encode()
		if err != nil {
			return err
		}
		if err := atomicfs.WriteFile(path(stage.ModelFile), body); err != nil {
			return err
		}
		if opt.Charts != nil {
			if err := opt.Charts.Importance(path("importance.png"), set.Features, model.Forest.Importance, "Feature importance (lulc forest)"); err != nil {
				return err
			}
		}
	}
	mj, _ := json.MarshalIndent(struct {
		forest.Metrics
		Names    []string `json:"class_names"`
		Engine   string   `json:"engine"`
		Buffered int64    `json:"buffered_training_pixels,omitempty"`
		Warnings []string `json:"warnings,omitempty"`
	}{res.Metrics, res.ClassNames, cfg.Engine, res.Buffered, res.Warnings}, "", "  ")
	if err := atomicfs.WriteFile(path(stage.MetricsFile), append(mj, '\n')); err != nil {
		return err
	}
	if opt.Charts != nil {
		if err := opt.Charts.Confusion(path("confusion.png"), res.Metrics.Confusion, res.ClassNames,
			fmt.Sprintf("Validation confusion (%s): OA %.3f, κ %.3f", cfg.Engine, res.Metrics.Accuracy, res.Metrics.Kappa), false); err != nil {
			return err
		}
	}
	if err := stage.WriteResolvedConfig(path("train.yaml"), cfg); err != nil {
		return err
	}
	info := runInfo{Lulc: opt.Version, Go: runtime.Version(), GDAL: raster.GDALVersion(), ConfigHash: cfg.Hash(),
		Inputs: map[string]string{}, Engine: cfg.Engine, SampleTime: res.Sample.Seconds(), FitTime: res.Fit.Seconds(),
		TrainRows: res.Samples, ValRows: res.Validation, Buffered: res.Buffered, Warnings: res.Warnings}
	for _, in := range ins {
		if in.InMemory {
			continue // no file to checksum
		}
		for _, p := range []string{in.Image, in.Labels} {
			sum, _, err := stage.FileSHA256(p)
			if err != nil {
				return err
			}
			info.Inputs[p] = sum
		}
	}
	// Timings vary run to run: they live in run.json, never in the model.
	ib, _ := json.MarshalIndent(info, "", "  ")
	return atomicfs.WriteFile(path("run.json"), append(ib, '\n'))
}

// CheckSamples refuses samples training cannot use and records warnings
// for those it can. It returns how many classes the labels hold (with a
// census; else how many the samples hold).
func checkSamples(cfg config.TrainConfig, scheme landcover.Scheme, set *sampleset.Set, yt, yv []uint8, xt []float32, res *Result) (int, error) {
	if len(yt)+len(yv) == 0 && len(res.Warnings) > 0 {
		// The draw's warnings say why none was drawn (labels outside the
		// scheme, planes without data); the split is not the cause.
		return 0, fmt.Errorf("no samples: %s", strings.Join(res.Warnings, "; "))
	}
	if len(yt) < 2 || len(yv) < 1 {
		return 0, fmt.Errorf("too few samples for the split: %d training and %d validation (lower sampling.block_size or raise the input's size)", len(yt), len(yv))
	}
	counts := make([]int, len(scheme.Classes))
	var few []string
	for _, y := range yt {
		counts[y]++
	}
	warnings, present := classWarnings(cfg, scheme, res.Census, counts)
	res.Warnings = append(res.Warnings, warnings...)
	trained := 0
	for c, n := range counts {
		if n > 0 && n < cfg.Sampling.MinPerClass {
			few = append(few, fmt.Sprintf("class %d (%s) has %d", scheme.Classes[c].Code, scheme.Classes[c].Name, n))
		}
		if n > 0 {
			trained++
		}
	}
	if present < 0 {
		present = 0
		for c := range counts {
			if counts[c] > 0 || slices.Contains(yv, uint8(c)) {
				present++
			}
		}
	}
	if trained < 2 {
		return present, fmt.Errorf("the training samples hold fewer than two classes: nothing to learn (%s)", strings.Join(warnings, "; "))
	}
	if len(few) > 0 {
		// A model is not written from fewer samples of a class than the
		// config asks for: its forest would only echo them.
		return present, fmt.Errorf("too few training samples: %s, below sampling.min_per_class %d (label more pixels of them, or lower min_per_class)",
			strings.Join(few, "; "), cfg.Sampling.MinPerClass)
	}
	nf := len(set.Features)
	var allNaN []string
	for f := range nf {
		nan := true
		for i := range len(yt) {
			if v := xt[i*nf+f]; v == v {
				nan = false
				break
			}
		}
		if nan {
			allNaN = append(allNaN, set.Features[f])
		}
	}
	if len(allNaN) > 0 {
		return present, fmt.Errorf("features %s are NaN in every training sample", strings.Join(allNaN, ", "))
	}
	return present, nil
}

// logSplit says what the split's buffer did, and that a split by features
// has none: the buffer a blocked split takes by default (the context
// features' radius) would otherwise vanish without a word.
func logSplit(cfg config.TrainConfig, set *sampleset.Set, opt stage.Options) {
	switch {
	case cfg.Sampling.Split == sampling.SplitFeatures:
		msg := "sampling.split features: no buffer (sampling.buffer works with split blocks only): each feature's pixels go whole to one side"
		if r := config.ContextRadius(cfg.Features); r > 0 {
			msg += fmt.Sprintf("; split blocks would drop the training pixels within the context features' radius %d of validation blocks", r)
		}
		opt.Log.Info(msg)
	case cfg.Sampling.Buffer > 0:
		opt.Log.Info("split buffer", "buffer_pixels", cfg.Sampling.Buffer, "training_pixels_dropped", set.Buffered)
	}
}

// trainAOA prepares the model's area of applicability from the samples'
// training split. Its cross-validation folds are the sampling blocks (an
// input's sampling.block_size squares, the units the split assigns): a
// sample's DI is taken to the nearest training sample in another block.
// The cap keeps the samples with the smallest keys seeded by
// sampling.seed and the pixel.
func trainAOA(ctx context.Context, cfg config.TrainConfig, set *sampleset.Set, importance []float64, measure aoa.Pairs) (*aoa.Reference, error) {
	nf, bs := len(set.Features), uint64(cfg.Sampling.BlockSize)
	var s []aoa.Sample
	for i, sp := range set.Split {
		if sp != 0 {
			continue
		}
		id := set.Pixel[i]
		src, row, col := id>>40, id>>20&(1<<20-1), id&(1<<20-1)
		s = append(s, aoa.Sample{X: set.X[i*nf : (i+1)*nf], Fold: src<<40 | (row/bs)<<20 | col/bs,
			Key: rng.Hash(cfg.Sampling.Seed, 0xa0a, id)})
	}
	ref, err := aoa.Build(ctx, s, nf, importance, cfg.AOA.PointCap(), fmt.Sprintf("sampling blocks of %d × %d pixels", bs, bs), measure)
	if err != nil {
		return nil, fmt.Errorf("the model has no area of applicability: %w", err)
	}
	return ref, nil
}

// trainingDark is the training data's dark level per band: the median
// over the inputs that know theirs (a stack's manifest, a run's
// composite); nil when none does (rasters read directly, sample phases'
// draws).
func trainingDark(ins []Input, bands []string) map[string]float64 {
	var levels [][]float64
	for _, in := range ins {
		for _, d := range in.Darks {
			if l := d.Aligned(bands); l != nil {
				levels = append(levels, l)
			}
		}
	}
	return radiometry.ByName(bands, radiometry.Median(levels))
}
