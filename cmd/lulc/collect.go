package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/scale/exchange"
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
			// A job in object storage: the committed tasks are
			// downloaded into a workspace, collected there, and the
			// collection uploaded beside them. A task without a commit is
			// missing, as on a shared filesystem.
			var ws *exchange.Workspace
			url := ""
			if exchange.IsURL(out) {
				var err error
				url = out
				if ws, err = newWorkspace(work, exchange.Join(url, pipeline.CollectDir), a.log); err != nil {
					return err
				}
				ws.SetURL(url)
				out = ws.Out()
				shards := exchange.Join(url, "shards")
				done, open, err := exchange.Committed(shards)
				if err != nil {
					return err
				}
				for _, n := range open {
					a.log.Warn("a task's prefix holds no commit (unfinished, or killed while it uploaded): missing", "url", exchange.Join(shards, n))
				}
				for _, n := range done {
					if _, err := ws.Pull(exchange.Join(shards, n), filepath.Join(out, "shards", n)); err != nil {
						return err
					}
				}
				if err := os.MkdirAll(filepath.Join(out, "shards"), 0o755); err != nil {
					return err
				}
			}
			res, err := pipeline.Collect(cmd.Context(), out, pipeline.Options{Compare: a.compare, Log: a.log, BreakLock: a.breakLock})
			if err != nil {
				return ws.Named(err)
			}
			if url != "" {
				if err := ws.Push(cmd.Context(), res.Dir, exchange.Join(url, pipeline.CollectDir)); err != nil {
					return ws.Named(err)
				}
				res.Dir = exchange.Join(url, pipeline.CollectDir)
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
