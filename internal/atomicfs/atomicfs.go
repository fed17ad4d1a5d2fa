// Package atomicfs writes outputs so that a final path either does not
// exist or holds complete content: files are written beside their target
// and renamed, and multi-file outputs are assembled in a staging directory
// that is renamed into place when complete. A staging directory left by an
// interrupted run is picked up again by a run with the same key. Each
// output has one writer at a time: Begin takes the output's lock (Lock),
// which Commit and Release give back.
package atomicfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile writes data to a hidden temporary file beside path, syncs it and
// renames it to path.
func WriteFile(path string, data []byte) error {
	tmp := TempName(path)
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// TempName is the hidden sibling of path used while writing it, so that a
// reader listing the directory never takes it for a finished file.
func TempName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
}

// Exists reports whether path exists (as anything).
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Stage is a staging directory for a multi-file output.
type Stage struct {
	Final   string // where the output lands on Commit
	Dir     string // where it is assembled
	Resumed bool   // Dir held a previous, interrupted run with the same key
	lock    *LockFile
	ctx     context.Context
}

const keyFile = ".lulc-stage"

// Begin locks final (see Lock: a second writer of the same output fails
// at once, naming the first; breakLock takes over a lock whose holder is
// known to be gone) and prepares its staging directory. Once ctx is done
// (the command was interrupted) Commit refuses: whatever the stages after
// the interrupt returned, an interrupted run never commits. An existing
// final is an error unless force is set (it is then replaced on Commit,
// not before); one that is not a directory (a file, a device, a FIFO, a
// symbolic link) is refused even with force (CheckTarget). A staging
// directory left with the same key is resumed: files already renamed into
// it are complete and may be kept. One with another key is discarded.
// Commit or Release gives the lock back; callers defer Release so that
// every exit path does.
func Begin(ctx context.Context, final string, force, breakLock bool, key string) (*Stage, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("output %s: %w", final, err)
	}
	final = filepath.Clean(final)
	// Before the lock, whose file lands beside final: a device or a link
	// given as the output must not gain siblings either.
	if err := CheckTarget(final, true, force); err != nil {
		return nil, err
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("output directory %s is not writable: %w", parent, err)
	}
	lock, err := Lock(LockPath(final), breakLock)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", final, err)
	}
	s, err := begin(final, force, key)
	if err != nil {
		lock.Release()
		return nil, err
	}
	s.lock, s.ctx = lock, ctx
	return s, nil
}

// Restart discards what a resumed staging directory holds and starts it
// afresh with the same key.
func (s *Stage) Restart() error {
	key, err := os.ReadFile(filepath.Join(s.Dir, keyFile))
	if err != nil {
		return fmt.Errorf("restart %s: %w", s.Dir, err)
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("restart %s: %w", s.Dir, err)
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		return fmt.Errorf("restart %s: %w", s.Dir, err)
	}
	s.Resumed = false
	return WriteFile(filepath.Join(s.Dir, keyFile), key)
}

// Release gives the output's lock back (Commit does too). The staging
// directory stays, for a rerun to resume.
func (s *Stage) Release() { s.lock.Release() }

func begin(final string, force bool, key string) (*Stage, error) {
	parent := filepath.Dir(final)
	if _, err := os.Stat(final); err == nil && !force {
		return nil, fmt.Errorf("output %s already exists (use --force to replace it)", final)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("output %s: %w", final, err)
	}
	s := &Stage{Final: final, Dir: StagingDir(final)}
	if old, err := os.ReadFile(filepath.Join(s.Dir, keyFile)); err == nil && strings.TrimSpace(string(old)) == key {
		s.Resumed = true
		return s, nil
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return nil, fmt.Errorf("remove stale staging directory %s: %w", s.Dir, err)
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory %s is not writable: %w", parent, err)
	}
	if err := WriteFile(filepath.Join(s.Dir, keyFile), []byte(key+"\n")); err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("output directory %s is not writable: %w", parent, err)
	}
	return s, nil
}

// Path returns the staging path of a file of the output.
func (s *Stage) Path(elem ...string) string {
	return filepath.Join(append([]string{s.Dir}, elem...)...)
}

// Commit moves the finished output to its final path, replacing an
// existing one (Begin refused that unless forced). After an interrupt
// (Begin's context done) it leaves the staging directory for a rerun to
// resume and returns the context's error instead.
func (s *Stage) Commit() error {
	defer s.Release()
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: interrupted, nothing committed (rerun the command to resume): %w", s.Final, err)
	}
	if err := os.Remove(filepath.Join(s.Dir, keyFile)); err != nil {
		return fmt.Errorf("commit %s: %w", s.Final, err)
	}
	old := ""
	if Exists(s.Final) {
		old = filepath.Join(filepath.Dir(s.Final), "."+filepath.Base(s.Final)+".old")
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("commit %s: %w", s.Final, err)
		}
		if err := os.Rename(s.Final, old); err != nil {
			return fmt.Errorf("commit %s: move previous output aside: %w", s.Final, err)
		}
	}
	if err := os.Rename(s.Dir, s.Final); err != nil {
		if old != "" {
			os.Rename(old, s.Final)
		}
		return fmt.Errorf("commit %s: %w", s.Final, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("commit %s: remove previous output %s: %w", s.Final, old, err)
		}
	}
	return nil
}

// StagingDir is where Begin assembles the output for final.
func StagingDir(final string) string {
	final = filepath.Clean(final)
	return filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".partial")
}
