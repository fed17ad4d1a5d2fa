package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/bench"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/report/charts"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

const defaultTrainConfig = "train-demo.yaml"

func newTrainCmd(a *app) *cobra.Command {
	var cfgPath, out, engine, stack, work string
	var force bool
	var device string
	var draws []string
	var compare string
	cmd := &cobra.Command{
		Use:   "train --out DIR [--config configs/train-<name>.yaml] [--engine lulc|golearn] [--stack DIR | --samples DRAWS...]",
		Short: "Sample labelled pixels, train a random forest and measure it on a held-out split",
		Long: `train computes the configured features from an ingest stack (or image/label rasters),
draws stratified samples with a spatially blocked train/validation split, fits lulc's
histogram forest (or golearn's, with --engine golearn), and writes a run directory:
the model, samples, metrics (JSON), a confusion-matrix and a feature-importance chart,
the resolved config and the versions and input checksums. With --compare sklearn it
also fits scikit-learn's RandomForestClassifier (python3 with sklearn) on the same
samples with the same trees, depth, features per split, leaf size, bootstrap and seed,
and reports both validation accuracies (compare-sklearn.json in the run directory).

With --samples (input.samples) it trains on the draws of a job's sample phase
(lulc run --phase sample --shard i/n writes OUT/draws/i-of-n/draw.lulcd): draw files,
or directories searched for them. It merges them into the samples one process
would have drawn over every tile, and fits the model that process's lulc run would.

Without --config it uses the embedded ` + defaultTrainConfig + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			cfg, err := loadConfig(cfgPath, defaultTrainConfig, config.ParseTrainConfig)
			if err != nil {
				return err
			}
			if engine != "" {
				cfg.Engine = engine
			}
			if stack != "" {
				cfg.Input.Stack = stack
			}
			if len(draws) > 0 {
				// The draws replace the config's input: its stack or
				// rasters, and their bands and scaling, are what the
				// sample phase read.
				cfg.Input = config.TrainConfig{}.Input
				cfg.Input.Samples = draws
				if stack != "" {
					return usagef("--stack and --samples: give one input")
				}
			}
			if compare != "" && compare != "sklearn" {
				return usagef("--compare: %q is not sklearn", compare)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if err := checkObjects(out, cfg.Input.Samples...); err != nil {
				return err
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			var cmp *bench.Comparison
			task := pipeline.TrainTask{Config: cfg, Out: out, Work: work}
			if compare != "" {
				task.Finish = func(ctx context.Context, res train.Result) error {
					c, err := bench.CompareSklearn(ctx, res.Dir, cfg.Forest, res.Metrics.Accuracy, "")
					cmp = &c
					return err
				}
			}
			res, err := pipeline.RunTrain(cmd.Context(), task, stage.Options{Compare: a.compare, GPUs: devs, Inputs: []string{cfgPath}, Force: force,
				BreakLock: a.breakLock, Log: a.log, Version: lulcVersion(), NewBar: a.newBar, Golearn: bench.Golearn, Charts: charts.Drawer{}})
			if err != nil {
				return err
			}
			// Training logged its warnings as they came (before the fit).
			if a.summary(res) {
				fmt.Fprintf(a.stdout, "engine %s: %d training / %d validation samples, sampled in %s, fitted in %s\n",
					res.Engine, res.Samples, res.Validation, res.Sample.Round(1e6), res.Fit.Round(1e6))
				fmt.Fprint(a.stdout, res.Metrics.Table(res.ClassNames))
				if res.Engine == "golearn" {
					// golearn's forest has no file format lulc can predict
					// with: the run measures it against lulc's, nothing more.
					fmt.Fprintf(a.stdout, "run: %s (metrics.json, confusion.png; golearn writes no model: predict needs --engine lulc)\n", res.Dir)
				} else {
					fmt.Fprintf(a.stdout, "run: %s (model.lulcrf, metrics.json, confusion.png, importance.png)\n", res.Dir)
				}
				if cmp != nil {
					fmt.Fprintf(a.stdout, "validation accuracy: %s %.4f, scikit-learn %s %.4f (%+.2f points; scikit-learn fitted in %.2f s)\n",
						res.Engine, cmp.Lulc, cmp.SklearnVersion, cmp.Sklearn, cmp.Difference, cmp.SklearnFit)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "train config (default: embedded "+defaultTrainConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "run directory (must not exist unless --force)")
	cmd.Flags().StringVar(&engine, "engine", "", "lulc (default) or golearn, overriding the config")
	cmd.Flags().StringVar(&stack, "stack", "", "ingest output to train on, overriding input.stack")
	cmd.Flags().StringVar(&compare, "compare", "", "sklearn: also fit scikit-learn's random forest on the same samples and compare accuracies")
	cmd.Flags().StringSliceVar(&draws, "samples", nil, "sample-phase draws to merge and train on (draw.lulcd files or directories of them), overriding the config's input")
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing run directory")
	addWorkFlag(cmd, &work)
	return cmd
}
