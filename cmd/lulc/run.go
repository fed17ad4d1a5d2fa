package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/report/charts"
	"github.com/lulc/lulc/scale/exchange"
	"github.com/lulc/lulc/scale/shard"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

const defaultRunConfig = "run-demo.yaml"

func newRunCmd(a *app) *cobra.Command {
	var cfgPath, out, model, catalogOverride, device, shardFlag, planPath, phase, work, baseURL string
	var force, writeStack bool
	var shardCount int
	cmd := &cobra.Command{
		Use:   "run --out DIR [--config configs/run-<name>.yaml] [--model M] [--catalog CATALOG]",
		Short: "Map tiles in one pass: ingest, sample, train, predict and evaluate without stacks on disk",
		Long: `run takes tiles from their sources (STAC or analysis-ready rasters) to class maps,
confidence, per-tile metrics, STAC items and a job report in one pass over the pixels.
Each tile is read and composited once into memory; sampling, prediction and evaluation
read that composite. Without --model it first samples every tile and trains a model
into OUT/model (holding the composites in memory up to memory_gb, spilling the rest
raw), then maps each tile. With --model it ingests and maps tile after tile. As one task of an array job
(--shard i/n, or SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX or
COILED_BATCH_TASK_ID with the task count) it maps only its share of the tiles, balanced
by scene count, into OUT/shards/i-of-n; sharded runs need --model, or --phase sample:
the sample phase of a job that trains over many tasks, which only composites its
tiles and writes their draw into OUT/draws/i-of-n/draw.lulcd for lulc train --samples
OUT/draws to merge (the model is then byte for byte the one-process run's). The
stages are those of ingest, train, predict and evaluate, so the maps are theirs.
Outputs per tile land in OUT/<tile>/; outputs.stack (or --stack) also writes the
analysis-ready stack, encoded in the background.

Without --config it uses the embedded ` + defaultRunConfig + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			if phase != "" && phase != pipeline.PhaseSample {
				return usagef("--phase %q: the only phase is %s (without --phase, a run is the whole job)", phase, pipeline.PhaseSample)
			}
			rc, err := loadConfig(cfgPath, defaultRunConfig, pipeline.ParseRunConfig)
			if err != nil {
				return err
			}
			if writeStack && !rc.Outputs.Stack.Any() {
				rc.Outputs.Stack = config.StackFormats{config.StackCOG}
			}
			spec, sharded, err := shard.Resolve(shardFlag, shardCount, os.Getenv)
			if err != nil {
				return usagef("%v", err)
			}
			job, inputs, err := runJob(rc, model, phase, catalogOverride)
			if err != nil {
				return err
			}
			if sharded {
				job.Shard = spec
			}
			base, err := checkBaseURL(baseURL)
			if err != nil {
				return err
			}
			if base != "" && (sharded || phase != "") {
				return usagef("--base-url publishes a one-process run's collection; an array job's is lulc collect's")
			}
			if err := checkObjects(out, model, planPath); err != nil {
				return err
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(rc.HeapLimit(len(devs)))
			}
			res, err := pipeline.RunTask(cmd.Context(), pipeline.Task{Job: job, Out: out, Plan: planPath, Work: work},
				stage.Options{Compare: a.compare, GPUs: devs, Force: force, BreakLock: a.breakLock, Inputs: append([]string{cfgPath}, inputs...),
					Log: a.log, Version: lulcVersion(), NewBar: a.newBar, Charts: charts.Drawer{}, BaseURL: base})
			if err != nil {
				return err
			}
			if a.summary(res) {
				printRun(a, res, phase)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "run config (default: embedded "+defaultRunConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (must not exist unless --force)")
	cmd.Flags().StringVar(&model, "model", "", "map with this model (model.lulcrf) instead of training one")
	cmd.Flags().StringVar(&catalogOverride, "catalog", "", "static STAC catalog to read instead of the ingest config's source")
	cmd.Flags().BoolVar(&writeStack, "stack", false, "also write each tile's analysis-ready stack (outputs.stack)")
	baseURLFlag(cmd, &baseURL)
	cmd.Flags().StringVar(&planPath, "plan", "", "take the tiles and their scenes from this plan (lulc plan) instead of searching the source")
	cmd.Flags().StringVar(&shardFlag, "shard", "", "map only task i of n's tiles (i/n) into OUT/shards/i-of-n; default from the array job's variables (Slurm, Kubernetes, AWS Batch, Coiled)")
	cmd.Flags().StringVar(&phase, "phase", "", "sample: only draw this task's tiles' samples into OUT/draws/i-of-n (the sample phase of a job trained with lulc train --samples)")
	cmd.Flags().IntVar(&shardCount, "shard-count", 0, "the array job's task count, where its engine exports none (Kubernetes, Coiled)")
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	addWorkFlag(cmd, &work)
	return cmd
}

// runIngestConfig reads the ingest config a run config names, with the
// catalog given on the command line, if any, in place of its source.
func runIngestConfig(rc pipeline.RunConfig, catalogOverride string) (config.IngestConfig, error) {
	raw, err := configs.Find(rc.Ingest)
	if err != nil {
		return config.IngestConfig{}, fmt.Errorf("ingest config %s: %w", rc.Ingest, err)
	}
	cfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		return cfg, fmt.Errorf("ingest config %s: %w", rc.Ingest, err)
	}
	if catalogOverride != "" {
		cfg.Source.Catalog, cfg.Source.API = catalogOverride, ""
	}
	return cfg, nil
}

// runJob is the job a run config describes: its ingest config, with the
// catalog given on the command line, if any, in place of its source; its
// train config, unless a model is given; and the configs' paths, the
// run's inputs.
func runJob(rc pipeline.RunConfig, model, phase, catalogOverride string) (pipeline.Job, []string, error) {
	job := pipeline.Job{Config: rc, Model: model, Phase: phase}
	inputs := []string{rc.Ingest}
	var err error
	if job.Ingest, err = runIngestConfig(rc, catalogOverride); err != nil {
		return job, nil, err
	}
	if model == "" && rc.Train == "" {
		// Without a train config, the defaults train (lulc config show
		// --defaults train prints them).
		tc := config.DefaultTrainConfig()
		job.Train = &tc
	} else if model == "" {
		raw, err := configs.Find(rc.Train)
		if err != nil {
			return job, nil, fmt.Errorf("train config %s: %w", rc.Train, err)
		}
		tc, err := config.ParseTrainConfig(raw)
		if err != nil {
			return job, nil, fmt.Errorf("train config %s: %w", rc.Train, err)
		}
		job.Train = &tc
		inputs = append(inputs, rc.Train)
	}
	return job, inputs, nil
}

// printRun says what a run made: its tiles with their accuracy, the
// model, the devices' busy time; or, for a sample phase, its draw.
func printRun(a *app, res pipeline.RunResult, phase string) {
	if phase == pipeline.PhaseSample {
		fmt.Fprintf(a.stdout, "drew %d tile(s) into %s/%s in %s\n", len(res.Tiles), res.Dir, stage.DrawFile, res.Elapsed.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(a.stdout, "mapped %d tile(s) into %s in %s with %s\n", len(res.Tiles), res.Dir, res.Elapsed.Round(time.Millisecond), res.Model)
	if res.FirstMap > 0 {
		fmt.Fprintf(a.stdout, "first map after %s, then %s a tile\n", res.FirstMap.Round(time.Millisecond), res.PerTileAfter.Round(time.Millisecond))
	}
	if res.Train != nil {
		fmt.Fprintf(a.stdout, "model: %d training / %d validation samples, OA %.3f, fitted in %s\n",
			res.Train.Samples, res.Train.Validation, res.Train.Metrics.Accuracy, res.Train.Fit.Round(time.Millisecond))
	}
	for _, t := range res.Tiles {
		oa := "no labels"
		if t.Metrics != nil {
			oa = fmt.Sprintf("map OA %.3f, κ %.3f", t.Metrics.Accuracy, t.Metrics.Kappa)
		}
		state := ""
		if t.Skipped {
			state = " (kept from an earlier run)"
		}
		if len(res.Devices) > 1 && t.Device != "" {
			state += " on " + t.Device
		}
		fmt.Fprintf(a.stdout, "  %s: %d dates, %d pixels, %s%s\n", t.Tile, t.Dates, t.Pixels, oa, state)
	}
	for _, d := range res.Devices {
		fmt.Fprintf(a.stdout, "GPU %d (%s) busy %.1f s of %.1f s\n", d.Index, d.Name, d.Busy.Seconds(), res.Elapsed.Seconds())
	}
}

func newPlanCmd(a *app) *cobra.Command {
	var cfgPath, out, catalogOverride string
	var force bool
	cmd := &cobra.Command{
		Use:   "plan --out plan.json [--config configs/run-<name>.yaml] [--catalog CATALOG]",
		Short: "Resolve a job's tiles and their scenes once, into a plan file every task reads",
		Long: `plan searches the run config's ingest source (a STAC catalog or API) over its area and
dates once and writes the tiles and each tile's scenes, with the label items (none with
source.labels, a vector layer the config names), to a plan file (JSON, hrefs unsigned)
whose digest identifies the job. lulc run --plan maps exactly those tiles from those
scenes, even if the catalog changes while an array job runs, and refuses a plan made with
another ingest config or edited by hand. The plan file is never one of the
command's inputs nor inside their directories, and an existing one is replaced only
with --force (never a directory, a device, a FIFO or a symbolic link).

Without --config it uses the embedded ` + defaultRunConfig + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: the plan file to write")
			}
			rc, err := loadConfig(cfgPath, defaultRunConfig, pipeline.ParseRunConfig)
			if err != nil {
				return err
			}
			icfg, err := runIngestConfig(rc, catalogOverride)
			if err != nil {
				return err
			}
			if err := checkFileOut(out, force, append([]string{cfgPath, rc.Ingest}, icfg.Inputs()...)...); err != nil {
				return err
			}
			p, err := pipeline.MakePlan(cmd.Context(), icfg, stage.Options{Compare: a.compare, Log: a.log})
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if exchange.IsURL(out) {
				// One object, written whole: the plan's digest is its
				// own check, so it needs no commit.
				err = exchange.Put(out, p.Encode())
			} else {
				err = atomicfs.WriteFile(out, p.Encode())
			}
			if err != nil {
				return err
			}
			if a.summary(struct {
				Plan   string `json:"plan"`
				Digest string `json:"digest"`
				Tiles  int    `json:"tiles"`
				Scenes int    `json:"scenes"`
			}{out, p.Digest, len(p.Tiles), p.Scenes()}) {
				fmt.Fprintf(a.stdout, "plan %s: %d tile(s), %d scene(s), digest %s\n", out, len(p.Tiles), p.Scenes(), p.Digest)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "run config (default: embedded "+defaultRunConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "the plan file to write")
	cmd.Flags().StringVar(&catalogOverride, "catalog", "", "static STAC catalog to read instead of the ingest config's source")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing plan file")
	return cmd
}

// checkFileOut applies the rule of every lulc output to a single file
// (a plan, an ONNX model, a .npz): never one of the command's inputs nor
// inside an input directory (atomicfs.CheckInputs), never over an
// existing file without force, and never over anything but a regular
// file (atomicfs.CheckTarget). An object storage URL is the store's own.
func checkFileOut(out string, force bool, inputs ...string) error {
	if exchange.IsURL(out) {
		return nil
	}
	if err := atomicfs.CheckInputs(out, inputs...); err != nil {
		return err
	}
	return atomicfs.CheckTarget(out, false, force)
}
