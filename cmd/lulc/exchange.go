package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/scale/exchange"
)

// workspace is the local side of a command whose output or inputs are
// objects (s3://…, package exchange): the command works in out (its
// output, as it would on a shared filesystem) with inputs downloaded
// under in, then uploads the output and commits it. It is kept when the
// command fails, so that a rerun on the same machine resumes from its
// staging directory, and removed once the output is committed.
type workspace struct {
	dir string
	url string // the output's URL; "" when only inputs are objects
	log *slog.Logger
}

// addWorkFlag adds --work, the parent of a command's workspace.
func addWorkFlag(cmd *cobra.Command, work *string) {
	cmd.Flags().StringVar(work, "work", "", "with s3:// outputs or inputs: the local directory to work in (default $TMPDIR); the work is removed once uploaded")
}

// newWorkspace makes (or finds again, after a failure on this machine)
// the workspace of the output at url, under parent.
func newWorkspace(parent, url string, log *slog.Logger) (*workspace, error) {
	if url != "" {
		if err := exchange.Check(url); err != nil {
			return nil, usagef("--out: %v", err)
		}
	}
	// The store's credentials, read by GDAL from the environment, never
	// reach a log or a report.
	redact.Add(os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	if parent == "" {
		parent = os.TempDir()
	}
	key := url
	if key == "" {
		// Inputs only: a workspace of this process's own.
		key = fmt.Sprintf("inputs-%d", os.Getpid())
	}
	sum := sha256.Sum256([]byte(key))
	w := &workspace{dir: filepath.Join(parent, "lulc-work-"+hex.EncodeToString(sum[:8])), url: url, log: log}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return w, nil
}

// out is the local directory that stands for the output URL.
func (w *workspace) out() string { return filepath.Join(w.dir, "out") }

// fetch downloads a committed object to the workspace's inputs.
func (w *workspace) fetch(url string) (string, error) {
	dst := filepath.Join(w.dir, "in", path.Base(url))
	return dst, exchange.Fetch(url, dst)
}

// pull downloads the committed files under url into dir; false when url
// holds no commit.
func (w *workspace) pull(url, dir string) (bool, error) {
	ok, err := exchange.Pull(url, dir, w.log)
	if ok {
		w.log.Info("downloaded committed files", "url", url)
	}
	return ok, err
}

// push uploads dir to url and commits it, then removes the workspace.
func (w *workspace) push(ctx context.Context, dir, url string) error {
	if _, err := exchange.Push(ctx, dir, url, w.log); err != nil {
		return err
	}
	return w.remove()
}

// remove deletes the workspace.
func (w *workspace) remove() error {
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// named replaces the workspace's local output path with the output's URL
// in err, so that messages (the commands that redo a task) name what the
// user gave; it keeps the workspace for a rerun.
func (w *workspace) named(err error) error {
	if err == nil || w == nil {
		return err
	}
	w.log.Info("work kept for a rerun on this machine", "dir", w.dir)
	if w.url == "" {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), w.out(), w.url)
	if msg == err.Error() {
		return err
	}
	return &renamedError{msg: msg, err: err}
}

// renamedError is an error whose text names URLs for local paths; it
// unwraps to the original, so exit codes stay what they were.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// pullDraws downloads the draws at url (a task's committed prefix, or a
// prefix of them such as OUT/draws) under dir, and returns dir. Prefixes
// without a commit (tasks unfinished or killed while they uploaded) are
// left out, with a warning: training then names the tiles no draw covers.
func (w *workspace) pullDraws(url, dir string) (string, error) {
	if ok, err := w.pull(url, dir); err != nil || ok {
		return dir, err
	}
	done, open, err := exchange.Committed(url)
	if err != nil {
		return dir, err
	}
	for _, n := range open {
		w.log.Warn("a task's prefix holds no commit (unfinished, or killed while it uploaded): left out", "url", exchange.Join(url, n))
	}
	if len(done) == 0 {
		return dir, errors.New(url + ": no committed draws (" + exchange.CommitFile + ") under it")
	}
	for _, n := range done {
		if _, err := w.pull(exchange.Join(url, n), filepath.Join(dir, n)); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
