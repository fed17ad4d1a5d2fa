package atomicfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStageCommitAndResume(t *testing.T) {
	final := filepath.Join(t.TempDir(), "out")
	s, err := Begin(context.Background(), final, false, false, "k1")
	if err != nil || s.Resumed {
		t.Fatalf("begin: %v, resumed %v", err, s != nil && s.Resumed)
	}
	if err := WriteFile(s.Path("a.txt"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(final); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("final path exists before commit")
	}

	// Interrupted (its process gone, its lock with it): a run with the same
	// key resumes, another key restarts.
	s.Release()
	s2, err := Begin(context.Background(), final, false, false, "k1")
	if err != nil || !s2.Resumed || !Exists(s2.Path("a.txt")) {
		t.Fatalf("same key: %v, resumed %v", err, s2.Resumed)
	}
	s2.Release()
	s3, err := Begin(context.Background(), final, false, false, "k2")
	if err != nil || s3.Resumed || Exists(s3.Path("a.txt")) {
		t.Fatalf("other key: %v, resumed %v", err, s3.Resumed)
	}
	WriteFile(s3.Path("b.txt"), []byte("b"))
	if err := s3.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(final, "b.txt")); err != nil || string(b) != "b" {
		t.Fatalf("committed content: %q %v", b, err)
	}
	if Exists(filepath.Join(final, keyFile)) || Exists(s3.Dir) {
		t.Error("commit left the stage key or directory")
	}

	// An existing output needs force, and is replaced only on commit.
	if _, err := Begin(context.Background(), final, false, false, "k3"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing output: %v", err)
	}
	s4, err := Begin(context.Background(), final, true, false, "k3")
	if err != nil {
		t.Fatal(err)
	}
	if !Exists(filepath.Join(final, "b.txt")) {
		t.Fatal("force removed the old output before commit")
	}
	WriteFile(s4.Path("c.txt"), []byte("c"))
	if err := s4.Commit(); err != nil {
		t.Fatal(err)
	}
	if Exists(filepath.Join(final, "b.txt")) || !Exists(filepath.Join(final, "c.txt")) {
		t.Error("forced commit did not replace the output")
	}
}

func TestWriteFileLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	if err := WriteFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestUnwritableParent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	_, err := Begin(context.Background(), filepath.Join(file, "out"), false, false, "k")
	if err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("got %v", err)
	}
}

// TestInterruptedStageNeverCommits cancels the stage's context (SIGINT)
// after its files are written: Commit refuses, the final path stays absent
// (or, forced, keeps the previous output), the staging directory stays for
// the rerun, which resumes and commits.
func TestInterruptedStageNeverCommits(t *testing.T) {
	for _, previous := range []bool{false, true} {
		final := filepath.Join(t.TempDir(), "out")
		if previous {
			if err := os.MkdirAll(final, 0o755); err != nil {
				t.Fatal(err)
			}
			WriteFile(filepath.Join(final, "old.txt"), []byte("old"))
		}
		ctx, cancel := context.WithCancel(context.Background())
		s, err := Begin(ctx, final, previous, false, "k")
		if err != nil {
			t.Fatal(err)
		}
		WriteFile(s.Path("a.txt"), []byte("a"))
		cancel()
		err = s.Commit()
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing committed") {
			t.Fatalf("commit after interrupt: %v", err)
		}
		if Exists(filepath.Join(final, "a.txt")) {
			t.Fatal("an interrupted stage was committed")
		}
		if previous != Exists(filepath.Join(final, "old.txt")) {
			t.Fatal("the previous output was touched by an interrupted run")
		}
		if _, err := Begin(ctx, final, previous, false, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("begin after interrupt: %v", err)
		}
		s2, err := Begin(context.Background(), final, previous, false, "k")
		if err != nil || !s2.Resumed || !Exists(s2.Path("a.txt")) {
			t.Fatalf("rerun: %v, resumed %v", err, s2 != nil && s2.Resumed)
		}
		if err := s2.Commit(); err != nil {
			t.Fatal(err)
		}
		if !Exists(filepath.Join(final, "a.txt")) {
			t.Fatal("the rerun did not commit")
		}
	}
}
