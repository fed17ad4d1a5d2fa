// Command lulc turns Sentinel-2 imagery into land-cover maps.
//
// Each stage is a subcommand driven by a YAML config; run `lulc --help` for
// the list.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lulc/lulc/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one lulc command line and returns the process exit code:
// 0, 1 (failure), 2 (usage) or 130 (interrupted).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "lulc: %s\n", redact.String(err.Error()))
	}
	return exitCode(ctx, err)
}
