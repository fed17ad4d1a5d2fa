package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	scene, cfg := smallScene(t)
	cfg.Source.Catalog = filepath.Join(scene, "catalog.json")
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

// BenchmarkIngestRemote ingests the small scene (four dates) on the CPU
// from a static catalog served over HTTP with 20 ms before each answer, as
// a remote catalog's round trips would: lulc's way (remote bands taken
// compressed, rows of windows read ahead) and GDAL reading them window by
// window (Compare.RemoteGDAL, LULC_REMOTE_AHEAD=off). Each iteration
// serves the scene under a path of its own, so that GDAL's cache of what
// it read before does not answer for the server. It reports the requests
// an ingest made.
func BenchmarkIngestRemote(b *testing.B) {
	scene, cfg := smallScene(b)
	files := http.FileServer(http.Dir(scene))
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		time.Sleep(20 * time.Millisecond)
		// /run-N/rest serves the scene's rest.
		if i := strings.Index(r.URL.Path[1:], "/"); i >= 0 {
			r.URL.Path = r.URL.Path[1+i:]
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	run := 0
	for _, mode := range []string{"ahead", "gdal"} {
		b.Run(mode, func(b *testing.B) {
			requests.Store(0)
			for b.Loop() {
				run++
				cfg.Source.Catalog = fmt.Sprintf("%s/run-%d/catalog.json", srv.URL, run)
				opt := stage.Options{Out: filepath.Join(b.TempDir(), "stack"), Version: "test", Compare: stage.Compare{RemoteGDAL: mode == "gdal"}}
				if _, err := ingest.Ingest(context.Background(), cfg, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
		})
	}
}

// smallScene makes the small scene (4×4 tiles of 512 px a band, four
// dates) and returns it with the full ingest config in 512-pixel windows,
// its catalog left for the caller to point at the scene.
func smallScene(tb testing.TB) (string, config.IngestConfig) {
	tb.Helper()
	raw, err := configs.Read("synth-small.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	scfg, err := synth.ParseConfig(raw)
	if err != nil {
		tb.Fatal(err)
	}
	scene := makeScene(tb, "small", scfg)
	if raw, err = configs.Read("ingest-full.yaml"); err != nil {
		tb.Fatal(err)
	}
	cfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Window = 512
	return scene, cfg
}
