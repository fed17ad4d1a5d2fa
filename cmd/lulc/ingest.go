package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

const defaultIngestConfig = "ingest-tiny.yaml"

func newIngestCmd(a *app) *cobra.Command {
	var cfgPath, out, catalogOverride, baseURL string
	var force bool
	var device string
	cmd := &cobra.Command{
		Use:   "ingest --out DIR [--config configs/ingest-<name>.yaml] [--catalog CATALOG]",
		Short: "Find scenes through STAC and build cloud-free, labelled stacks per tile",
		Long: `ingest searches a STAC API or crawls a static catalog for Sentinel-2 L2A items over
an area and date range, reads their COGs through GDAL in windows, resamples every
band to one grid, masks clouds with SCL, and writes per tile a median composite
(stack.tif), ESA WorldCover labels on the same grid (labels.tif), the number of
valid observations (valid_count.tif) and a manifest.

With source.labels (a vector layer: a path or a GDAL URL such as /vsicurl/…, and
source.label_field, its class-code attribute) the tiles are labelled by your own
points or polygons, burned onto each tile's grid, instead of a label collection;
see docs/ingest.md, "Vector labels for STAC sources".

With source.rasters instead of a catalog it stacks analysis-ready rasters
(an image and its labels per tile, on their own grid: no search, mask or
resampling); see docs/ingest.md, "Analysis-ready rasters".

Without --config it uses the embedded ` + defaultIngestConfig + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			base, err := checkBaseURL(baseURL)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(cfgPath, defaultIngestConfig, config.ParseIngestConfig)
			if err != nil {
				return err
			}
			if catalogOverride != "" {
				cfg.Source.Catalog, cfg.Source.API = catalogOverride, ""
			}
			devs, err := a.openDevice(device)
			if err != nil {
				return err
			}
			defer devs.Close()
			res, err := ingest.Ingest(cmd.Context(), cfg, stage.Options{Compare: a.compare, GPUs: devs,
				Out: out, Inputs: []string{cfgPath}, Force: force, BreakLock: a.breakLock, Log: a.log, Version: lulcVersion(),
				NewBar: a.newBar, BaseURL: base,
			})
			if err != nil {
				return fmt.Errorf("ingest: %w", err)
			}
			if a.summary(res) {
				secs := res.Elapsed.Seconds()
				fmt.Fprintf(a.stdout, "ingested %d tile(s) into %s in %s (%.0f MB decoded, %.1f MB/s)\n",
					len(res.Tiles), res.Dir, res.Elapsed.Round(time.Millisecond), float64(res.DecodedBytes)/1e6, float64(res.DecodedBytes)/1e6/secs)
				if len(devs) > 0 {
					fmt.Fprintf(a.stdout, "  device busy %.2f s (%.0f %% of the wall time)\n", res.DeviceBusy.Seconds(), 100*res.DeviceBusy.Seconds()/secs)
				}
				for _, t := range res.Tiles {
					fmt.Fprintf(a.stdout, "  %s: %d dates, %d pixels, %.1f %% without a valid observation: %s/stack.tif\n",
						t.Tile, t.Dates, t.Pixels, 100*t.NoValidFrac, t.Dir)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "ingest config (default: embedded "+defaultIngestConfig+")")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (must not exist unless --force)")
	cmd.Flags().StringVar(&catalogOverride, "catalog", "", "static STAC catalog to read instead of the config's source")
	addDeviceFlag(cmd, &device)
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	baseURLFlag(cmd, &baseURL)
	return cmd
}
