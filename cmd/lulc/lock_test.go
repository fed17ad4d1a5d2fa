package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/internal/atomicfs"
)

// TestWritersOfOneOutput starts two predictions into the same new output
// at once: one writes it, the other fails (exit 1) saying who holds it or
// that it exists, and the output is complete and unlocked.
func TestWritersOfOneOutput(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	out := filepath.Join(dir, "pred")
	var wg sync.WaitGroup
	codes, errs := make([]int, 2), make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			codes[i], _, errs[i] = lulc(t, "predict", "-q", "--model", model, "--input", stack, "--out", out)
		})
	}
	wg.Wait()
	if codes[0]+codes[1] != 1 {
		t.Fatalf("exit codes %v, want one 0 and one 1: %q", codes, errs)
	}
	loser := errs[0] + errs[1]
	if !strings.Contains(loser, "held by") && !strings.Contains(loser, "already exists") {
		t.Errorf("the refused writer does not say why: %q", loser)
	}
	if !fileExists(filepath.Join(out, "31TEJ", "class.tif")) || fileExists(atomicfs.LockPath(out)) || fileExists(atomicfs.StagingDir(out)) {
		t.Error("the output is not complete, or its lock or staging directory is left")
	}
}

// TestLockHolders: a live writer's lock refuses others, naming its host
// and PID; --break-lock takes it over; a dead writer's lock on this host
// is taken over without being asked.
func TestLockHolders(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	out := filepath.Join(dir, "pred")
	holder := exec.Command("sleep", "60")
	if err := holder.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	defer holder.Process.Kill()
	host, _ := os.Hostname()
	writeHolder := func(pid int) {
		body, _ := json.Marshal(atomicfs.Holder{Host: host, PID: pid, Command: "lulc predict (another)"})
		if err := os.WriteFile(atomicfs.LockPath(out), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"predict", "-q", "--model", model, "--input", stack, "--out", out}

	writeHolder(holder.Process.Pid)
	code, _, stderr := lulc(t, args...)
	if code != 1 || !strings.Contains(stderr, "pid "+strconv.Itoa(holder.Process.Pid)) || !strings.Contains(stderr, host) {
		t.Fatalf("live holder: exit %d, %q", code, stderr)
	}
	if fileExists(out) || fileExists(atomicfs.StagingDir(out)) {
		t.Fatal("the refused writer wrote")
	}
	if code, _, stderr := lulc(t, append(args, "--break-lock")...); code != 0 {
		t.Fatalf("--break-lock: exit %d, %q", code, stderr)
	}

	holder.Process.Kill()
	holder.Wait()
	writeHolder(holder.Process.Pid)
	if code, _, stderr := lulc(t, append(args, "--force")...); code != 0 {
		t.Fatalf("dead holder: exit %d, %q", code, stderr)
	}
	if fileExists(atomicfs.LockPath(out)) {
		t.Fatal("lock left after a successful run")
	}
}
