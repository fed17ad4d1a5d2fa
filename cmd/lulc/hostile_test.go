package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/configs"
)

// world is what the hostile cases read: a tiny scene, its stack and a
// model, made once and never written by a case.
type world struct {
	dir, catalog, stack, model string
}

var (
	worldOnce sync.Once
	theWorld  world
	worldErr  error
)

func hostileWorld(t *testing.T) world {
	t.Helper()
	worldOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lulc-hostile-")
		if err != nil {
			worldErr = err
			return
		}
		w := world{dir: dir, catalog: filepath.Join(dir, "scene", "catalog.json"), stack: filepath.Join(dir, "stack"), model: filepath.Join(dir, "run", "model.lulcrf")}
		for _, args := range [][]string{
			{"synth", "-q", "--out", filepath.Join(dir, "scene")},
			{"ingest", "-q", "--catalog", w.catalog, "--out", w.stack},
			{"train", "-q", "--stack", w.stack, "--out", filepath.Join(dir, "run")},
		} {
			if code, _, stderr := lulc(t, args...); code != 0 {
				worldErr = fmt.Errorf("%v: %s", args, stderr)
				return
			}
		}
		theWorld = w
	})
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return theWorld
}

// hcase is one hostile case's directory and what it may read.
type hcase struct {
	t   *testing.T
	w   world
	dir string
}

func (c *hcase) path(name string) string { return filepath.Join(c.dir, name) }
func (c *hcase) out() string             { return c.path("out") }

// file writes a file of the case and returns its path.
func (c *hcase) file(name string, body []byte) string {
	c.t.Helper()
	p := c.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// config writes an embedded config with old replaced by new (which must
// occur) and returns its path.
func (c *hcase) config(name, old, new string) string {
	c.t.Helper()
	raw, err := configs.Read(name)
	if err != nil {
		c.t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		c.t.Fatalf("%s has no %q", name, old)
	}
	return c.file(name, []byte(strings.Replace(string(raw), old, new, 1)))
}

// scene copies the world's scene into the case, for cases that damage it,
// and returns the copy's catalog.
func (c *hcase) scene() string {
	c.t.Helper()
	dst := c.path("scene")
	if err := os.CopyFS(dst, os.DirFS(filepath.Dir(c.w.catalog))); err != nil {
		c.t.Fatal(err)
	}
	return filepath.Join(dst, "catalog.json")
}

// sceneFile returns the path of the first file of the case's scene copy
// matching pattern (relative to the scene).
func (c *hcase) sceneFile(pattern string) string {
	c.t.Helper()
	m, _ := filepath.Glob(filepath.Join(c.path("scene"), pattern))
	if len(m) == 0 {
		c.t.Fatalf("scene has no %s", pattern)
	}
	return m[0]
}

// stackCopy copies the world's stack into the case and returns it.
func (c *hcase) stackCopy() string {
	c.t.Helper()
	dst := c.path("stack")
	if err := os.CopyFS(dst, os.DirFS(c.w.stack)); err != nil {
		c.t.Fatal(err)
	}
	return dst
}

// hashes maps every file under the roots to its SHA-256.
func hashes(t *testing.T, roots ...string) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			body, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			sum := sha256.Sum256(body)
			h[p] = hex.EncodeToString(sum[:])
			return nil
		})
	}
	return h
}

// hostile is one case: setup prepares the case directory and returns the
// command line; the run must exit with code, its message must hold every
// string in want, and no file that existed before may change.
type hostile struct {
	name  string
	setup func(c *hcase) []string
	code  int
	want  []string
	loud  bool // without -q: the case checks a warning
}

func runHostile(t *testing.T, cases []hostile) {
	w := hostileWorld(t)
	for _, hc := range cases {
		t.Run(hc.name, func(t *testing.T) {
			c := &hcase{t: t, w: w, dir: t.TempDir()}
			args := hc.setup(c)
			before := hashes(t, w.dir, c.dir)
			hadOut := exists(c.out())
			if !hc.loud {
				args = append([]string{"-q"}, args...)
			}
			code, _, stderr := lulc(t, args...)
			if os.Getenv("LULC_HOSTILE_DISCOVER") != "" {
				fmt.Fprintf(os.Stderr, "CASE %s | %d | %s", hc.name, code, stderr)
			}
			if code != hc.code {
				t.Errorf("exit %d, want %d: %s", code, hc.code, stderr)
			}
			for _, s := range hc.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("message %q does not name %q", stderr, s)
				}
			}
			after := hashes(t, w.dir, c.dir)
			for p, sum := range before {
				if after[p] != sum {
					t.Errorf("%s changed or vanished", p)
				}
			}
			if code != 0 && !hadOut && exists(c.out()) {
				t.Errorf("a failed run left its output %s", c.out())
			}
		})
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
