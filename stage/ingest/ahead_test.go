package ingest

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
)

// TestAheadBudgetWithinHeapLimit: the rows read ahead take at most a
// quarter of the Go heap's limit (at least 1 GiB), so that they never
// hold the heap at its limit, where the collector runs without pause.
func TestAheadBudgetWithinHeapLimit(t *testing.T) {
	old := debug.SetMemoryLimit(6 << 30)
	defer debug.SetMemoryLimit(old)
	if b := aheadBudget(0); b > 6<<30/4 || b < 1<<30 {
		t.Errorf("budget %d bytes under a 6 GiB heap limit, want at most 1.5 GiB and at least 1 GiB", b)
	}
	debug.SetMemoryLimit(2 << 30)
	if b := aheadBudget(0); b != 1<<30 {
		t.Errorf("budget %d bytes under a 2 GiB heap limit, want 1 GiB", b)
	}
}

// TestAheadReleaseOrder: the device frees a row's batch only once every
// row taking its tiles is done and the row after the last of them has
// been laid out without them; and everything once the reader stops.
func TestAheadReleaseOrder(t *testing.T) {
	b := []*cuda.AheadBatch{cuda.NewAheadBatch(), cuda.NewAheadBatch(), cuda.NewAheadBatch(), cuda.NewAheadBatch()}
	a := &DecodeAhead{rows: make([][]geo.Grid, 4), batches: slices.Clone(b), lastUse: []int{0, 2, 2, 3},
		Left: []int{1, 1, 1, 1}, released: make([]bool, 4), planned: 3}
	a.finished = sync.NewCond(&a.mu)
	free := func(want ...int) {
		t.Helper()
		got := a.releasable(false)
		var ids []int
		for _, g := range got {
			ids = append(ids, slices.Index(b, g))
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("released %v, want %v (left %v, planned %d)", ids, want, a.Left, a.planned)
		}
	}
	free()
	a.Left[0] = 0
	free(0) // row 1 was laid out without row 0's tiles
	a.Left[1] = 0
	free() // row 2 takes row 1's tiles and is not done
	a.Left[2] = 0
	free() // row 3 is not laid out yet: it might take them
	a.planned = 4
	free(1, 2)
	free()
	a.Left[3] = 0
	free(3) // the last row
	a.batches = slices.Clone(b)
	a.released = make([]bool, 4)
	a.Left = []int{1, 1, 1, 1}
	if got := a.releasable(true); len(got) != 4 {
		t.Fatalf("a stopped reader released %d batches, want 4", len(got))
	}
}

// TestWindowWorkersWithinMemory: windows that hold every date's bands on
// the host are composited no more at once than half the budget holds (at
// least one), and the log says so; within it, every worker works.
func TestWindowWorkersWithinMemory(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	gb := int64(1) << 30
	if n := windowWorkers(16, gb/4, 24*gb, log); n != 16 || logs.Len() != 0 {
		t.Errorf("16 windows of 256 MB in 12 GB: %d at once, log %q", n, logs.String())
	}
	if n := windowWorkers(16, gb, 24*gb, log); n != 12 || !strings.Contains(logs.String(), "windows_at_once=12") {
		t.Errorf("16 windows of 1 GB in 12 GB: %d at once, log %q", n, logs.String())
	}
	if n := windowWorkers(16, 40*gb, 24*gb, log); n != 1 {
		t.Errorf("a window over the budget: %d at once, want 1", n)
	}
	if n := windowWorkers(16, gb, 0, log); n != 16 {
		t.Errorf("an unknown budget: %d at once, want 16", n)
	}
}

// TestOpenSourceSharesCRS: workers opening one source at once all get
// its EPSG code (one reads it, the others wait for it), and a source that
// cannot be opened fails for every one of them.
func TestOpenSourceSharesCRS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.tif")
	g := geo.Grid{EPSG: 32631, Width: 8, Height: 8, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	if err := raster.WriteCOG(path, g, make([]uint16, 64), raster.COGOptions{}); err != nil {
		t.Fatal(err)
	}
	var j windowJob
	var wg sync.WaitGroup
	epsg := make([]int, 16)
	errs := make([]error, 16)
	for i := range epsg {
		wg.Go(func() {
			s, err := j.openSource(path)
			if err != nil {
				errs[i] = err
				return
			}
			epsg[i] = s.EPSG
			s.Close()
			if _, errs[i] = j.openSource(filepath.Join(filepath.Dir(path), "none.tif")); errs[i] == nil {
				errs[i] = errors.New("a missing source opened")
			} else {
				errs[i] = nil
			}
		})
	}
	wg.Wait()
	for i := range epsg {
		if errs[i] != nil || epsg[i] != 32631 {
			t.Errorf("worker %d: EPSG %d, %v", i, epsg[i], errs[i])
		}
	}
}
