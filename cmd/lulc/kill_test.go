package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/pipeline"
)

// The test binary doubles as lulc when LULC_TEST_MAIN=1, so that tests can
// run it as a separate process and kill it.
// With LULC_TEST_FSIZE it also limits the size of files it may write, as
// a full disk would.
func init() {
	if os.Getenv("LULC_TEST_MAIN") != "1" {
		return
	}
	if v := os.Getenv("LULC_TEST_FSIZE"); v != "" {
		n, _ := strconv.ParseUint(v, 10, 64)
		signal.Ignore(syscall.SIGXFSZ) // make writes fail with EFBIG instead
		syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
	}
	main()
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
	// Kill once the stack COG is being encoded.
	killWhen(t, filepath.Join(dir, ".out.partial", "31TEJ", ".stack.tif.tmp"), 0, args(out)...)
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

// killWhen runs lulc with args as a separate process and kills it with
// SIGKILL once file exists (or a minute has passed), after a further delay.
func killWhen(t *testing.T, file string, delay time.Duration, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "LULC_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(file) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(delay)
	cmd.Process.Kill()
	cmd.Wait()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// demoRun makes a tiny scene, its stack and a model in dir.
func demoRun(t *testing.T, dir string) (stack, model string) {
	t.Helper()
	scene, stack, run := filepath.Join(dir, "scene"), filepath.Join(dir, "stack"), filepath.Join(dir, "run")
	for _, args := range [][]string{
		{"synth", "-q", "--out", scene},
		{"ingest", "-q", "--catalog", filepath.Join(scene, "catalog.json"), "--out", stack},
		{"train", "-q", "--stack", stack, "--out", run},
	} {
		if code, _, stderr := lulc(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	return stack, filepath.Join(run, "model.lulcrf")
}

// TestPredictDiskFull runs lulc predict where files may not exceed 3 kB:
// the write fails, lulc exits non-zero naming the problem, and no class map
// is left at the final path.
func TestPredictDiskFull(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	out := filepath.Join(dir, "pred")
	cmd := exec.Command(os.Args[0], "predict", "-q", "--model", model, "--input", stack, "--out", out)
	cmd.Env = append(os.Environ(), "LULC_TEST_MAIN=1", "LULC_TEST_FSIZE=3000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		t.Fatal("predict succeeded with a 3 kB file size limit")
	}
	if !strings.Contains(strings.ToLower(stderr.String()), "too large") && !strings.Contains(stderr.String(), "write") {
		t.Errorf("error does not say what failed: %q", stderr.String())
	}
	if fileExists(out) {
		t.Error("a failed prediction left its output")
	}
}

// TestPredictInterrupt sends SIGINT mid-run: lulc stops, exits non-zero
// and leaves nothing at the final path; --resume then completes it.
func TestPredictInterrupt(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	out := filepath.Join(dir, "pred")
	cmd := exec.Command(os.Args[0], "predict", "-q", "--model", model, "--input", stack, "--out", out, "--window", "512")
	cmd.Env = append(os.Environ(), "LULC_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dir, ".pred.partial")
	deadline := time.Now().Add(20 * time.Second)
	for !fileExists(staging) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if fileExists(filepath.Join(out, "31TEJ", "class.tif")) && err == nil {
		t.Skip("prediction finished before the interrupt arrived")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted predict: %v, want exit code %d", err, exitInterrupted)
	}
	if fileExists(out) {
		t.Fatal("interrupted predict left its output")
	}
	if code, _, stderr := lulc(t, "predict", "-q", "--resume", "--model", model, "--input", stack, "--out", out); code != 0 {
		t.Fatalf("resume: %s", stderr)
	}
	if !fileExists(filepath.Join(out, "31TEJ", "class.tif")) {
		t.Error("resumed predict wrote no class map")
	}
}

// TestRunSurvivesKill kills `lulc run` with SIGKILL while it maps, reruns
// it, and expects the bytes of an uninterrupted run in every file but the
// timings (report.json, model/run.json) and the commit record that lists
// report.json's checksum.
func TestRunSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", scene); code != 0 {
		t.Fatal(stderr)
	}
	args := func(out string) []string {
		return []string{"run", "-q", "--stack", "--catalog", filepath.Join(scene, "catalog.json"), "--out", out}
	}
	want := filepath.Join(dir, "want")
	if code, _, stderr := lulc(t, args(want)...); code != 0 {
		t.Fatal(stderr)
	}
	out := filepath.Join(dir, "out")
	// Kill while it maps: shortly after the trained model is staged. A
	// fast machine can finish the tiny scene's mapping within the delay;
	// then the output is removed and the kill tried sooner.
	for _, delay := range []time.Duration{50 * time.Millisecond, 10 * time.Millisecond, 0} {
		killWhen(t, filepath.Join(dir, ".out.partial", "model", "model.lulcrf"), delay, args(out)...)
		if !fileExists(out) {
			break
		}
		t.Logf("the process finished within %v of staging its model; killing sooner", delay)
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
	}
	if fileExists(filepath.Join(dir, ".out.partial")) {
		if code, _, stderr := lulc(t, args(out)...); code != 0 {
			t.Fatalf("rerun after kill: %s", stderr)
		}
	} else {
		t.Fatal("the process was never killed before it finished: nothing to resume")
	}
	n := 0
	filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		if rel == "report.json" || rel == pipeline.TaskCommitFile || rel == filepath.Join("model", "run.json") {
			return nil
		}
		n++
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs after kill and rerun", rel)
		}
		return nil
	})
	if n < 10 {
		t.Errorf("compared only %d files", n)
	}
}
