package main

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/report/charts"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
)

// predictFile is the YAML form of a prediction job.
type predictFile struct {
	Model      string `yaml:"model"`
	Input      string `yaml:"input"`
	Window     int    `yaml:"window"`
	Confidence bool   `yaml:"confidence"`
	Compress   string `yaml:"compress"`
	// AOA: aoa.tif when the model has an area of applicability.
	AOA stage.AOAOptions `yaml:"aoa"`
}

func newPredictCmd(a *app) *cobra.Command {
	var cfgPath, out, ingestCfg, catalogOverride, baseURL string
	var pc predict.Config
	var force bool
	var device string
	var noAOA bool
	cmd := &cobra.Command{
		Use:   "predict --out DIR (--config configs/predict-<name>.yaml | --model M (--input STACK | --catalog CATALOG | --ingest-config CONFIG))",
		Short: "Classify ingest stacks with a model into class COGs, STAC items and quicklooks",
		Long: `predict streams every tile of an ingest output through read → features → predict →
write stages and writes per tile class.tif (UInt8 class codes with the scheme's colours
and names, nodata 0, COG with MODE overviews), optionally confidence.tif (top class
probability 0–100), a STAC item and a quicklook PNG with a legend. When the model
carries an area of applicability (lulc train keeps one unless aoa.off), it also writes
aoa.tif: the dissimilarity index to the training data and a mask of where it is within
the model's threshold (Meyer & Pebesma 2021), on a grid of every --aoa-step-th pixel
(default 10, on the CPU and the GPU alike), and warns when more than 10 % of a tile
lies outside. Outputs are staged
and renamed when complete; --resume continues an interrupted run, keeping the tiles
whose checksums verify. With STAC input (--catalog or --ingest-config) it first runs
ingest into OUT.stack and predicts from that stack.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			if cfgPath != "" {
				raw, err := os.ReadFile(cfgPath)
				if err != nil {
					return fmt.Errorf("read config: %w", err)
				}
				var f predictFile
				if err := configs.DecodeStrict(raw, &f); err != nil {
					return fmt.Errorf("config %s: %w", cfgPath, err)
				}
				if pc.Model == "" {
					pc.Model = f.Model
				}
				if pc.Input == "" {
					pc.Input = f.Input
				}
				pc.Window, pc.Confidence, pc.Compress = f.Window, pc.Confidence || f.Confidence, f.Compress
				if !cmd.Flags().Changed("aoa-step") {
					pc.AOA.Step = f.AOA.Step
				}
				pc.AOA.Off = f.AOA.Off
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			if ingestCfg != "" || catalogOverride != "" {
				// STAC input: ingest first into a stack beside the output,
				// then predict from it.
				if pc.Input != "" {
					return usagef("--input and --ingest-config/--catalog are alternatives")
				}
				icfg, err := loadConfig(ingestCfg, defaultIngestConfig, config.ParseIngestConfig)
				if err != nil {
					return err
				}
				if catalogOverride != "" {
					icfg.Source.Catalog, icfg.Source.API = catalogOverride, ""
				}
				pc.Input = out + ".stack"
				// Both outputs are checked before any work: the ingest
				// would otherwise run before predict refused its --out.
				inputs := append([]string{cfgPath, ingestCfg, pc.Model}, icfg.Inputs()...)
				for _, o := range []string{out, pc.Input} {
					if err := atomicfs.CheckInputs(o, inputs...); err != nil {
						return err
					}
				}
				if _, err := ingest.Ingest(cmd.Context(), icfg, stage.Options{Compare: a.compare, GPUs: devs, Out: pc.Input, Force: true, BreakLock: a.breakLock, Inputs: []string{cfgPath, ingestCfg, pc.Model}, Log: a.log, Version: lulcVersion(), NewBar: a.newBar}); err != nil {
					return fmt.Errorf("predict: ingest: %w", err)
				}
				a.log.Info("stack ingested for prediction", "stack", pc.Input)
			}
			pc.AOA.Off = pc.AOA.Off || noAOA
			if pc.Model == "" || pc.Input == "" {
				return usagef("--model and --input (or a --config naming them, or --ingest-config/--catalog) are required")
			}
			base, err := checkBaseURL(baseURL)
			if err != nil {
				return err
			}
			res, err := predict.Predict(cmd.Context(), pc, stage.Options{Compare: a.compare, GPUs: devs, Out: out, Inputs: []string{cfgPath}, Force: force, BreakLock: a.breakLock, Log: a.log, Version: lulcVersion(), NewBar: a.newBar, Charts: charts.Drawer{}, BaseURL: base})
			if err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			if a.summary(res) {
				var px int64
				for _, t := range res.Tiles {
					px += t.Pixels
				}
				fmt.Fprintf(a.stdout, "predicted %d tile(s) in %s (%.2f Mpx/s end to end)\n", len(res.Tiles), res.Elapsed.Round(time.Millisecond), float64(px)/1e6/res.Elapsed.Seconds())
				for _, t := range res.Tiles {
					fmt.Fprintf(a.stdout, "  %s: class map %s\n        quicklook %s\n        STAC item %s\n", t.Tile, t.Class, t.Quicklook, t.Item)
					if t.AOAOutside != nil {
						fmt.Fprintf(a.stdout, "        area of applicability %s (%.1f %% outside)\n", t.AOA, *t.AOAOutside)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "prediction config (model, input, window, confidence, compress)")
	cmd.Flags().StringVar(&pc.Model, "model", "", "model file (model.lulcrf from lulc train)")
	cmd.Flags().StringVar(&pc.Input, "input", "", "ingest output directory")
	cmd.Flags().StringVar(&ingestCfg, "ingest-config", "", "STAC input: ingest with this config into OUT.stack, then predict")
	cmd.Flags().StringVar(&catalogOverride, "catalog", "", "STAC input: a static catalog to ingest (with the embedded or --ingest-config config)")
	cmd.Flags().IntVar(&pc.Window, "window", 0, "window side in pixels (default 1024)")
	cmd.Flags().BoolVar(&pc.Confidence, "confidence", false, "also write confidence.tif")
	cmd.Flags().StringVar(&pc.Compress, "compress", "", "DEFLATE (default) or ZSTD")
	cmd.Flags().BoolVar(&pc.Resume, "resume", false, "continue an interrupted run, keeping verified tiles")
	cmd.Flags().BoolVar(&noAOA, "no-aoa", false, "write no aoa.tif even when the model has an area of applicability")
	cmd.Flags().IntVar(&pc.AOA.Step, "aoa-step", 0, "grid step of aoa.tif in pixels (0: 10)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory")
	baseURLFlag(cmd, &baseURL)
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	return cmd
}

func newEvaluateCmd(a *app) *cobra.Command {
	var prediction, labels, alg, out string
	var force bool
	ec := evaluate.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "evaluate --prediction class.tif --labels labels.tif --out DIR",
		Short: "Compare a class map with reference labels (warping them if needed)",
		Long: `evaluate compares a class map with reference labels (warped onto the map's grid
when they are on another) over every pixel both give a known class: the confusion
matrix, overall accuracy, kappa, per-class precision, recall and F1. From a sample
of those pixels stratified by map class (--sample-per-class, seeded by --seed) it
also estimates, after Olofsson et al. (2014), the area-adjusted overall, user's and
producer's accuracies and each class's area, with 95 % confidence intervals: the
figures a map's users can cite. metrics.json holds both; confusion.png the matrix.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prediction == "" || labels == "" || out == "" {
				return usagef("--prediction, --labels and --out are required")
			}
			if alg != "mode" && alg != "nearest" {
				return usagef("--resampling: %q is not mode or nearest", alg)
			}
			if ec.SamplePerClass < 0 {
				return usagef("--sample-per-class: %d is negative", ec.SamplePerClass)
			}
			ec.Resampling = alg
			res, err := evaluate.Evaluate(cmd.Context(), prediction, labels, ec, stage.Options{Compare: a.compare, Out: out, Force: force, BreakLock: a.breakLock, Log: a.log, Charts: charts.Drawer{}})
			if err != nil {
				return fmt.Errorf("evaluate: %w", err)
			}
			if a.summary(res) {
				fmt.Fprint(a.stdout, res.Metrics.Table(res.Names))
				if e := res.Area; e != nil {
					fmt.Fprintf(a.stdout, "area-adjusted (stratified sample, %s per map class): OA %.3f ± %.3f\n", sampleSize(ec.SamplePerClass), e.Accuracy, e.AccuracyCI)
					fmt.Fprintf(a.stdout, "%-26s %18s %16s %16s\n", "class", "area share", "user's", "producer's")
					for i, name := range res.Names {
						if e.MapPixels[i] == 0 && e.Proportion[i] == 0 {
							continue
						}
						fmt.Fprintf(a.stdout, "%-26s %8.4f ± %7.4f %s %s\n", name, e.Proportion[i], e.ProportionCI[i], withCI(e.User[i], e.UserCI[i]), withCI(e.Producer[i], e.ProducerCI[i]))
					}
				} else {
					fmt.Fprintf(a.stdout, "no area-adjusted estimate: %s\n", res.AreaSkipped)
				}
				fmt.Fprintf(a.stdout, "metrics: %s/metrics.json, chart: %s/confusion.png\n", res.Dir, res.Dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prediction, "prediction", "", "class map (class.tif from lulc predict)")
	cmd.Flags().StringVar(&labels, "labels", "", "reference labels, any grid")
	cmd.Flags().StringVar(&alg, "resampling", "mode", "how labels are warped onto the prediction's grid: mode or nearest")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory for metrics and chart")
	cmd.Flags().IntVar(&ec.SamplePerClass, "sample-per-class", ec.SamplePerClass, "labelled pixels sampled per map class for the area-adjusted estimates (0: every one)")
	cmd.Flags().BoolVar(&ec.Counts, "counts", false, "print pixel counts in the confusion chart's cells instead of each reference row's shares (%)")
	cmd.Flags().Uint64Var(&ec.Seed, "seed", ec.Seed, "seed of the stratified sample")
	cmd.Flags().StringVar(&ec.Split, "split", "", "compare only the validation pixels of this split plane (tiles/<tile>_split.npy of lulc export chips): the forest's held-out pixels")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	return cmd
}

// sampleSize names a per-class sample size, 0 being every pixel.
func sampleSize(n int) string {
	if n == 0 {
		return "every pixel"
	}
	return fmt.Sprint(n)
}

// withCI formats an accuracy and its 95 % interval, "n/a" where it is
// undefined.
func withCI(v, ci float64) string {
	if math.IsNaN(v) {
		return fmt.Sprintf("%16s", "n/a")
	}
	return fmt.Sprintf("%7.4f ± %6.4f", v, ci)
}
