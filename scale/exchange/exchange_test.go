package exchange

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/s3test"
)

// TestCheckAndJoin: URLs with no bucket or with parts an object key must
// not hold are refused, naming the URL; Join adds key parts.
func TestCheckAndJoin(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"/local/dir", "s3://", "s3:///x", "s3://b//x", "s3://b/./x", "s3://b/x/.."} {
		if err := Check(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Check(%q): %v", bad, err)
		}
	}
	for _, good := range []string{"s3://b", "s3://b/", "s3://b/run/shards/3"} {
		if err := Check(good); err != nil {
			t.Errorf("Check(%q): %v", good, err)
		}
	}
	if got := Join("s3://b/run/", "shards", "3/x.tif"); got != "s3://b/run/shards/3/x.tif" {
		t.Errorf("Join: %s", got)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestPushPull, on s3rver (skipped without it): a pushed directory's
// visible files come back byte for byte, the commit lists each with its
// size and hash, Fetch refuses objects no commit lists and objects whose
// bytes changed, Committed tells finished prefixes from unfinished ones,
// and an interrupted Push writes no commit.
func TestPushPull(t *testing.T) {
	bucket := s3test.Server(t)
	src := t.TempDir()
	files := map[string]string{"a.txt": "first", "sub/b.bin": strings.Repeat("lulc", 1000)}
	for name, body := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, ".staging"), []byte("hidden"), 0o644)
	url := bucket + "/run/shards/0"
	c, err := Push(context.Background(), src, url, quiet())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range c.Files {
		names = append(names, f.Name)
		if f.Size != int64(len(files[f.Name])) || len(f.SHA256) != 64 {
			t.Errorf("commit entry %+v", f)
		}
	}
	if !slices.Equal(names, []string{"a.txt", "sub/b.bin"}) {
		t.Fatalf("committed %v, want the two visible files", names)
	}
	dst := t.TempDir()
	if ok, err := Pull(url, dst, quiet()); !ok || err != nil {
		t.Fatalf("pull: %v, %v", ok, err)
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Errorf("%s pulled back as %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, ".staging")); err == nil {
		t.Error("a hidden file was pushed")
	}

	// An object a commit does not list, and one whose bytes changed.
	if err := Put(url+"/stray.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Fetch(url+"/stray.txt", filepath.Join(t.TempDir(), "s")); err == nil || !strings.Contains(err.Error(), "not among the files committed") {
		t.Errorf("fetch of an uncommitted object: %v", err)
	}
	if err := Put(url+"/a.txt", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if err := Fetch(url+"/a.txt", filepath.Join(t.TempDir(), "a")); err == nil {
		t.Error("an object whose bytes changed was fetched")
	}

	// An interrupted push leaves its prefix without a commit.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Push(ctx, src, bucket+"/run/shards/1", quiet()); err == nil {
		t.Error("a push after the interrupt succeeded")
	}
	if _, ok, err := ReadCommit(bucket + "/run/shards/1"); ok || err != nil {
		t.Errorf("an interrupted push committed: %v, %v", ok, err)
	}
	Put(bucket+"/run/shards/1/partial.tif", []byte("half"))
	done, open, err := Committed(bucket + "/run/shards")
	if err != nil || !slices.Equal(done, []string{"0"}) || !slices.Equal(open, []string{"1"}) {
		t.Errorf("committed %v, open %v, %v; want [0] and [1]", done, open, err)
	}
}
