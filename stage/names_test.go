package stage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/atomicfs"
)

func TestTileDirStaysInsideTheStage(t *testing.T) {
	final := filepath.Join(t.TempDir(), "out")
	staging, err := atomicfs.Begin(context.Background(), final, false, false, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer staging.Release()
	outside := t.TempDir()
	// A resumed stage may hold what an attacker left there.
	if err := os.Symlink(outside, staging.Path("T1")); err != nil {
		t.Fatal(err)
	}
	if _, err := TileDir(staging, "T1"); err == nil || !strings.Contains(err.Error(), "outside the output") {
		t.Errorf("a link out of the stage: %v", err)
	}
	if _, err := TileDir(staging, ".."); err == nil {
		t.Error(".. accepted")
	}
	if d, err := TileDir(staging, "T2"); err != nil || d != staging.Path("T2") {
		t.Errorf("T2: %q %v", d, err)
	}
}
