package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/baseline"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/learn/sklearn"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// ForestConfig sets up the training benchmark: every labelled pixel
// of a train config's inputs, split by spatial blocks, then nested seeded
// subsets of the training pixels of each size, fitted by each engine with
// the train config's forest parameters and scored on the same validation
// pixels.
type ForestConfig struct {
	Train              string             `yaml:"train"`    // train config (path or embedded name): input, classes, sampling seed and block size, forest
	Features           config.FeatureList `yaml:"features"` // overrides the train config's features (a list, or a named set)
	Sizes              []int              `yaml:"sizes"`    // training rows per fit
	ValidationFraction float64            `yaml:"validation_fraction"`
	ValidationRows     int                `yaml:"validation_rows"` // a seeded subset of the validation pixels
	Engines            []string           `yaml:"engines"`         // gpu, gpu1, cpu, golearn, sklearn
	CPUMaxRows         int                `yaml:"cpu_max_rows"`    // larger sizes skip the engine
	GolearnMaxRows     int                `yaml:"golearn_max_rows"`
	SklearnMaxRows     int                `yaml:"sklearn_max_rows"`
	Golearn            struct {
		Trees           int `yaml:"trees"`
		FeaturesPerTree int `yaml:"features_per_tree"`
	} `yaml:"golearn"`
	Sklearn struct {
		Python string `yaml:"python"` // interpreter; default python3
		Jobs   int    `yaml:"jobs"`   // n_jobs; 0: all CPUs
	} `yaml:"sklearn"`
}

// ParseForestConfig decodes and checks a training benchmark config.
func ParseForestConfig(raw []byte) (ForestConfig, error) {
	var c ForestConfig
	if err := configs.DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	switch {
	case c.Train == "":
		return c, errors.New("train: no train config named")
	case len(c.Sizes) == 0:
		return c, errors.New("sizes: none given")
	case !(c.ValidationFraction > 0 && c.ValidationFraction < 1):
		return c, fmt.Errorf("validation_fraction: %v is outside (0, 1)", c.ValidationFraction)
	case c.ValidationRows < 1:
		return c, fmt.Errorf("validation_rows: %d is below 1", c.ValidationRows)
	case len(c.Engines) == 0:
		return c, errors.New("engines: none given (gpu, gpu1, cpu, golearn, sklearn)")
	}
	for _, n := range c.Sizes {
		if n < 2 {
			return c, fmt.Errorf("sizes: %d is below 2", n)
		}
	}
	for _, e := range c.Engines {
		if e != "gpu" && e != "gpu1" && e != "cpu" && e != "golearn" && e != "sklearn" {
			return c, fmt.Errorf("engines: %q is not gpu, gpu1, cpu, golearn or sklearn", e)
		}
	}
	if c.Sklearn.Python == "" {
		c.Sklearn.Python = "python3"
	}
	return c, nil
}

// ForestFit is one engine's fit at one size.
type ForestFit struct {
	Engine  string  `json:"engine"`
	Rows    int     `json:"rows"`
	Skipped string  `json:"skipped,omitempty"`
	BinSec  float64 `json:"bin_seconds,omitempty"` // quantile edges and codes (lulc engines)
	FitSec  float64 `json:"fit_seconds,omitempty"`
	// PredictSec is the time to classify the validation rows.
	PredictSec float64 `json:"predict_seconds,omitempty"`
	Accuracy   float64 `json:"validation_accuracy,omitempty"`
	Nodes      int     `json:"nodes,omitempty"`
	// SameAsCPU says whether the GPU forest equals the CPU forest, and
	// SameAsOneGPU whether the forest grown on every device equals the
	// one grown on the first alone.
	SameAsCPU    *bool `json:"same_as_cpu,omitempty"`
	SameAsOneGPU *bool `json:"same_as_one_gpu,omitempty"`
	// GPUs is the number of devices that grew the trees.
	GPUs int `json:"gpus,omitempty"`
}

// ForestReport is the training benchmark's outcome.
type ForestReport struct {
	Command    string        `json:"command"`
	Host       HostInfo      `json:"host"`
	Features   []string      `json:"features"`
	Classes    int           `json:"classes"`
	Params     forest.Params `json:"params"`
	Pixels     int           `json:"labelled_pixels"`
	TrainPool  int           `json:"training_pixels"`
	Validation int           `json:"validation_rows"`
	ScanSec    float64       `json:"scan_seconds"`
	Fits       []ForestFit   `json:"fits"`
}

// Forest runs the training benchmark into opt.Out (report.json and
// report.md) with cfg, the train config bc names, as loaded by the caller.
func Forest(ctx context.Context, bc ForestConfig, cfg config.TrainConfig, command string, opt stage.Options) (*ForestReport, error) {
	opt.Fill()
	if len(bc.Features) > 0 {
		cfg.Features = bc.Features
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append(cfg.Inputs(), opt.Inputs...)...); err != nil {
		return nil, err
	}
	scheme, _ := cfg.Scheme()
	// The scan splits by the bench's validation fraction, with the train
	// config's seed and block size.
	cfg.Sampling.ValidationFraction = bc.ValidationFraction
	pixels, err := train.NewPixelScan(cfg)
	if err != nil {
		return nil, err
	}
	stage, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "forest bench")
	if err != nil {
		return nil, err
	}
	defer stage.Release()
	rep := &ForestReport{Command: command, Host: hostInfo(opt.Version), Features: cfg.Features, Classes: len(scheme.Classes), Params: cfg.Forest}

	// Every labelled pixel, features computed on the GPU when one is given.
	t0 := time.Now()
	nf := len(cfg.Features)
	var xt, xv []float32
	var yt, yv []uint8
	err = pixels.Run(ctx, opt, func(px sampling.Pixel) {
		if px.Validation() {
			xv = px.AppendFeatures(xv)
			yv = append(yv, uint8(px.Class()))
		} else {
			xt = px.AppendFeatures(xt)
			yt = append(yt, uint8(px.Class()))
		}
	})
	if err != nil {
		return nil, err
	}
	rep.Pixels, rep.TrainPool = len(yt)+len(yv), len(yt)
	if len(yt) < 2 || len(yv) < 1 {
		return nil, fmt.Errorf("forest bench: %d training and %d validation pixels: too few", len(yt), len(yv))
	}
	// Nested seeded subsets: each size takes a prefix of one permutation.
	r := rand.New(rand.NewPCG(cfg.Sampling.Seed, 0xbe4c))
	perm := r.Perm(len(yt))
	vperm := r.Perm(len(yv))[:min(bc.ValidationRows, len(yv))]
	xval, yval := gather(xv, yv, nf, vperm)
	rep.Validation = len(yval)
	rep.ScanSec = time.Since(t0).Seconds()
	opt.Log.Info("forest bench: pixels scanned", "training", len(yt), "validation", len(yval), "seconds", rep.ScanSec)

	npyDir := stage.Path("npy")
	valX, valY := filepath.Join(npyDir, "val_x.npy"), filepath.Join(npyDir, "val_y.npy")
	wantSklearn := false
	for _, e := range bc.Engines {
		wantSklearn = wantSklearn || e == "sklearn"
	}
	if wantSklearn {
		if err := os.MkdirAll(npyDir, 0o755); err != nil {
			return nil, err
		}
		if err := sklearn.WriteNpy(valX, xval, []int{len(yval), nf}); err != nil {
			return nil, err
		}
		if err := sklearn.WriteNpy(valY, yval, []int{len(yval)}); err != nil {
			return nil, err
		}
	}
	// The reports are rewritten after every size, so a run cut short
	// still shows what it measured (in the staging directory).
	flush := func() error {
		body, _ := json.MarshalIndent(rep, "", "  ")
		if err := atomicfs.WriteFile(stage.Path("report.json"), append(body, '\n')); err != nil {
			return err
		}
		return atomicfs.WriteFile(stage.Path("report.md"), []byte(forestMarkdown(rep)))
	}
	fr := &forestRun{bc: bc, cfg: cfg, opt: opt, classes: len(scheme.Classes), nf: nf,
		xval: xval, yval: yval, npyDir: npyDir, valX: valX, valY: valY}
	for _, size := range bc.Sizes {
		if err := flush(); err != nil {
			return nil, err
		}
		n := min(size, len(yt))
		x, y := gather(xt, yt, nf, perm[:n])
		fits, err := fr.size(ctx, x, y)
		if err != nil {
			return nil, err
		}
		rep.Fits = append(rep.Fits, fits...)
	}
	os.RemoveAll(npyDir) // gigabytes, and the report says how they were made
	if err := flush(); err != nil {
		return nil, err
	}
	if err := stage.Commit(); err != nil {
		return nil, err
	}
	return rep, nil
}

// forestRun is what every size of a forest bench shares: the configs,
// the engine's device, the validation rows and the scikit-learn files.
type forestRun struct {
	bc                 ForestConfig
	cfg                config.TrainConfig
	opt                stage.Options
	classes, nf        int
	xval               []float32
	yval               []uint8
	npyDir, valX, valY string
}

// size fits every engine on the n rows x, y and says whether lulc's CPU
// and GPU forests came out identical.
func (fr *forestRun) size(ctx context.Context, x []float32, y []uint8) ([]ForestFit, error) {
	n, nf := len(y), fr.nf
	var binned *forest.Binned
	var bins *forest.Bins
	var binSec float64
	binOnce := func() error {
		if binned != nil {
			return nil
		}
		t := time.Now()
		var err error
		if bins, err = forest.QuantileBins(x, nf, fr.cfg.Forest.Bins, 200_000, fr.cfg.Forest.Seed); err != nil {
			return err
		}
		if binned, err = bins.Bin(x, nf); err != nil {
			return err
		}
		binSec = time.Since(t).Seconds()
		return nil
	}
	var fits []ForestFit
	forests := map[string]*forest.Forest{}
	for _, e := range fr.bc.Engines {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fit := ForestFit{Engine: e, Rows: n}
		var err error
		switch e {
		case "gpu", "gpu1", "cpu":
			if err := binOnce(); err != nil {
				return nil, err
			}
			if forests[e], err = fr.ours(ctx, e, bins, binned, y, &fit); fit.Skipped == "" {
				fit.BinSec = binSec
			}
		case "golearn":
			err = fr.golearn(x, y, &fit)
		case "sklearn":
			if fr.bc.SklearnMaxRows > 0 && n > fr.bc.SklearnMaxRows {
				fit.Skipped = fmt.Sprintf("above sklearn_max_rows (%d)", fr.bc.SklearnMaxRows)
			} else if res, err := (sklearn.Runner{Python: fr.bc.Sklearn.Python, Jobs: fr.bc.Sklearn.Jobs, Dir: fr.npyDir}).Fit(ctx, fr.cfg.Forest, sklearn.Data{X: x, Y: y, Features: nf, ValX: fr.valX, ValY: fr.valY}); err != nil {
				fit.Skipped = err.Error()
			} else {
				fit.FitSec, fit.PredictSec, fit.Accuracy, fit.Nodes = res.Fit, res.Predict, res.Accuracy, res.Nodes
			}
		}
		if err != nil {
			return nil, err
		}
		if fit.Skipped != "" {
			fr.opt.Log.Info("forest bench: skipped", "engine", e, "rows", n, "why", fit.Skipped)
		} else {
			fr.opt.Log.Info("forest bench: fitted", "engine", e, "rows", n, "seconds", fit.FitSec, "accuracy", fit.Accuracy)
		}
		fits = append(fits, fit)
	}
	for i := range fits {
		if fits[i].Engine != "gpu" || forests["gpu"] == nil {
			continue
		}
		if forests["cpu"] != nil {
			same := reflect.DeepEqual(forests["cpu"], forests["gpu"])
			fits[i].SameAsCPU = &same
		}
		if forests["gpu1"] != nil {
			same := reflect.DeepEqual(forests["gpu1"], forests["gpu"])
			fits[i].SameAsOneGPU = &same
		}
	}
	return fits, nil
}

// ours fits lulc's forest on the engine e ("gpu": every device given,
// "gpu1": the first alone, "cpu": all cores) and predicts the validation
// rows, binning included: on the first device for the GPU, on all cores
// for the CPU. A fit that fails is recorded as skipped; the error
// returned is a prediction's.
func (fr *forestRun) ours(ctx context.Context, e string, bins *forest.Bins, binned *forest.Binned, y []uint8, fit *ForestFit) (*forest.Forest, error) {
	devs := fr.opt.GPUs
	if e == "gpu1" {
		devs = devs[:min(1, len(devs))]
	}
	if e != "cpu" && len(devs) == 0 {
		fit.Skipped = "no usable GPU"
		return nil, nil
	}
	if e == "cpu" && fr.bc.CPUMaxRows > 0 && len(y) > fr.bc.CPUMaxRows {
		fit.Skipped = fmt.Sprintf("above cpu_max_rows (%d)", fr.bc.CPUMaxRows)
		return nil, nil
	}
	// The engine as lulc train runs it: the devices chosen, or none.
	opt := fr.opt
	opt.GPUs = nil
	if e != "cpu" {
		fit.GPUs = len(devs)
		opt.GPUs = devs
	}
	t := time.Now()
	f, err := opt.Fit(ctx, binned, y, fr.classes, fr.cfg.Forest, func(format string, args ...any) {
		fr.opt.Log.Info(fmt.Sprintf(format, args...))
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		fit.Skipped = err.Error()
		return nil, nil
	}
	fit.FitSec = time.Since(t).Seconds()
	t = time.Now()
	pred, err := opt.Classify(ctx, &forest.Model{Bins: bins, Forest: f}, fr.xval, fr.nf)
	if err != nil {
		return nil, err
	}
	fit.PredictSec = time.Since(t).Seconds()
	fit.Accuracy = accuracyOf(pred, fr.yval)
	fit.Nodes, _ = f.Nodes()
	return f, nil
}

// Golearn is package baseline's golearn forest as stage.Options.Golearn
// takes it (train configs whose engine is golearn).
func Golearn(x []float32, nf int, y []uint8, classes, trees, featuresPerTree int, seed int64) (stage.GolearnForest, error) {
	f, err := baseline.Train(x, nf, y, classes, trees, featuresPerTree, seed)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// golearn fits the golearn baseline and predicts the validation rows.
func (fr *forestRun) golearn(x []float32, y []uint8, fit *ForestFit) error {
	if fr.bc.GolearnMaxRows > 0 && len(y) > fr.bc.GolearnMaxRows {
		fit.Skipped = fmt.Sprintf("above golearn_max_rows (%d)", fr.bc.GolearnMaxRows)
		return nil
	}
	t := time.Now()
	f, err := baseline.Train(x, fr.nf, y, fr.classes, fr.bc.Golearn.Trees, fr.bc.Golearn.FeaturesPerTree, int64(fr.cfg.Forest.Seed))
	if err != nil {
		fit.Skipped = err.Error()
		return nil
	}
	fit.FitSec = time.Since(t).Seconds()
	t = time.Now()
	pred, err := f.Predict(fr.xval, fr.nf)
	if err != nil {
		return err
	}
	fit.PredictSec = time.Since(t).Seconds()
	fit.Accuracy = accuracyOf(pred, fr.yval)
	return nil
}

// gather copies the rows idx of a row-major matrix and their labels.
func gather(x []float32, y []uint8, nf int, idx []int) ([]float32, []uint8) {
	ox := make([]float32, 0, len(idx)*nf)
	oy := make([]uint8, 0, len(idx))
	for _, i := range idx {
		ox = append(ox, x[i*nf:(i+1)*nf]...)
		oy = append(oy, y[i])
	}
	return ox, oy
}

func accuracyOf(pred, truth []uint8) float64 {
	ok := 0
	for i := range truth {
		if pred[i] == truth[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(truth))
}

// forestMarkdown renders the report as a table per size.
func forestMarkdown(r *ForestReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lulc training benchmark\n\n")
	fmt.Fprintf(&b, "%d labelled pixels (%d in training blocks), %d features, %d classes; validation on %d pixels of held-out blocks. "+
		"Forest: %d trees, max_depth %d, max_features %s, min_samples_leaf %d, bootstrap %v, %d bins (lulc engines). "+
		"Fit times exclude reading the pixels (%.1f s) and, for the lulc engines, binning (its own column).\n\n",
		r.Pixels, r.TrainPool, len(r.Features), r.Classes, r.Validation, r.Params.Trees, r.Params.MaxDepth,
		mtryText(r.Params, len(r.Features)), r.Params.MinSamplesLeaf, r.Params.Bootstrap, r.Params.Bins, r.ScanSec)
	fmt.Fprintf(&b, "Host: %s, %d CPUs, %.0f GB RAM; GPU: %s; lulc %s, %s.\n\n", r.Host.CPU, r.Host.Cores, float64(r.Host.RAM)/1e9, orNone(r.Host.GPU), r.Host.Lulc, r.Host.Go)
	fmt.Fprintf(&b, "| rows | engine | fit (s) | binning (s) | predict %d rows (s) | validation accuracy | nodes | vs sklearn | vs lulc CPU | vs one GPU | same trees as CPU | same trees as one GPU |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n", r.Validation)
	for _, f := range r.Fits {
		if f.Skipped != "" {
			fmt.Fprintf(&b, "| %d | %s | not run: %s | | | | | | | | | |\n", f.Rows, f.Engine, f.Skipped)
			continue
		}
		var sk, cpu, gpu1 float64
		for _, o := range r.Fits {
			if o.Rows == f.Rows && o.Skipped == "" {
				switch o.Engine {
				case "sklearn":
					sk = o.FitSec
				case "cpu":
					cpu = o.FitSec
				case "gpu1":
					gpu1 = o.FitSec
				}
			}
		}
		same, sameOne := "", ""
		if f.SameAsCPU != nil {
			same = fmt.Sprint(*f.SameAsCPU)
		}
		if f.SameAsOneGPU != nil {
			sameOne = fmt.Sprint(*f.SameAsOneGPU)
		}
		engine := f.Engine
		if f.GPUs > 1 {
			engine = fmt.Sprintf("%s (%d GPUs)", f.Engine, f.GPUs)
		}
		bin := ""
		if f.BinSec > 0 {
			bin = fmt.Sprintf("%.2f", f.BinSec)
		}
		nodes := "–"
		if f.Nodes > 0 {
			nodes = fmt.Sprint(f.Nodes)
		}
		vsOne := ""
		if f.Engine == "gpu" {
			vsOne = ratio(gpu1, f.FitSec)
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f | %s | %.3f | %.4f | %s | %s | %s | %s | %s | %s |\n", f.Rows, engine, f.FitSec, bin, f.PredictSec, f.Accuracy, nodes,
			ratio(sk, f.FitSec), ratio(cpu, f.FitSec), vsOne, same, sameOne)
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", r.Command)
	return b.String()
}

func mtryText(p forest.Params, nf int) string {
	if p.MaxFeatures == 0 {
		return fmt.Sprintf("sqrt (%d)", p.Mtry(nf))
	}
	return fmt.Sprint(p.MaxFeatures)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
