package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/synth"
)

const defaultSynthConfig = "synth-tiny.yaml"

func newSynthCmd(a *app) *cobra.Command {
	var cfgPath, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "synth --out DIR [--config configs/synth-<size>.yaml]",
		Short: "Generate a synthetic Sentinel-2 L2A + WorldCover scene with a STAC catalog",
		Long: `synth writes a realistic synthetic scene as users' data is laid out: one COG per
Sentinel-2 band and date with SCL, WorldCover-like labels in EPSG:4326, and a static
STAC catalog over both. The same config gives the same bytes.

Without --config it uses the embedded ` + defaultSynthConfig + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			cfg, err := loadConfig(cfgPath, defaultSynthConfig, synth.ParseConfig)
			if err != nil {
				return err
			}
			if err := atomicfs.CheckInputs(out, cfgPath); err != nil {
				return err
			}
			res, err := synth.Run(cmd.Context(), cfg, synth.Options{GDALCOG: a.compare.GDALCOG,
				Out: out, Force: force, BreakLock: a.breakLock, Log: a.log,
				NewBar: a.newBar,
			})
			if err != nil {
				return fmt.Errorf("synth: %w", err)
			}
			if a.summary(res) {
				fmt.Fprintf(a.stdout, "scene %s: %d acquisitions + labels, %d rasters (%.1f MB), generated in %s, encoded in %s\ncatalog: %s/catalog.json\n",
					res.Dir, len(res.ItemIDs), res.Files, float64(res.OutBytes)/1e6,
					res.Generate.Round(time.Millisecond), res.Write.Round(time.Millisecond), res.Dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "scene config (default: embedded "+defaultSynthConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (must not exist unless --force)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	return cmd
}
