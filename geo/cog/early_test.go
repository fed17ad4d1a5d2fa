package cog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo/cog/cogtest"
	"github.com/lulc/lulc/internal/digest"
)

// TestWriterEncodeEarly: compressing rows of tiles as windows complete
// them gives the same file as compressing at Close, staged in memory and
// in a mapped file, for every writer case; Sum is the file's checksum and
// size.
func TestWriterEncodeEarly(t *testing.T) {
	dir := t.TempDir()
	defer func(v int64) { stageInMemoryMax = v }(stageInMemoryMax)
	for _, c := range cogtest.Cases {
		if !c.Writer {
			continue
		}
		for _, mapped := range []bool{false, true} {
			stageInMemoryMax = 1 << 30
			if mapped {
				stageInMemoryMax = 0
			}
			late := filepath.Join(dir, c.Name+"-late.tif")
			writeCase(t, c, late, options(c))
			opt := options(c)
			opt.EncodeEarly = true
			if mapped {
				// One compressor while the windows are written: the same file.
				opt.EarlyThreads = 1
			}
			path := filepath.Join(dir, c.Name+"-early.tif")
			w := writeCase(t, c, path, opt)
			a, _ := os.ReadFile(late)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("%s (mapped %v): early encoding gives another file (%d bytes, not %d)", c.Name, mapped, len(b), len(a))
			}
			if n, made := earlyMade(w); made != n || n == 0 {
				t.Errorf("%s (mapped %v): %d of %d tiles made before Close", c.Name, mapped, made, n)
			}
			sha, size, ok := w.Sum()
			if sum := digest.Bytes(b); !ok || sha != sum || size != int64(len(b)) {
				t.Errorf("%s: Sum = %s, %d, %v; the file's is %s, %d", c.Name, sha, size, ok, sum, len(b))
			}
			if _, _, ok := mustWriter(t, filepath.Join(dir, "x.tif"), c).Sum(); ok {
				t.Errorf("%s: Sum before Close", c.Name)
			}
		}
	}
}

// earlyMade counts the tiles of every level of a closed Writer's raster,
// and those its compressors made while the windows were written and Close
// kept (overviews included).
func earlyMade(w *Writer) (n, made int) {
	count := func(p *Plan, made func(l, tx, ty int) bool) (int, int) {
		n, m := 0, 0
		for l, lv := range p.levels {
			for ty := range lv.tilesY {
				for tx := range lv.tilesX {
					n++
					if made(l, tx, ty) {
						m++
					}
				}
			}
		}
		return n, m
	}
	switch s := w.stage.(type) {
	case *stageOf[uint8]:
		return count(s.plan, s.early.made)
	case *stageOf[uint16]:
		return count(s.plan, s.early.made)
	}
	return 0, 0
}

// TestWriterEncodeEarlyRewritten: a window written twice before its row
// was complete (the row's count passes its size) still ends up in the
// file with its last values, as without early encoding.
func TestWriterEncodeEarlyRewritten(t *testing.T) {
	c := cogtest.Cases[4]
	dir := t.TempDir()
	for _, early := range []bool{false, true} {
		opt := options(c)
		opt.EncodeEarly = early
		w, err := NewWriter(filepath.Join(dir, map[bool]string{false: "late.tif", true: "early.tif"}[early]), plan(t, c, opt))
		if err != nil {
			t.Fatal(err)
		}
		planes := make([][]uint16, c.Bands)
		for b := range planes {
			planes[b] = c.Pixels(b)
		}
		junk := make([]uint16, c.Width*100)
		for i := range junk {
			junk[i] = 7
		}
		// Band 0's top 100 rows twice: first junk, then the real values.
		if err := w.Write(0, 0, 0, c.Width, 100, junk); err != nil {
			t.Fatal(err)
		}
		for b := range c.Bands {
			if err := w.Write(b, 0, 0, c.Width, c.Height, planes[b]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "late.tif"))
	b, _ := os.ReadFile(filepath.Join(dir, "early.tif"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("a rewritten window gives another file with early encoding")
	}
}

// mustWriter is an early-encoding Writer of the case at path, aborted at
// the test's end.
func mustWriter(t *testing.T, path string, c cogtest.Case) *Writer {
	t.Helper()
	opt := options(c)
	opt.EncodeEarly = true
	w, err := NewWriter(path, plan(t, c, opt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Abort)
	return w
}
