// Package exchange lets the phases of an array job hand their outputs to
// each other through object storage (s3://bucket/prefix) instead of a
// shared filesystem.
//
// A task works in a local directory exactly as on a shared filesystem,
// then Push uploads the finished directory under a prefix, one object per
// file, and writes a commit object (CommitFile) last. Object stores have
// no rename, so the commit is what makes the upload visible: it lists
// every file's name, size and SHA-256, and readers (Pull, Fetch) read
// only what a commit lists, verifying each object against it. A task
// killed mid-upload leaves objects but no commit, which readers ignore;
// Push first removes the old commit before replacing a prefix's objects,
// so that readers never take a mix of two uploads for a finished one.
//
// Every byte goes through GDAL's virtual file layer (package raster:
// /vsis3/), so a store is configured as GDAL's /vsis3/ is: the AWS_*
// environment variables or GDAL options (credentials, AWS_REGION,
// AWS_S3_ENDPOINT, AWS_HTTPS, AWS_VIRTUAL_HOSTING), the same ones the
// rasters are read with.
package exchange

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo/raster"
)

// CommitFile is the object, under a prefix, that commits the prefix's
// files: written last by Push, read first by Pull.
const CommitFile = "lulc-commit.json"

// Commit is a committed prefix's content.
type Commit struct {
	Files []File `json:"files"` // by name
}

// File is one committed object: its name relative to the prefix (slash
// separated), size and SHA-256 (hex).
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// IsURL reports whether s names object storage rather than a local path.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// Check refuses a URL that names no bucket, or holds parts that object
// keys here must not (empty, "." or ".." segments).
func Check(url string) error {
	if !IsURL(url) {
		return fmt.Errorf("%s: not an s3:// URL", url)
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(url, "s3://"), "/")
	if rest == "" {
		return fmt.Errorf("%s: no bucket", url)
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%s: an empty, . or .. part in the key", url)
		}
	}
	return nil
}

// Join adds slash-separated elements to a URL.
func Join(url string, elem ...string) string {
	return strings.TrimSuffix(url, "/") + "/" + path.Join(elem...)
}

// vsi is the path GDAL opens for a URL.
func vsi(url string) string { return raster.GDALPath(strings.TrimSuffix(url, "/")) }

// ReadCommit reads the commit under url; ok is false when there is none.
func ReadCommit(url string) (c Commit, ok bool, err error) {
	p := vsi(Join(url, CommitFile))
	raster.ForgetCached(vsi(url))
	// A store that does not answer must not pass for one without a
	// commit: the task would redo its work, only to fail uploading it.
	found, err := raster.Stat(p)
	if err != nil {
		return Commit{}, false, fmt.Errorf("%s: %w", Join(url, CommitFile), err)
	}
	if !found {
		return Commit{}, false, nil
	}
	body, err := readAll(p)
	if err != nil {
		return Commit{}, false, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return Commit{}, false, fmt.Errorf("%s: not a commit: %w", Join(url, CommitFile), err)
	}
	for _, f := range c.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Name)) || strings.Contains(f.Name, `\`) || f.Name == CommitFile {
			return Commit{}, false, fmt.Errorf("%s: file %q lies outside its prefix", Join(url, CommitFile), f.Name)
		}
	}
	return c, true, nil
}

func readAll(p string) ([]byte, error) {
	f, err := raster.OpenFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Push uploads the files under dir (hidden ones, a staging area's, left
// out) to url and commits them. When url already holds a commit of the
// same files (a task kept from an earlier run) nothing is written.
// Otherwise the old commit is removed first, the files uploaded, the
// objects only the old commit listed removed, and the new commit written
// last. Once ctx is done (an interrupt) Push stops before its next object
// and never writes the commit: the prefix then holds no commit, which
// readers take for unfinished, and a rerun uploads again.
func Push(ctx context.Context, dir, url string, log *slog.Logger) (Commit, error) {
	if err := Check(url); err != nil {
		return Commit{}, err
	}
	c, err := listLocal(dir)
	if err != nil {
		return c, err
	}
	old, had, err := ReadCommit(url)
	if err != nil {
		log.Warn("the prefix's commit is unreadable: replacing it", "url", url, "why", err)
		had = false
	}
	if had && slices.Equal(old.Files, c.Files) {
		log.Info("the store already holds these files, committed", "url", url, "files", len(c.Files))
		return c, nil
	}
	if err := raster.Remove(vsi(Join(url, CommitFile))); err != nil {
		return c, fmt.Errorf("push %s: %w", url, err)
	}
	log.Debug("uploading", "url", url, "files", len(c.Files))
	for _, f := range c.Files {
		if err := ctx.Err(); err != nil {
			return c, fmt.Errorf("push %s: interrupted, nothing committed: %w", url, err)
		}
		if err := upload(filepath.Join(dir, filepath.FromSlash(f.Name)), Join(url, f.Name), f); err != nil {
			return c, err
		}
	}
	for _, f := range old.Files {
		if !slices.ContainsFunc(c.Files, func(n File) bool { return n.Name == f.Name }) {
			if err := raster.Remove(vsi(Join(url, f.Name))); err != nil {
				return c, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return c, fmt.Errorf("push %s: interrupted, nothing committed: %w", url, err)
	}
	body, _ := json.MarshalIndent(c, "", "  ")
	if err := writeObject(Join(url, CommitFile), bytes.NewReader(append(body, '\n'))); err != nil {
		return c, err
	}
	log.Info("uploaded and committed", "url", url, "files", len(c.Files))
	return c, nil
}

// listLocal lists dir's files, hidden ones left out, with their sizes
// and hashes.
func listLocal(dir string) (Commit, error) {
	var c Commit
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("push %s: %s is not a regular file", dir, p)
		}
		rel, _ := filepath.Rel(dir, p)
		f, err := hashFile(p)
		f.Name = filepath.ToSlash(rel)
		if f.Name == CommitFile {
			return fmt.Errorf("push %s: a file named %s would be taken for the commit", dir, CommitFile)
		}
		c.Files = append(c.Files, f)
		return err
	})
	if err != nil {
		return c, fmt.Errorf("push %s: %w", dir, err)
	}
	slices.SortFunc(c.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

func hashFile(p string) (File, error) {
	f, err := os.Open(p)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, err
}

// upload copies a local file to an object, checking that the bytes sent
// are the ones listed (the file did not change since it was hashed).
func upload(src, url string, want File) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if err := writeObject(url, io.TeeReader(f, h)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("upload %s: the file changed while it was uploaded", src)
	}
	return nil
}

// writeObject writes r's bytes as the object at url; the object exists
// only once all of them arrived.
func writeObject(url string, r io.Reader) error {
	w, err := raster.CreateFile(vsi(url))
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return fmt.Errorf("upload %s: %w", url, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", url, err)
	}
	return nil
}

// Pull downloads the files committed under url into dir, each verified
// against the commit; ok is false when url holds no commit. A file whose
// object is missing or does not match is left out, with a warning, so
// that the caller's own checks find it missing (a task maps its tile
// again, a collect names the task that redoes it). Files are written to
// hidden temporaries and renamed.
func Pull(url, dir string, log *slog.Logger) (ok bool, err error) {
	if err := Check(url); err != nil {
		return false, err
	}
	c, ok, err := ReadCommit(url)
	if err != nil || !ok {
		return false, err
	}
	for _, f := range c.Files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		err := download(Join(url, f.Name), dst, f)
		var bad damaged
		if errors.As(err, &bad) {
			log.Warn("a committed object is missing or does not match its commit: left out", "url", Join(url, f.Name), "why", err)
			continue
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// damaged is a download that does not match its commit.
type damaged struct{ error }

// download copies an object to dst through a hidden temporary beside it,
// renamed only when its size and hash match want.
func download(url, dst string, want File) error {
	p := vsi(url)
	found, err := raster.Stat(p)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	if !found {
		return damaged{errors.New("no such object")}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	src, err := raster.OpenFile(p)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != want.Size || got != want.SHA256 {
		return damaged{fmt.Errorf("%d bytes of SHA-256 %s, the commit lists %d bytes of %s", n, got, want.Size, want.SHA256)}
	}
	return os.Rename(tmp.Name(), dst)
}

// Fetch downloads one committed object to dst: the commit of the nearest
// enclosing prefix that has one must list it, and the bytes must match.
// An object no commit lists (a file being uploaded, or left by a task
// that died) is refused.
func Fetch(url, dst string) error {
	if err := Check(url); err != nil {
		return err
	}
	key := strings.TrimPrefix(url, "s3://")
	for prefix := path.Dir(key); prefix != "."; prefix = path.Dir(prefix) {
		c, ok, err := ReadCommit("s3://" + prefix)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		rel := strings.TrimPrefix(key, prefix+"/")
		i := slices.IndexFunc(c.Files, func(f File) bool { return f.Name == rel })
		if i < 0 {
			return fmt.Errorf("%s: not among the files committed under s3://%s", url, prefix)
		}
		if err := download(url, dst, c.Files[i]); err != nil {
			return fmt.Errorf("%s: %w", url, err)
		}
		return nil
	}
	return fmt.Errorf("%s: no enclosing prefix holds a %s: the object is not a finished output", url, CommitFile)
}

// Get downloads an object that needs no commit (a file written in one
// piece, such as a job plan, which carries its own digest) to dst.
func Get(url, dst string) error {
	if err := Check(url); err != nil {
		return err
	}
	found, err := raster.Stat(vsi(url))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if !found {
		return fmt.Errorf("%s: no such object", url)
	}
	body, err := readAll(vsi(url))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, body, 0o644)
}

// Put writes body as the object at url, in one piece.
func Put(url string, body []byte) error {
	if err := Check(url); err != nil {
		return err
	}
	return writeObject(url, bytes.NewReader(body))
}

// Committed lists the names directly under url whose prefixes hold a
// commit (the finished tasks under OUT/shards or OUT/draws), in name
// order, and those that hold none (tasks unfinished, or killed while
// they uploaded).
func Committed(url string) (done, open []string, err error) {
	if err := Check(url); err != nil {
		return nil, nil, err
	}
	raster.ForgetCached(vsi(url))
	names := raster.ReadDir(vsi(url))
	slices.Sort(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") || n == CommitFile {
			continue
		}
		found, err := raster.Stat(vsi(Join(url, n, CommitFile)))
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("%s: %w", Join(url, n, CommitFile), err)
		case found:
			done = append(done, n)
		default:
			open = append(open, n)
		}
	}
	return done, open, nil
}
