package atomicfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"31TEJ", "field-7", "tuile_é", "a.b", "x" + strings.Repeat("y", 254)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, c := range []struct{ name, why string }{
		{"", "empty"},
		{".", "directory itself"},
		{"..", "directory itself"},
		{"../../victim", "separator"},
		{"a/b", "separator"},
		{`a\b`, "separator"},
		{"a\x00b", "U+0000"},
		{"a\nb", "U+000A"},
		{"a\x1b[31mb", "U+001B"},
		{"a\x7fb", "U+007F"},
		{"a\u0085b", "U+0085"},
		{"evil\u202egpj.tif", "U+202E"},
		{"a\u200bb", "U+200B"},
		{"\xff\xfe", "UTF-8"},
		{strings.Repeat("x", 256), "256 bytes"},
	} {
		err := CheckName(c.name)
		if err == nil || !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%q: got %v, want an ErrBadName saying %q", c.name, err, c.why)
		}
	}
}

func TestCheckWithinAndEntry(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := CheckWithin(root, filepath.Join(root, "a", "b")); err != nil {
		t.Errorf("a path inside: %v", err)
	}
	for _, p := range []string{root, filepath.Join(root, ".."), filepath.Join(root, "..", "x"), outside} {
		if err := CheckWithin(root, p); err == nil || !strings.Contains(err.Error(), "outside the output") {
			t.Errorf("%s: got %v", p, err)
		}
	}
	// A link planted inside the output that leads out of it.
	if err := os.Symlink(outside, filepath.Join(root, "T1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Entry(root, "T1"); err == nil || !strings.Contains(err.Error(), "outside the output") {
		t.Errorf("a link out of the output: %v", err)
	}
	if _, err := Entry(root, ".."); !errors.Is(err, ErrBadName) {
		t.Errorf("..: %v", err)
	}
	if p, err := Entry(root, "T2"); err != nil || p != filepath.Join(root, "T2") {
		t.Errorf("T2: %q %v", p, err)
	}
}

func TestCheckTarget(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	sub := filepath.Join(dir, "d")
	os.Mkdir(sub, 0o755)
	link := filepath.Join(dir, "l")
	os.Symlink(file, link)
	fifo := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path       string
		dir, force bool
		want       string // "" for accepted
	}{
		{filepath.Join(dir, "new"), false, false, ""},
		{filepath.Join(dir, "new"), true, false, ""},
		{file, false, false, "already exists (use --force"},
		{file, false, true, ""},
		{sub, true, false, "already exists (use --force"},
		{sub, true, true, ""},
		{file, true, true, "is a regular file, not a directory"},
		{sub, false, true, "is a directory, not a regular file"},
		{link, false, true, "symbolic link (to " + file},
		{link, true, true, "symbolic link"},
		{fifo, false, true, "FIFO"},
		{fifo, true, true, "FIFO"},
		{"/dev/null", false, true, "character device"},
	}
	for _, c := range cases {
		err := CheckTarget(c.path, c.dir, c.force)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (dir %v, force %v): %v", c.path, c.dir, c.force, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path)):
			t.Errorf("%s (dir %v, force %v): got %v, want %q", c.path, c.dir, c.force, err, c.want)
		}
	}
}

func TestBeginRefusesWhatIsNotADirectory(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o755)
	link := filepath.Join(dir, "l")
	os.Symlink(target, link)
	for _, p := range []string{fifo, link} {
		if _, err := Begin(context.Background(), p, true, false, "k"); err == nil {
			t.Errorf("%s: begun", p)
		}
		if Exists(LockPath(p)) || Exists(StagingDir(p)) {
			t.Errorf("%s: a lock or stage was left beside it", p)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v", err)
	}
}
