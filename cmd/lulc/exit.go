package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes: what scripts and schedulers (Slurm, Kubernetes, AWS Batch)
// branch on.
const (
	exitOK          = 0
	exitFailure     = 1   // the work failed: bad input, I/O, a device error
	exitUsage       = 2   // the command line itself is wrong
	exitInterrupted = 130 // SIGINT or SIGTERM stopped the work (128 + 2)
)

// usageError marks a mistake in the command line: an unknown command or
// flag, a missing or contradictory flag, a flag value that cannot be.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usage error with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// noArgs is cobra.NoArgs reporting a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}

// exitCode maps the outcome of a command to the process's exit code. ctx
// is the signal context: once it is done, the run was interrupted, whatever
// error the interrupted stage returned.
func exitCode(ctx context.Context, err error) int {
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, new(usageError)):
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command"), strings.Contains(err.Error(), "flags in the group"):
		// cobra's own command-line checks, returned as plain errors.
		return exitUsage
	}
	return exitFailure
}
