package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/scale/exchange"
	"github.com/lulc/lulc/stage"
)

func newCollectCmd(a *app) *cobra.Command {
	var out, work string
	cmd := &cobra.Command{
		Use:   "collect --out DIR",
		Short: "Gather an array job's tasks into one STAC collection, mosaics and a job report",
		Long: `collect reads the tasks that lulc run --shard i/n wrote under DIR/shards/i-of-n and
checks that every task of the job left a complete output of the same job, every file of
which matches the task's commit record (commit.json: sizes and BLAKE3 checksums) and none
of which the record leaves out. It then writes DIR/collection: collection.json
(the STAC collection that every task's items name, linking each of them), VRT mosaics of the class maps and
confidences per CRS (class-<EPSG>.vrt, confidence-<EPSG>.vrt; where neighbouring tiles
overlap, the later in name order wins), and report.json and report.md (per tile: task,
device, accuracy, area of applicability, stage times). A missing task or a file that
does not match its task's record fails it (exit 1), each named with the --shard that
redoes it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: the job's output directory (the one the tasks were given)")
			}
			// A job in object storage is collected in a workspace
			// (pipeline.RunCollect): the collection's prefix must be a
			// valid one, and the store's credentials stay out of logs.
			if exchange.IsURL(out) {
				if err := checkObjects(exchange.Join(out, stage.CollectDir)); err != nil {
					return err
				}
			}
			res, err := pipeline.RunCollect(cmd.Context(), pipeline.CollectTask{Out: out, Work: work},
				stage.Options{Compare: a.compare, Log: a.log, BreakLock: a.breakLock})
			if err != nil {
				return err
			}
			if a.summary(res) {
				fmt.Fprintf(a.stdout, "collected %d tile(s) from %d task(s) into %s; mosaics: %v\n", len(res.Tiles), res.Shards, res.Dir, res.Mosaics)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the job's output directory, holding shards/i-of-n (or its s3:// prefix)")
	addWorkFlag(cmd, &work)
	return cmd
}
