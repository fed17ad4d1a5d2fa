package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

func TestReadPlanRefusesBadTiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		tiles []PlanTile
		want  string
	}{
		{[]PlanTile{{Tile: "../../victim"}}, "tiles[0]"},
		{[]PlanTile{{Tile: "31TEJ"}, {Tile: ""}}, "tiles[1]"},
		{[]PlanTile{{Tile: "31TEJ"}, {Tile: "31TEJ"}}, "also tiles[0]"},
		{[]PlanTile{{Tile: "model"}}, "model"},
	} {
		// Every tile has a scene: the names alone are under test.
		for i := range tc.tiles {
			tc.tiles[i].Items = []catalog.Item{{}}
		}
		p := JobPlan{Version: PlanVersion, Tiles: tc.tiles}
		p.Digest = p.digest()
		path := filepath.Join(dir, "plan.json")
		if err := os.WriteFile(path, p.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPlan(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.tiles, err, tc.want)
		}
	}
}

// TestCollectRefusesBadTileNames: a task's report.json names its tiles,
// and collect reads each tile's directory by that name: one that leads
// out of the task is refused, naming the report.
func TestCollectRefusesBadTileNames(t *testing.T) {
	out := t.TempDir()
	task := filepath.Join(out, "shards", "0-of-1")
	if err := os.MkdirAll(task, 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"job": "j", "tiles": [{"tile": "../../../etc"}]}`
	if err := os.WriteFile(filepath.Join(task, "report.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The attacker makes the task's commit record again: it then holds,
	// and the names are what stops the read.
	if err := writeTaskCommit(task, "j"); err != nil {
		t.Fatal(err)
	}
	_, err := Collect(context.Background(), out, stage.Options{})
	if err == nil || !strings.Contains(err.Error(), "report.json") || !errors.Is(err, atomicfs.ErrBadName) {
		t.Fatalf("got %v", err)
	}
}

// TestReservedNamesAreOutputs holds config's reserved tile names to the
// names of what the stages and the job layer write at an output's root:
// config spells them out, as the packages that own them import it.
func TestReservedNamesAreOutputs(t *testing.T) {
	for _, name := range []string{stage.CollectDir, stage.CollectionFile, stage.DrawFile, stage.RunMetricsFile, config.IngestConfigFile} {
		if err := config.CheckTileName(name); !errors.Is(err, atomicfs.ErrBadName) {
			t.Errorf("a tile named %q (an output's own file) is not refused: %v", name, err)
		}
	}
}
