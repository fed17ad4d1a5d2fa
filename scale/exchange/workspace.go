package exchange

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
)

// Workspace is the local side of a command whose output or inputs are
// objects: the command works in Out (its output, as it would on a shared
// filesystem) with inputs downloaded under in/, then uploads the output
// and commits it (Push). It is kept when the command fails, so that a
// rerun on the same machine resumes from its staging directory, and
// removed once the output is committed.
type Workspace struct {
	dir string
	url string // the output's URL; "" when only inputs are objects
	log *slog.Logger
}

// NewWorkspace makes (or finds again, after a failure on this machine)
// the workspace of the output at url under parent (the temporary
// directory when ""); url "" is a workspace for inputs only, of this
// process's own.
func NewWorkspace(parent, url string, log *slog.Logger) (*Workspace, error) {
	if url != "" {
		if err := Check(url); err != nil {
			return nil, err
		}
	}
	if parent == "" {
		parent = os.TempDir()
	}
	key := url
	if key == "" {
		key = fmt.Sprintf("inputs-%d", os.Getpid())
	}
	sum := sha256.Sum256([]byte(key))
	w := &Workspace{dir: filepath.Join(parent, "lulc-work-"+hex.EncodeToString(sum[:8])), url: url, log: log}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return w, nil
}

// Dir is the workspace's directory.
func (w *Workspace) Dir() string { return w.dir }

// Out is the local directory that stands for the output URL.
func (w *Workspace) Out() string { return filepath.Join(w.dir, "out") }

// SetURL makes url the output the workspace's messages name (Named) in
// place of Out, where the workspace was keyed by another URL.
func (w *Workspace) SetURL(url string) { w.url = url }

// Fetch downloads a committed object to the workspace's inputs.
func (w *Workspace) Fetch(url string) (string, error) {
	dst := filepath.Join(w.dir, "in", path.Base(url))
	return dst, Fetch(url, dst)
}

// Pull downloads the committed files under url into dir; false when url
// holds no commit.
func (w *Workspace) Pull(url, dir string) (bool, error) {
	ok, err := Pull(url, dir, w.log)
	if ok {
		w.log.Info("downloaded committed files", "url", url)
	}
	return ok, err
}

// Push uploads dir to url and commits it, then removes the workspace.
func (w *Workspace) Push(ctx context.Context, dir, url string) error {
	if _, err := Push(ctx, dir, url, w.log); err != nil {
		return err
	}
	return w.Remove()
}

// Remove deletes the workspace.
func (w *Workspace) Remove() error {
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// Named replaces the workspace's local output path with the output's URL
// in err, so that messages (the commands that redo a task) name what the
// user gave; it keeps the workspace for a rerun. A nil workspace returns
// err as it is.
func (w *Workspace) Named(err error) error {
	if err == nil || w == nil {
		return err
	}
	w.log.Info("work kept for a rerun on this machine", "dir", w.dir)
	if w.url == "" {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), w.Out(), w.url)
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

// PullDraws downloads the draws at url (a task's committed prefix, or a
// prefix of them such as OUT/draws) under dir, and returns dir. Prefixes
// without a commit (tasks unfinished or killed while they uploaded) are
// left out, with a warning: training then names the tiles no draw covers.
func (w *Workspace) PullDraws(url, dir string) (string, error) {
	if ok, err := w.Pull(url, dir); err != nil || ok {
		return dir, err
	}
	done, open, err := Committed(url)
	if err != nil {
		return dir, err
	}
	for _, n := range open {
		w.log.Warn("a task's prefix holds no commit (unfinished, or killed while it uploaded): left out", "url", Join(url, n))
	}
	if len(done) == 0 {
		return dir, errors.New(url + ": no committed draws (" + CommitFile + ") under it")
	}
	for _, n := range done {
		if _, err := w.Pull(Join(url, n), filepath.Join(dir, n)); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
