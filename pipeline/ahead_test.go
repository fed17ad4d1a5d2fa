package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
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
