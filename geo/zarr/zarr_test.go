package zarr

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// writeStore writes a store of a w × h grid with a uint16 and a uint8
// array whose values are a function of position, windows of side win in
// shuffled order on four goroutines, and x/y/scalar arrays beside them.
func writeStore(t *testing.T, path string, w, h, win int, opt Options) []File {
	t.Helper()
	zw, err := Create(path, w, h, map[string]any{"title": "test"}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := zw.Grid("B04", Uint16, 0, map[string]any{"scale_factor": 0.0001}); err != nil {
		t.Fatal(err)
	}
	if err := zw.Grid("labels", Uint8, 0, nil); err != nil {
		t.Fatal(err)
	}
	xs := make([]float64, w)
	for i := range xs {
		xs[i] = 500000 + 10*float64(i) + 5
	}
	if err := zw.Whole("x", []int{w}, []string{"x"}, xs, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := zw.Whole("spatial_ref", nil, nil, []int32{}, 0, map[string]any{"crs_wkt": "PROJCS[]"}); err != nil {
		t.Fatal(err)
	}
	type window struct{ x, y, w, h int }
	var wins []window
	for y := 0; y < h; y += win {
		for x := 0; x < w; x += win {
			wins = append(wins, window{x, y, min(win, w-x), min(win, h-y)})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(wins), func(i, j int) { wins[i], wins[j] = wins[j], wins[i] })
	ch := make(chan window)
	var wg sync.WaitGroup
	errs := make(chan error, len(wins)*2)
	for range 4 {
		wg.Go(func() {
			for v := range ch {
				a, b := make([]uint16, v.w*v.h), make([]uint8, v.w*v.h)
				for yy := range v.h {
					for xx := range v.w {
						a[yy*v.w+xx], b[yy*v.w+xx] = value16(v.x+xx, v.y+yy), uint8((v.x+xx+v.y+yy)%11)
					}
				}
				errs <- zw.Write("B04", v.x, v.y, v.w, v.h, a)
				errs <- zw.Write("labels", v.x, v.y, v.w, v.h, b)
			}
		})
	}
	for _, v := range wins {
		ch <- v
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	files, err := zw.Close()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func value16(x, y int) uint16 { return uint16(x*7 + y*13 + x*y%5) }

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name      string
		w, h, win int
		opt       Options
	}{
		{"edges", 1000, 700, 128, Options{Chunk: 256, Shard: 512}},
		{"small", 100, 60, 512, Options{}},
		{"unaligned windows", 777, 513, 200, Options{Chunk: 128, Shard: 384}},
		{"compressed in the background", 1000, 700, 128, Options{Chunk: 256, Shard: 512, Background: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stack.zarr")
			files := writeStore(t, path, c.w, c.h, c.win, c.opt)
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), ".stack.zarr.partial")); !os.IsNotExist(err) {
				t.Errorf("staging directory left behind: %v", err)
			}
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(path, f.Path)); err != nil {
					t.Errorf("listed file %s: %v", f.Path, err)
				}
			}
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := strings.Join(s.Names(), ","); got != "B04,labels,spatial_ref,x" {
				t.Fatalf("arrays %s", got)
			}
			a, err := s.Read("B04")
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Read("labels")
			if err != nil {
				t.Fatal(err)
			}
			for y := range c.h {
				for x := range c.w {
					if got, want := a[y*c.w+x], float64(value16(x, y)); got != want {
						t.Fatalf("B04 at (%d, %d): %v, want %v", x, y, got, want)
					}
					if got, want := b[y*c.w+x], float64((x+y)%11); got != want {
						t.Fatalf("labels at (%d, %d): %v, want %v", x, y, got, want)
					}
				}
			}
			win, err := s.ReadWindow("B04", c.w/3, c.h/4, c.w/2, c.h/2)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := win[5*(c.w/2)+3], float64(value16(c.w/3+3, c.h/4+5)); got != want {
				t.Errorf("window value %v, want %v", got, want)
			}
			xs, err := s.Read("x")
			if err != nil || len(xs) != c.w || xs[1] != 500015 {
				t.Errorf("x: %v %v", xs[:2], err)
			}
			if v, err := s.Read("spatial_ref"); err != nil || len(v) != 1 || v[0] != 0 {
				t.Errorf("spatial_ref: %v %v", v, err)
			}
			if s.Arrays["B04"].DimensionNames[0] != "y" || s.Group.Attributes["title"] != "test" {
				t.Errorf("metadata: %+v %+v", s.Arrays["B04"], s.Group.Attributes)
			}
		})
	}
}

// TestReproducible writes the same store twice, windows in different
// orders: the same files, byte for byte.
func TestReproducible(t *testing.T) {
	a := writeStore(t, filepath.Join(t.TempDir(), "a.zarr"), 600, 500, 100, Options{Chunk: 128, Shard: 256})
	b := writeStore(t, filepath.Join(t.TempDir(), "b.zarr"), 600, 500, 300, Options{Chunk: 128, Shard: 256, Background: 2})
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two writes differ:\n%s\n%s", ja, jb)
	}
}

// TestRefused: overlapping or missing windows, a corrupt shard index, and
// names that are not portable are errors that say what is wrong, and an
// incomplete store never appears at its path.
func TestRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.zarr")
	zw, err := Create(path, 300, 200, nil, Options{Chunk: 128, Shard: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := zw.Grid("p10(ndvi)", Uint16, 0, nil); err == nil || !strings.Contains(err.Error(), "portable") {
		t.Errorf("name with parentheses: %v", err)
	}
	if err := zw.Grid("B04", Uint16, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := zw.Write("B04", 0, 0, 100, 100, make([]uint16, 100*100)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Write("B04", 50, 50, 100, 100, make([]uint16, 100*100)); err != nil && !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlap: %v", err)
	}
	if err := zw.Write("B04", 250, 150, 100, 100, make([]uint16, 100*100)); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("window outside: %v", err)
	}
	if _, err := zw.Close(); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("incomplete store closed: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("an incomplete store exists: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}

	good := filepath.Join(dir, "good.zarr")
	writeStore(t, good, 300, 200, 100, Options{Chunk: 128, Shard: 256})
	shard := filepath.Join(good, "B04", "c", "0", "0")
	raw, _ := os.ReadFile(shard)
	raw[len(raw)-10] ^= 0xff
	os.WriteFile(shard, raw, 0o644)
	s, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read("B04"); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupt index: %v", err)
	}
}
