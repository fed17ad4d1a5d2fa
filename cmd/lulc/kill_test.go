package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
)

// The test binary doubles as lulc when LULC_TEST_MAIN=1, so that tests can
// run it as a separate process and kill it.
func init() {
	if os.Getenv("LULC_TEST_MAIN") == "1" {
		main()
	}
}

// TestIngestSurvivesKill kills `lulc ingest` with SIGKILL mid-way, reruns
// it, and expects the bytes of an uninterrupted run.
func TestIngestSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	raw, _ := configs.Read("synth-tiny.yaml")
	synthCfg := filepath.Join(dir, "synth.yaml")
	os.WriteFile(synthCfg, []byte(strings.Replace(strings.Replace(string(raw), "size: 252", "size: 1500", 1), "bands_60m: true", "bands_60m: false", 1)), 0o644)
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "-c", synthCfg, "--out", scene); code != 0 {
		t.Fatal(stderr)
	}
	raw, _ = configs.Read("ingest-tiny.yaml")
	ingestCfg := filepath.Join(dir, "ingest.yaml")
	body := strings.Replace(string(raw), "bbox: [2.99, 45.12, 3.04, 45.16]", "bbox: [2.9, 45.0, 3.3, 45.2]", 1)
	body = strings.Replace(body, "window: 1024", "window: 512", 1)
	os.WriteFile(ingestCfg, []byte(body), 0o644)
	args := func(out string) []string {
		return []string{"ingest", "-q", "-c", ingestCfg, "--catalog", filepath.Join(scene, "catalog.json"), "--out", out}
	}

	want := filepath.Join(dir, "want")
	if code, _, stderr := lulc(t, args(want)...); code != 0 {
		t.Fatal(stderr)
	}

	out := filepath.Join(dir, "out")
	cmd := exec.Command(os.Args[0], args(out)...)
	cmd.Env = append(os.Environ(), "LULC_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once windows are being written.
	staging := filepath.Join(dir, ".out.partial", "31TEJ", ".stack.tif.tmp.gtiff")
	deadline := time.Now().Add(30 * time.Second)
	for !fileExists(staging) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	if fileExists(out) {
		t.Log("the process finished before it was killed; the rerun below proves less")
	}

	if code, _, stderr := lulc(t, args(out)...); code != 0 {
		t.Fatalf("rerun after kill: %s", stderr)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
		a, _ := os.ReadFile(filepath.Join(want, "31TEJ", f))
		b, _ := os.ReadFile(filepath.Join(out, "31TEJ", f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs after kill and rerun", f)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
