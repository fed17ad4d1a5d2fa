// Command lulc turns Sentinel-2 imagery into land-cover maps.
//
// Each stage is a subcommand driven by a YAML config; run `lulc --help` for
// the list.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv("LULC_CPUPROFILE"))
	stopTrace := startTrace(os.Getenv("LULC_TRACE"))
	done := make(chan int, 1)
	go func() { done <- run(ctx, os.Args[1:], os.Stdout, os.Stderr) }()
	code := awaitExit(ctx, done, interruptGrace, os.Stderr)
	stopTrace()
	stopProfile()
	writeHeapProfile(os.Getenv("LULC_MEMPROFILE"))
	stop()
	os.Exit(code)
}

// interruptGrace is how long a command may take to stop after SIGINT or
// SIGTERM. The stages stop at their next window, tree level or object,
// but a goroutine inside a GDAL call (a COG block or an upload over a
// stalled network) cannot be cancelled, and a window's features on the
// CPU take a while: the process exits without them, within 2 s of the
// signal as schedulers expect.
const interruptGrace = 1500 * time.Millisecond

// awaitExit returns the exit code that the command sends on done. Once
// ctx is done (SIGINT or SIGTERM) the command has grace to return; after
// that it is abandoned and the exit code is 130. Abandoning it commits
// nothing: outputs become final only through a staging area's commit,
// which the command did not reach, and the staging area and lock it
// leaves are resumed and taken over by the next run.
func awaitExit(ctx context.Context, done <-chan int, grace time.Duration, stderr io.Writer) int {
	select {
	case code := <-done:
		return code
	case <-ctx.Done():
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case code := <-done:
		return code
	case <-timer.C:
		fmt.Fprintf(stderr, "lulc: interrupted; the work in progress (a window's computation, a GDAL call, a network read or write) did not stop within %s and was abandoned, uncommitted: rerun to resume\n", grace)
		return exitInterrupted
	}
}

// startProfile writes a Go CPU profile of the whole command to path when
// it is set (LULC_CPUPROFILE: a developer's aid for the bundle on hosts
// without Go; see docs/benchmarks.md). Time inside GDAL and the CUDA
// driver shows as cgo and purego calls.
func startProfile(path string) (stop func()) {
	return startRecording("LULC_CPUPROFILE", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace writes a Go execution trace of the whole command to path when
// it is set (LULC_TRACE, beside LULC_CPUPROFILE): `go tool trace` shows
// every goroutine's time on a timeline, blocked, running or in GDAL and the
// CUDA driver, which a CPU profile cannot show (waiting costs no CPU).
func startTrace(path string) (stop func()) {
	return startRecording("LULC_TRACE", path, trace.Start, trace.Stop)
}

// startRecording creates path and starts a recorder writing to it (none
// when path is empty); stop ends the recording and closes the file. A file
// that cannot be made is reported under the variable's name, and the
// command runs unrecorded.
func startRecording(variable, path string, start func(io.Writer) error, end func()) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = start(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lulc: %s: %v\n", variable, err)
		return func() {}
	}
	return func() {
		end()
		f.Close()
	}
}

// writeHeapProfile writes Go's heap profile to path when it is set
// (LULC_MEMPROFILE, beside LULC_CPUPROFILE): `go tool pprof
// -sample_index=alloc_space` shows where the command allocated, which is
// what makes the collector run and the heap grow toward its limit.
func writeHeapProfile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lulc: LULC_MEMPROFILE: %v\n", err)
	}
}

// run executes one lulc command line and returns the process exit code:
// 0, 1 (failure), 2 (usage) or 130 (interrupted).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	// The command's context ends when it returns, which stops its
	// network watch; ctx stays the signal's, for the exit code.
	cmdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := root.ExecuteContext(cmdCtx)
	code := exitCode(ctx, err)
	if err != nil {
		msg := redact.String(err.Error())
		fmt.Fprintf(stderr, "lulc: %s\n", msg)
		if wantsJSON(root, args) {
			// --json's failure: an object on stdout, beside the text on
			// stderr, so that a caller reading stdout learns why.
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}{msg, code})
		}
	}
	return code
}

// wantsJSON says whether the command line or LULC_JSON asked for --json,
// also when the command failed before its flags or the environment were
// read (an unknown command: the arguments say it).
func wantsJSON(root *cobra.Command, args []string) bool {
	if f := root.PersistentFlags().Lookup("json"); f != nil && f.Value.String() == "true" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			if b, err := strconv.ParseBool(v); err == nil && b {
				return true
			}
		} else if a == "--json" {
			return true
		}
	}
	v, err := strconv.ParseBool(os.Getenv("LULC_JSON"))
	return err == nil && v
}
