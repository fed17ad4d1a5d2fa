package main

import (
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/scale/exchange"
)

// addWorkFlag adds --work, the parent of a command's workspace.
func addWorkFlag(cmd *cobra.Command, work *string) {
	cmd.Flags().StringVar(work, "work", "", "with s3:// outputs or inputs: the local directory to work in (default $TMPDIR); the work is removed once uploaded")
}

// checkObjects, when the output or an input is an object, refuses an
// object-storage output that is no valid prefix (a usage error) and keeps
// the store's credentials, which GDAL reads from the environment, out of
// every log and report.
func checkObjects(out string, inputs ...string) error {
	if !exchange.IsURL(out) && !slices.ContainsFunc(inputs, exchange.IsURL) {
		return nil
	}
	if exchange.IsURL(out) {
		if err := exchange.Check(out); err != nil {
			return usagef("--out: %v", err)
		}
	}
	redact.Add(os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	return nil
}
