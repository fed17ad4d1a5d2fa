package atomicfs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondWriterRefused: while one writer holds an output, a second
// fails at once with ErrLocked, naming the holder's host, PID and start;
// once released, the output can be taken again, and the lock file is gone.
func TestSecondWriterRefused(t *testing.T) {
	final := filepath.Join(t.TempDir(), "out")
	s, err := Begin(context.Background(), final, false, false, "k")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Begin(context.Background(), final, false, false, "k")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{host, "pid " + strconv.Itoa(os.Getpid()), "--break-lock", final} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if !Exists(s.Dir) {
		t.Fatal("the refused writer touched the first one's staging directory")
	}
	s.Release()
	s.Release() // twice is harmless
	if Exists(LockPath(final)) {
		t.Fatal("release left the lock file")
	}
	s2, err := Begin(context.Background(), final, false, false, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Commit(); err != nil {
		t.Fatal(err)
	}
	if Exists(LockPath(final)) {
		t.Fatal("commit left the lock file")
	}
}

// TestStaleLockTakenOver: a lock left by a process of this host that is
// gone is taken over without a word; one held on another host needs
// --break-lock.
func TestStaleLockTakenOver(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "out")
	// A real process that has exited: its PID is free (or reused, which
	// the start time tells apart).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no true(1): %v", err)
	}
	host, _ := os.Hostname()
	dead := Holder{Host: host, PID: cmd.Process.Pid, ProcStart: "1", Command: "lulc run (killed)"}
	writeLock(t, LockPath(final), dead)
	s, err := Begin(context.Background(), final, false, false, "k")
	if err != nil {
		t.Fatalf("stale lock of a dead process: %v", err)
	}
	s.Release()

	// A live holder on another host: refused, then broken on request.
	other := Holder{Host: host + "-elsewhere", PID: os.Getpid(), Command: "lulc run"}
	writeLock(t, LockPath(final), other)
	if _, err := Begin(context.Background(), final, false, false, "k"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), other.Host) {
		t.Fatalf("lock of another host: %v", err)
	}
	s, err = Begin(context.Background(), final, false, true, "k")
	if err != nil {
		t.Fatalf("--break-lock: %v", err)
	}
	// The broken holder's release must not remove the new holder's lock.
	old := &LockFile{path: LockPath(final), me: []byte("{}\n")}
	old.Release()
	if !Exists(LockPath(final)) {
		t.Fatal("a broken holder's release removed the new lock")
	}
	s.Release()

	// A live holder on this host (this process) is never stale.
	me := self()
	writeLock(t, LockPath(final), me)
	if _, err := Begin(context.Background(), final, false, false, "k"); !errors.Is(err, ErrLocked) {
		t.Fatalf("live holder on this host: %v", err)
	}
}

func writeLock(t *testing.T, path string, h Holder) {
	t.Helper()
	body, _ := json.Marshal(h)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRestart empties a resumed staging directory and keeps its key, so
// that a later run with the key still resumes.
func TestRestart(t *testing.T) {
	final := filepath.Join(t.TempDir(), "out")
	s, err := Begin(context.Background(), final, false, false, "k")
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(s.Path("a"), []byte("a"))
	s.Release()
	s, err = Begin(context.Background(), final, false, false, "k")
	if err != nil || !s.Resumed {
		t.Fatalf("resume: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if Exists(s.Path("a")) || s.Resumed {
		t.Fatal("restart kept the old files")
	}
	s.Release()
	if s, err = Begin(context.Background(), final, false, false, "k"); err != nil || !s.Resumed {
		t.Fatalf("the key did not survive the restart: %v", err)
	}
	s.Release()
}
