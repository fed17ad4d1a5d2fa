package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/scale/exchange"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// Task is what one lulc run process does: its job, where the output goes
// (a directory, or an object-storage prefix, s3://…) and the inputs that
// may be objects. A sharded job's task (Job.Shard.Count set) writes under
// the output's shards/i-of-n, or draws/i-of-n in the sample phase, so
// that tasks never write the same file.
type Task struct {
	Job Job
	// Out is the output directory or prefix.
	Out string
	// Plan is the path or URL of a plan (lulc plan) that gives the tiles
	// and their scenes; "" searches the ingest config's source.
	Plan string
	// Work is the parent of the local workspace used when the output or
	// an input is an object ("": the temporary directory).
	Work string
}

// TaskDir is the directory of a sharded job's task under the output,
// slash-separated ("" for the whole job).
func (j Job) TaskDir() string {
	if j.Shard.Count == 0 {
		return ""
	}
	sub := "shards"
	if j.Phase == PhaseSample {
		sub = "draws"
	}
	return path.Join(sub, fmt.Sprintf("%d-of-%d", j.Shard.Index, j.Shard.Count))
}

// RunTask runs a task's job (Run) into its output. With objects for the
// output or inputs it works in a local workspace: the task's committed
// objects, if any, are downloaded where its output goes, so that a rerun
// keeps an intact task as on a shared filesystem; the model and plan are
// downloaded; the output is uploaded and committed once complete, and the
// workspace removed. On failure the workspace is kept for a rerun on the
// same machine, and the error names the output's URL rather than its
// local stand-in. opt.Out is ignored: the output is t.Out's.
func RunTask(ctx context.Context, t Task, opt stage.Options) (RunResult, error) {
	job, out, plan := t.Job, t.Out, t.Plan
	task := job.TaskDir()
	var ws *exchange.Workspace
	outURL := ""
	if exchange.IsURL(out) || exchange.IsURL(job.Model) || exchange.IsURL(plan) {
		if exchange.IsURL(out) {
			outURL = out
			if task != "" {
				outURL = exchange.Join(out, task)
			}
		}
		var err error
		if ws, err = exchange.NewWorkspace(t.Work, outURL, opt.Log); err != nil {
			return RunResult{}, err
		}
		if outURL != "" {
			// The workspace's output is only ever this URL's: one left
			// by a run interrupted while it uploaded is uploaded, not
			// made again.
			job.KeepFinished = true
			out = ws.Out()
			if _, err := ws.Pull(outURL, filepath.Join(out, task)); err != nil {
				return RunResult{}, err
			}
		}
		if exchange.IsURL(job.Model) {
			job.ModelHref = job.Model
			if job.Model, err = ws.Fetch(job.Model); err != nil {
				return RunResult{}, err
			}
		}
		if exchange.IsURL(plan) {
			local := filepath.Join(ws.Dir(), "in", "plan.json")
			if err := exchange.Get(plan, local); err != nil {
				return RunResult{}, err
			}
			plan = local
		}
	}
	if task != "" {
		// The task's parent directories are made when its output is
		// staged (atomicfs.Begin): a task refused before then leaves
		// nothing behind.
		out = filepath.Join(out, filepath.FromSlash(task))
	}
	if plan != "" {
		p, err := ReadPlan(plan)
		if err != nil {
			return RunResult{}, err
		}
		job.Plan = &p
		opt.Inputs = append(append([]string(nil), opt.Inputs...), plan)
	}
	opt.Out = out
	res, err := Run(ctx, job, opt)
	if err != nil {
		return res, ws.Named(fmt.Errorf("run: %w", err))
	}
	res.Dir, err = publish(ctx, ws, res.Dir, outURL, "run")
	return res, err
}

// publish uploads and commits a finished output dir to outURL and returns
// the URL; without an output URL it removes the workspace of inputs, if
// any, and returns dir. A failed upload keeps the workspace for a rerun.
func publish(ctx context.Context, ws *exchange.Workspace, dir, outURL, staging string) (string, error) {
	if outURL != "" {
		if err := ws.Push(ctx, dir, outURL); err != nil {
			return dir, ws.Named(fmt.Errorf("%s: %w", staging, err))
		}
		return outURL, nil
	}
	if ws != nil {
		if err := ws.Remove(); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// TrainTask is what one lulc train process does: its config, its output
// (a run directory, or an object-storage prefix) and the parent of its
// local workspace when the output or a draw (input.samples) is an object.
// Finish, when set, adds to the run directory before it is uploaded (lulc
// train --compare sklearn writes its comparison there).
type TrainTask struct {
	Config config.TrainConfig
	Out    string
	Work   string
	Finish func(ctx context.Context, res train.Result) error
}

// RunTrain trains a task's config (Train) into its output. With objects
// for the output or draws it works in a local workspace: committed draws
// are downloaded (prefixes without a commit left out, with a warning), the
// run directory is made there, then uploaded and committed, and the
// workspace removed. The workspace's output is only ever the URL's and is
// never published: one left by a training interrupted while it uploaded
// is made again (the same bytes) and uploaded. On failure the workspace
// is kept, and the error names the output's URL rather than its local
// stand-in. opt.Out is ignored: the output is t.Out's.
func RunTrain(ctx context.Context, t TrainTask, opt stage.Options) (train.Result, error) {
	cfg, out := t.Config, t.Out
	var ws *exchange.Workspace
	outURL := ""
	if exchange.IsURL(out) || slices.ContainsFunc(cfg.Input.Samples, exchange.IsURL) {
		if exchange.IsURL(out) {
			outURL = out
		}
		var err error
		if ws, err = exchange.NewWorkspace(t.Work, outURL, opt.Log); err != nil {
			return train.Result{}, err
		}
		if outURL != "" {
			out = ws.Out()
			if atomicfs.Exists(out) {
				opt.Log.Info("the workspace holds an output whose upload did not finish: training again", "url", outURL)
				opt.Force = true
			}
		}
		samples := slices.Clone(cfg.Input.Samples)
		for i, s := range samples {
			if exchange.IsURL(s) {
				if samples[i], err = ws.PullDraws(s, filepath.Join(ws.Dir(), "in", fmt.Sprint(i))); err != nil {
					return train.Result{}, err
				}
			}
		}
		cfg.Input.Samples = samples
	}
	opt.Out = out
	res, err := train.Train(ctx, cfg, opt)
	if err != nil {
		return res, ws.Named(fmt.Errorf("train: %w", err))
	}
	if t.Finish != nil {
		if err := t.Finish(ctx, res); err != nil {
			return res, fmt.Errorf("train: %w", err)
		}
	}
	res.Dir, err = publish(ctx, ws, res.Dir, outURL, "train")
	return res, err
}

// CollectTask is what one lulc collect process does: gather the tasks of
// the job whose output is Out (a directory, or an object-storage prefix)
// into its collection.
type CollectTask struct {
	// Out is the job's output directory or prefix, holding shards/i-of-n.
	Out string
	// Work is the parent of the local workspace used when Out is an
	// object ("": the temporary directory).
	Work string
}

// RunCollect collects a task's job (Collect). With the job's output in
// object storage it works in a local workspace: the committed tasks are
// downloaded (a task's prefix without a commit is missing, as on a
// shared filesystem, with a warning), collected there, and the collection
// uploaded beside them (OUT/collection) and committed, and the workspace
// removed. On failure the workspace is kept, and the error names the
// output's URL rather than its local stand-in. opt.Out is ignored: the
// output is t.Out's.
func RunCollect(ctx context.Context, t CollectTask, opt stage.Options) (CollectResult, error) {
	opt.Fill()
	out := t.Out
	var ws *exchange.Workspace
	url := ""
	if exchange.IsURL(out) {
		var err error
		url = out
		if ws, err = exchange.NewWorkspace(t.Work, exchange.Join(url, stage.CollectDir), opt.Log); err != nil {
			return CollectResult{}, err
		}
		ws.SetURL(url)
		out = ws.Out()
		if err := pullTasks(ws, url, out, opt.Log); err != nil {
			return CollectResult{}, err
		}
	}
	res, err := Collect(ctx, out, opt)
	if err != nil {
		return res, ws.Named(err)
	}
	if url != "" {
		if err := ws.Push(ctx, res.Dir, exchange.Join(url, stage.CollectDir)); err != nil {
			return res, ws.Named(err)
		}
		res.Dir = exchange.Join(url, stage.CollectDir)
	}
	return res, nil
}

// pullTasks downloads the committed tasks under url's shards/ into out's,
// warning of each task's prefix that holds no commit.
func pullTasks(ws *exchange.Workspace, url, out string, log *slog.Logger) error {
	shards := exchange.Join(url, "shards")
	done, open, err := exchange.Committed(shards)
	if err != nil {
		return err
	}
	for _, n := range open {
		log.Warn("a task's prefix holds no commit (unfinished, or killed while it uploaded): missing", "url", exchange.Join(shards, n))
	}
	for _, n := range done {
		if _, err := ws.Pull(exchange.Join(shards, n), filepath.Join(out, "shards", n)); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(out, "shards"), 0o755)
}
