package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// TestIngestRawBandsSameBytes ingests the small scene (4×4 tiles of 512
// px a band, four dates) in 512-pixel windows twice on the CPU: as always,
// and taking the bands compressed, read a row of windows ahead
// (decodeAhead) and decoded by package decode, as a device that decodes
// does. The stacks, labels and counts must be the same bytes, and the
// compressed path must have been taken; and again with a read-ahead
// budget that lets one row be in progress at a time.
func TestIngestRawBandsSameBytes(t *testing.T) {
	raw, err := configs.Read("synth-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	scene := makeScene(t, "small", scfg)
	raw, err = configs.Read("ingest-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source.Catalog = filepath.Join(scene, "catalog.json")
	cfg.Window = 512
	run := func(name string, h stage.Hooks) (string, string) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		out := filepath.Join(t.TempDir(), name)
		if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test", Log: log, Hooks: h}); err != nil {
			t.Fatal(err)
		}
		return out, logs.String()
	}
	gdal, _ := run("gdal", stage.Hooks{})
	lulc, logs := run("raw", stage.Hooks{RawOnCPU: true})
	if !strings.Contains(logs, "raw_rects=") || strings.Contains(logs, "raw_rects=0 ") {
		t.Fatalf("the compressed path was not taken:\n%s", logs)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
		a, err := os.ReadFile(filepath.Join(gdal, "31TEJ", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(lulc, "31TEJ", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between GDAL's decoding and lulc's", f)
		}
	}
	// Reading a row fails: that row's windows and the later ones read for
	// themselves, and the bytes stay the same (rows planned before the
	// failure point into buffers never filled, and must not be used).
	failed, logs := run("raw-failed", stage.Hooks{RawOnCPU: true, AheadFail: 1 + 1})
	if !strings.Contains(logs, "reading tiles ahead failed") {
		t.Errorf("no failure logged:\n%s", logs)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
		a, _ := os.ReadFile(filepath.Join(gdal, "31TEJ", f))
		b, err := os.ReadFile(filepath.Join(failed, "31TEJ", f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs when a row read ahead fails", f)
		}
	}
	// A budget too small for two rows' compressed bytes: the reader reads
	// a row only when no other is in progress, and the bytes stay the same.
	tight, logs := run("raw-tight", stage.Hooks{RawOnCPU: true, AheadBudget: 1})
	if !strings.Contains(logs, "rows_in_progress_max=1 ") || !strings.Contains(logs, "budget_bytes=1") {
		t.Errorf("with a budget of 1 byte, more than one row was in progress:\n%s", logs)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
		a, _ := os.ReadFile(filepath.Join(gdal, "31TEJ", f))
		b, err := os.ReadFile(filepath.Join(tight, "31TEJ", f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs with a tight read-ahead budget", f)
		}
	}
}

// TestAheadBudgetWithinHeapLimit: the rows read ahead take at most a
// quarter of the Go heap's limit (at least 1 GiB), so that they never
// hold the heap at its limit, where the collector runs without pause.
func TestAheadBudgetWithinHeapLimit(t *testing.T) {
	old := debug.SetMemoryLimit(6 << 30)
	defer debug.SetMemoryLimit(old)
	if b := ingest.AheadBudget(0); b > 6<<30/4 || b < 1<<30 {
		t.Errorf("budget %d bytes under a 6 GiB heap limit, want at most 1.5 GiB and at least 1 GiB", b)
	}
	debug.SetMemoryLimit(2 << 30)
	if b := ingest.AheadBudget(0); b != 1<<30 {
		t.Errorf("budget %d bytes under a 2 GiB heap limit, want 1 GiB", b)
	}
}

// TestAheadReleaseOrder: the device frees a row's batch only once every
// row taking its tiles is done and the row after the last of them has
// been laid out without them; and everything once the reader stops.
func TestAheadReleaseOrder(t *testing.T) {
	b := []*cuda.AheadBatch{cuda.NewAheadBatch(), cuda.NewAheadBatch(), cuda.NewAheadBatch(), cuda.NewAheadBatch()}
	a := &ingest.DecodeAhead{Rows: make([][]geo.Grid, 4), Batches: slices.Clone(b), LastUse: []int{0, 2, 2, 3},
		Left: []int{1, 1, 1, 1}, Released: make([]bool, 4), Planned: 3}
	a.Finished = sync.NewCond(&a.Mu)
	free := func(want ...int) {
		t.Helper()
		got := a.Releasable(false)
		var ids []int
		for _, g := range got {
			ids = append(ids, slices.Index(b, g))
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("released %v, want %v (left %v, planned %d)", ids, want, a.Left, a.Planned)
		}
	}
	free()
	a.Left[0] = 0
	free(0) // row 1 was laid out without row 0's tiles
	a.Left[1] = 0
	free() // row 2 takes row 1's tiles and is not done
	a.Left[2] = 0
	free() // row 3 is not laid out yet: it might take them
	a.Planned = 4
	free(1, 2)
	free()
	a.Left[3] = 0
	free(3) // the last row
	a.Batches = slices.Clone(b)
	a.Released = make([]bool, 4)
	a.Left = []int{1, 1, 1, 1}
	if got := a.Releasable(true); len(got) != 4 {
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
	if n := ingest.WindowWorkers(16, gb/4, 24*gb, log); n != 16 || logs.Len() != 0 {
		t.Errorf("16 windows of 256 MB in 12 GB: %d at once, log %q", n, logs.String())
	}
	if n := ingest.WindowWorkers(16, gb, 24*gb, log); n != 12 || !strings.Contains(logs.String(), "windows_at_once=12") {
		t.Errorf("16 windows of 1 GB in 12 GB: %d at once, log %q", n, logs.String())
	}
	if n := ingest.WindowWorkers(16, 40*gb, 24*gb, log); n != 1 {
		t.Errorf("a window over the budget: %d at once, want 1", n)
	}
	if n := ingest.WindowWorkers(16, gb, 0, log); n != 16 {
		t.Errorf("an unknown budget: %d at once, want 16", n)
	}
}
