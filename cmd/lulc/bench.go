package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/bench"
	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

const defaultBenchConfig = "bench-demo.yaml"

func newBenchCmd(a *app) *cobra.Command {
	var cfgPath, out, engines string
	var repeat int
	var force bool
	cmd := &cobra.Command{
		Use:   "bench --out DIR [--config configs/bench-<name>.yaml] [--engines cpu,golearn,gpu] [--repeat N]",
		Short: "Run the whole job once per engine and report wall time, accuracy, reproducibility and cost",
		Long: `bench runs ingest → train → predict → evaluate on identical inputs for each engine
(cpu: lulc's forest on the CPU; golearn: golearn's forest, training only; gpu: the GPU
twins, when a GPU is usable), repeats it, and writes report.json, report.md,
report.html and stages.png: stage times (medians), speed-ups, throughput, accuracy,
whether repeats and CPU/GPU outputs are byte-identical, the hardware and cost.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			cfg, err := loadConfig(cfgPath, defaultBenchConfig, bench.ParseConfig)
			if err != nil {
				return err
			}
			if engines != "" {
				cfg.Engines = strings.Split(engines, ",")
			}
			if repeat > 0 {
				cfg.Repeat = repeat
			}
			raw := redact.String(fmt.Sprintf("lulc %s", strings.Join(os.Args[1:], " ")))
			rep, err := bench.Run(cmd.Context(), cfg, raw, stage.Options{Compare: a.compare, Out: out, Inputs: []string{cfgPath}, Force: force, BreakLock: a.breakLock, Log: a.log, Version: lulcVersion()})
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			if a.summary(rep) {
				for _, e := range rep.Engines {
					if e.Skipped != "" {
						fmt.Fprintf(a.stdout, "%-8s skipped: %s\n", e.Engine, e.Skipped)
						continue
					}
					onePass := ""
					if e.OnePass > 0 {
						onePass = fmt.Sprintf("  one pass (lulc run) %.2f s", e.OnePass)
					}
					fmt.Fprintf(a.stdout, "%-8s per command %.2f s%s  OA %.4f  kappa %.4f\n", e.Engine, e.Total, onePass, e.Accuracy, e.Kappa)
				}
				fmt.Fprintf(a.stdout, "report: %s/report.md, %s/report.html, chart %s/stages.png\n", out, out, out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "bench config (default: embedded "+defaultBenchConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "report directory")
	cmd.Flags().StringVar(&engines, "engines", "", "comma-separated engines, overriding the config (cpu, golearn, gpu)")
	cmd.Flags().IntVar(&repeat, "repeat", 0, "repeats per engine, overriding the config")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing report directory")
	cmd.AddCommand(newBenchForestCmd(a), newBenchDecodeCmd(a), newBenchTemporalRealCmd(a))
	return cmd
}

func newBenchDecodeCmd(a *app) *cobra.Command {
	var out, device string
	var threads int
	var force bool
	cmd := &cobra.Command{
		Use:   "decode DIR --out DIR [--threads N] [--device gpu]",
		Short: "Time decoding every compressed tile of the GeoTIFFs under a directory: GDAL, lulc's Go decoder and the GPU",
		Long: `bench decode reads the compressed tiles of every tiled single-band GeoTIFF under DIR (a
synthetic scene from lulc synth, or downloaded COGs) and decodes each full-resolution tile:
through GDAL on --threads threads (each with its own handles), through lulc's Go decoder
(package decode) on as many, and, with --device gpu, with lulc's CUDA kernels at 1, 2, 4
and 8 tiles a block, then with the transfers. The device's samples are compared with the Go
decoder's byte for byte. It writes report.json and report.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			if threads < 0 {
				return usagef("--threads: %d is negative", threads)
			}
			if err := atomicfs.CheckInputs(out, args[0]); err != nil {
				return usageError{err}
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			stage, err := atomicfs.Begin(cmd.Context(), out, force, a.breakLock, "decode bench")
			if err != nil {
				return err
			}
			defer stage.Release()
			cmdline := redact.String(fmt.Sprintf("lulc %s", strings.Join(os.Args[1:], " ")))
			var dev *cuda.Device
			if len(devs) > 0 {
				dev = devs[0]
			}
			rep, err := bench.Decode(cmd.Context(), args[0], threads, dev, cmdline, lulcVersion())
			if err != nil {
				return err
			}
			body, _ := json.MarshalIndent(rep, "", "  ")
			if err := atomicfs.WriteFile(stage.Path("report.json"), append(body, '\n')); err != nil {
				return err
			}
			if err := atomicfs.WriteFile(stage.Path("report.md"), []byte(bench.DecodeMarkdown(rep))); err != nil {
				return err
			}
			if err := stage.Commit(); err != nil {
				return err
			}
			if a.summary(rep) {
				fmt.Fprintf(a.stdout, "%d tiles, %.2f GB decoded\n", rep.Tiles, float64(rep.Decoded)/1e9)
				for _, r := range rep.Runs {
					fmt.Fprintf(a.stdout, "%-32s %8.3f s  %6.2f GB/s\n", r.Engine, r.Seconds, r.GBps)
				}
				if rep.GPUSameAsTwin != nil {
					fmt.Fprintf(a.stdout, "device identical to the Go decoder: %v\n", *rep.GPUSameAsTwin)
				}
				fmt.Fprintf(a.stdout, "report: %s/report.md\n", out)
			}
			if rep.GPUSameAsTwin != nil && !*rep.GPUSameAsTwin {
				return fmt.Errorf("bench decode: the device's samples differ from the Go decoder's (report in %s)", out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "report directory")
	cmd.Flags().IntVar(&threads, "threads", 0, "host threads for GDAL and the Go decoder (default: every CPU)")
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing report directory")
	return cmd
}

const defaultForestBenchConfig = "bench-forest-demo.yaml"

func newBenchForestCmd(a *app) *cobra.Command {
	var cfgPath, out, engines, stack, sizes, device string
	var force bool
	cmd := &cobra.Command{
		Use:   "forest --out DIR [--config configs/bench-forest-<name>.yaml] [--stack DIR] [--sizes 1000000,...] [--engines gpu,cpu,golearn,sklearn]",
		Short: "Time forest training per engine at several sample sizes on the same pixels",
		Long: `bench forest reads every labelled pixel of a train config's inputs, splits them by
spatial blocks, and fits nested seeded subsets of each size with each engine: gpu (lulc's
GPU forest), cpu (lulc's forest on all cores), golearn and scikit-learn (through python3,
fed .npy files), all with the train config's forest parameters. It writes report.json and
report.md: fit times, validation accuracy, speed-ups and whether GPU and CPU trees agree.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			cfg, err := loadConfig(cfgPath, defaultForestBenchConfig, bench.ParseForestConfig)
			if err != nil {
				return err
			}
			if engines != "" {
				cfg.Engines = strings.Split(engines, ",")
			}
			if sizes != "" {
				cfg.Sizes = nil
				for _, s := range strings.Split(sizes, ",") {
					n, err := strconv.Atoi(s)
					if err != nil || n < 2 {
						return usagef("--sizes: %q is not a row count of at least 2", s)
					}
					cfg.Sizes = append(cfg.Sizes, n)
				}
			}
			raw, err := yaml.Marshal(cfg)
			if err != nil {
				return err
			}
			if cfg, err = bench.ParseForestConfig(raw); err != nil {
				return err
			}
			traw, err := configs.Find(cfg.Train)
			if err != nil {
				return fmt.Errorf("train config %s: %w", cfg.Train, err)
			}
			tcfg, err := config.ParseTrainConfig(traw)
			if err != nil {
				return fmt.Errorf("train config %s: %w", cfg.Train, err)
			}
			if stack != "" {
				tcfg.Input.Stack = stack
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			cmdline := redact.String(fmt.Sprintf("lulc %s", strings.Join(os.Args[1:], " ")))
			rep, err := bench.Forest(cmd.Context(), cfg, tcfg, cmdline, stage.Options{Compare: a.compare, GPUs: devs, Out: out, Inputs: []string{cfgPath, cfg.Train}, Force: force, BreakLock: a.breakLock, Log: a.log, Version: lulcVersion()})
			if err != nil {
				return fmt.Errorf("bench forest: %w", err)
			}
			if a.summary(rep) {
				for _, f := range rep.Fits {
					if f.Skipped != "" {
						fmt.Fprintf(a.stdout, "%10d %-8s not run: %s\n", f.Rows, f.Engine, f.Skipped)
						continue
					}
					fmt.Fprintf(a.stdout, "%10d %-8s fit %8.2f s  accuracy %.4f\n", f.Rows, f.Engine, f.FitSec, f.Accuracy)
				}
				fmt.Fprintf(a.stdout, "report: %s/report.md\n", out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "forest bench config (default: embedded "+defaultForestBenchConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "report directory")
	cmd.Flags().StringVar(&stack, "stack", "", "ingest output to read, overriding the train config's input.stack")
	cmd.Flags().StringVar(&sizes, "sizes", "", "comma-separated training row counts, overriding the config")
	cmd.Flags().StringVar(&engines, "engines", "", "comma-separated engines, overriding the config (gpu, cpu, golearn, sklearn)")
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing report directory")
	return cmd
}

const defaultTemporalRealTrain = "train-real.yaml"

func newBenchTemporalRealCmd(a *app) *cobra.Command {
	var data, out, trainCfg, seeds, engines, python string
	var folds, jobs int
	var force bool
	cmd := &cobra.Command{
		Use:   "temporal-real --data DIR --out DIR [--train configs/train-<name>.yaml] [--seeds 1,2,3] [--folds 5] [--engines lulc,sklearn]",
		Short: "Compare a median NDVI with NDVI percentiles and seasonal medians on a real series, leave-polygon-out",
		Long: `bench temporal-real reads an NDVI series with cloud masks and polygon labels laid out as
eo-learn's Slovenian test patch (NDVI.tif, CLM.tif with 1 = cloud, timestamps.json, LULC.gpkg
with fields LULC_ID and LULC_NAME, and its rasterisation LULC.tif, in ../shared/data/
eolearn-slovenia-testpatch), rasterises the polygons with lulc and compares them with LULC.tif,
and computes per labelled pixel, over the clear dates, the median NDVI (composite.Median), the
10th to 90th NDVI percentiles and the four seasons' medians (composite.Temporal). Each feature
set is cross-validated by group k-fold over the polygons (each polygon's pixels in one fold,
folds dealt by a seeded hash) with lulc's forest and scikit-learn's, once per seed, with the
train config's forest parameters. It writes report.json and report.md: OA, kappa, macro-F1
and per-class F1 per set and engine, mean and spread over the seeds.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			if data == "" {
				return usagef("--data: no folder given (../shared/data/eolearn-slovenia-testpatch)")
			}
			tcfg, err := loadConfig(trainCfg, defaultTemporalRealTrain, config.ParseTrainConfig)
			if err != nil {
				return err
			}
			cfg := bench.DefaultTemporalReal(data, tcfg.Forest)
			cfg.Folds, cfg.Python, cfg.Jobs = folds, python, jobs
			if seeds != "" {
				cfg.Seeds = nil
				for _, s := range strings.Split(seeds, ",") {
					n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
					if err != nil {
						return usagef("--seeds: %q is not a seed (a non-negative integer)", s)
					}
					cfg.Seeds = append(cfg.Seeds, n)
				}
			}
			if engines != "" {
				cfg.Engines = strings.Split(engines, ",")
			}
			if err := cfg.Check(); err != nil {
				return usageError{err}
			}
			cmdline := redact.String(fmt.Sprintf("lulc %s", strings.Join(os.Args[1:], " ")))
			rep, err := bench.TemporalReal(cmd.Context(), cfg, cmdline, stage.Options{Compare: a.compare, Out: out, Inputs: []string{trainCfg}, Force: force, BreakLock: a.breakLock, Log: a.log, Version: lulcVersion()})
			if err != nil {
				return fmt.Errorf("bench temporal-real: %w", err)
			}
			if a.summary(rep) {
				fmt.Fprintf(a.stdout, "rasterisation: %d of %d pixels differ from LULC.tif\n", rep.Raster.Differ, rep.Raster.Pixels)
				for _, s := range rep.Sets {
					for _, m := range s.Summary {
						fmt.Fprintf(a.stdout, "%-26s %-8s OA %.3f ± %.3f  kappa %.3f ± %.3f  macro-F1 %.3f ± %.3f\n", s.Name, m.Engine,
							m.Accuracy.Mean, m.Accuracy.SD, m.Kappa.Mean, m.Kappa.SD, m.MacroF1.Mean, m.MacroF1.SD)
					}
				}
				fmt.Fprintf(a.stdout, "report: %s/report.md\n", out)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "folder of the NDVI series and polygons")
	cmd.Flags().StringVarP(&out, "out", "o", "", "report directory")
	cmd.Flags().StringVar(&trainCfg, "train", "", "train config whose forest parameters to use (default: embedded "+defaultTemporalRealTrain+")")
	cmd.Flags().StringVar(&seeds, "seeds", "", "comma-separated seeds of the folds and forests (default 1,2,3)")
	cmd.Flags().IntVar(&folds, "folds", 5, "folds of polygons")
	cmd.Flags().StringVar(&engines, "engines", "", "comma-separated engines (default lulc,sklearn)")
	cmd.Flags().StringVar(&python, "python", "", "python3 with scikit-learn (default: python3 or /usr/bin/python3, whichever has it)")
	cmd.Flags().IntVar(&jobs, "jobs", 0, "scikit-learn's n_jobs (0: every CPU)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing report directory")
	return cmd
}
