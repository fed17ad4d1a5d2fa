package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/pipeline"
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
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: no output directory given")
			}
			cfg, err := loadConfig(cfgPath, defaultBenchConfig, pipeline.ParseBenchConfig)
			if err != nil {
				return err
			}
			if engines != "" {
				cfg.Engines = strings.Split(engines, ",")
			}
			if repeat > 0 {
				cfg.Repeat = repeat
			}
			raw := fmt.Sprintf("lulc %s", strings.Join(os.Args[1:], " "))
			rep, err := pipeline.Bench(cmd.Context(), cfg, raw, pipeline.Options{Out: out, Force: force, Log: a.log, Version: lulcVersion()})
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			if !a.quiet {
				for _, e := range rep.Engines {
					if e.Skipped != "" {
						fmt.Fprintf(a.stdout, "%-8s skipped: %s\n", e.Engine, e.Skipped)
						continue
					}
					fmt.Fprintf(a.stdout, "%-8s total %.2f s  OA %.4f  kappa %.4f\n", e.Engine, e.Total, e.Accuracy, e.Kappa)
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
	return cmd
}
