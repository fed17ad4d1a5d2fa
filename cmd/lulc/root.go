package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/netwait"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/stage"
)

// app holds what every command shares: output streams, the logger and the
// verbosity flags.
type app struct {
	stdout, stderr io.Writer
	quiet, verbose bool
	breakLock      bool
	json           bool
	log            *slog.Logger
	// stall ends a network transfer that makes no progress for this
	// long; heartbeat is how often a wait on the network is logged.
	stall, heartbeat time.Duration
	// compare holds the LULC_* switches for comparing ways of working
	// (compareFromEnv), passed to every stage.
	compare stage.Compare
}

// summary prints a command's result as JSON on stdout with --json, in
// --json's one schema (jsonView: snake_case keys, durations in seconds),
// and says whether the command should print its text summary instead
// (not with --quiet or --json).
func (a *app) summary(result any) bool {
	if !a.json {
		return !a.quiet
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jsonView(result)); err != nil {
		a.log.Error("summary as JSON", "err", err)
	}
	return false
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "lulc",
		Short: "Land-cover maps from Sentinel-2 imagery, fast, on GPUs",
		Long: `lulc turns Sentinel-2 L2A imagery and ESA WorldCover labels into land-cover maps.
Each stage is a subcommand driven by a checked-in YAML config.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd); err != nil {
				return usageError{err}
			}
			var err error
			if a.compare, err = compareFromEnv(os.Getenv); err != nil {
				return usageError{err}
			}
			if a.quiet && a.verbose && !(cmd.Flags().Changed("quiet") && cmd.Flags().Changed("verbose")) {
				// -q -v is refused by cobra (its own message); the
				// environment must not reach what the command line cannot.
				return usagef("%s and %s contradict each other: give one", flagSource(cmd, "quiet"), flagSource(cmd, "verbose"))
			}
			level := slog.LevelInfo
			switch {
			case a.quiet:
				level = slog.LevelError
			case a.verbose:
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: redactAttr}))
			return a.watchNetwork(cmd.Context())
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().BoolVarP(&a.quiet, "quiet", "q", false, "log errors only and show no progress bars")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "log debug detail")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print the command's result as JSON on stdout (snake_case keys, durations in seconds; docs/json.md) instead of the text summary; on failure, {\"error\", \"exit_code\"}")
	root.PersistentFlags().BoolVar(&a.breakLock, "break-lock", false, "take over the output's lock even if another writer holds it (for one known to be gone, on another host)")
	root.PersistentFlags().DurationVar(&a.stall, "stall-timeout", defaultStall, "give up a network read or upload (GDAL: COGs, vector labels, s3:// objects) that makes no progress for this long")
	root.PersistentFlags().DurationVar(&a.heartbeat, "heartbeat", netwait.DefaultInterval, "log a line this often while lulc waits on the network")
	root.MarkFlagsMutuallyExclusive("quiet", "verbose")
	// `lulc completion bash|zsh|fish|powershell` prints a shell completion
	// script; --version prints the version line.
	root.Version = lulcVersion()
	root.SetVersionTemplate("lulc {{.Version}}\n")
	root.AddCommand(newVersionCmd(a), newSynthCmd(a), newIngestCmd(a), newTrainCmd(a), newPredictCmd(a), newEvaluateCmd(a), newPlanCmd(a), newRunCmd(a), newCollectCmd(a), newExportCmd(a), newImportCmd(a), newDoctorCmd(a), newBenchCmd(a), newConfigCmd(a), newValidateCmd(a), newViewCmd(a))
	addHelp(root)
	return root
}

// defaultStall is --stall-timeout's default. GDAL may send two or three
// requests for one file (a HEAD, a range, a retry of it), each ended
// after this long without progress, so that a server that stops
// answering fails a read within 90 s and the run's log says so every
// 20 s meanwhile; a server that sends nothing for 30 s is not coming back.
const defaultStall = 30 * time.Second

// watchNetwork applies --stall-timeout to GDAL's network transfers
// (process-wide: they run on GDAL's threads) and logs, every
// --heartbeat, the waits on the network that last, until ctx is done.
func (a *app) watchNetwork(ctx context.Context) error {
	if a.stall < time.Second {
		return usagef("--stall-timeout %s: at least 1s (GDAL counts whole seconds)", a.stall)
	}
	if a.heartbeat <= 0 {
		return usagef("--heartbeat %s: must be positive", a.heartbeat)
	}
	if err := raster.SetConfig(raster.StallOptions(a.stall)); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	go netwait.Watch(ctx, a.log, a.heartbeat)
	return nil
}

// flagsFromEnv sets every flag of cmd not given on the command line from
// the environment variable LULC_<NAME> (upper case, dashes as
// underscores), when it is set: LULC_DEVICE=gpu, LULC_OUT=…, LULC_QUIET=1.
// The command line wins over the environment, the environment over the
// config's defaults.
func flagsFromEnv(cmd *cobra.Command) error {
	var errs []error
	// A subcommand's flags include the inherited ones once parsed: each
	// flag is set, and its error said, once.
	seen := map[string]bool{}
	set := func(f *pflag.Flag) {
		if f.Changed || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		name := "LULC_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q for --%s: %w", name, v, f.Name, err))
			}
		}
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return errors.Join(errs...)
}

// flagSource names where a flag's value came from: the command line
// (--name) or its environment variable (LULC_NAME), which flagsFromEnv
// sets without marking the flag changed.
func flagSource(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
		return "--" + name
	}
	return "LULC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// redactAttr keeps credentials out of log lines: messages, string values
// and errors go through redact.String.
func redactAttr(_ []string, at slog.Attr) slog.Attr {
	switch v := at.Value; v.Kind() {
	case slog.KindString:
		at.Value = slog.StringValue(redact.String(v.String()))
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			at.Value = slog.StringValue(redact.String(err.Error()))
		}
	}
	return at
}

// bar is a progress bar on stderr, or a silent one with --quiet.
type bar struct{ *progressbar.ProgressBar }

func (b bar) Add(n int) error { return b.ProgressBar.Add(n) }

// newBar shows a bar on a terminal; redirected to a file or a log (Slurm,
// Kubernetes), where carriage-return redraws would bury the log lines, a
// plain line at most every 10 s (logBar); nothing with --quiet, or when
// stderr is not a file (lulc called in process).
func (a *app) newBar(total int64, desc string) progress.Bar {
	f, ok := a.stderr.(*os.File)
	if a.quiet || !ok {
		return bar{progressbar.DefaultSilent(total, desc)}
	}
	if !term.IsTerminal(int(f.Fd())) {
		return newLogBar(a.stderr, total, desc, time.Now)
	}
	return bar{progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200_000_000),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { io.WriteString(a.stderr, "\n") }),
		progressbar.OptionClearOnFinish(),
	)}
}

// loadConfig reads the config at path (a file, or else an embedded
// config of that name), or the embedded default when path is empty, with
// the stage's parser.
func loadConfig[T any](path, embedded string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	if path == "" {
		raw, err := configs.Read(embedded)
		if err != nil {
			return zero, err
		}
		cfg, err := parse(raw)
		if err != nil {
			return zero, fmt.Errorf("embedded config %s: %w", embedded, err)
		}
		return cfg, nil
	}
	raw, err := configs.Find(path)
	if err != nil {
		return zero, err
	}
	cfg, err := parse(raw)
	if err != nil {
		return zero, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}
