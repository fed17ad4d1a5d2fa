package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/scenes"
)

func TestCheckTileName(t *testing.T) {
	for _, ok := range []string{"31TEJ", "field-7", "plot.a"} {
		if err := config.CheckTileName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../../victim", "a/b", `a\b`, "a\nb", ".spill", ".out.partial", "model", "Model", "shards", "collection", "report.json", "ingest.yaml"} {
		if err := config.CheckTileName(bad); !errors.Is(err, atomicfs.ErrBadName) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
}

func TestGroupByTileRefusesBadTileIDs(t *testing.T) {
	day := time.Date(2024, 4, 18, 0, 0, 0, 0, time.UTC)
	good := catalog.Item{ID: "S2A_31TEJ", Tile: "31TEJ", Datetime: day}
	for _, it := range []catalog.Item{
		{ID: "evil", Tile: "../../victim", Datetime: day, Location: "/cat/evil.json"},
		{ID: "dot", Tile: ".", Datetime: day},
		// Without a tile the id names the directory.
		{ID: "../up", Datetime: day},
	} {
		_, err := scenes.GroupByTile([]catalog.Item{good, it})
		if err == nil || !strings.Contains(err.Error(), `item "`+it.ID+`"`) || !errors.Is(err, atomicfs.ErrBadName) {
			t.Errorf("%+v: got %v", it, err)
		}
	}
	g, err := scenes.GroupByTile([]catalog.Item{good})
	if err != nil || len(g) != 1 || g[0].Tile != "31TEJ" {
		t.Errorf("good item: %v %v", g, err)
	}
}

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
	if _, err := stage.TileDir(staging, "T1"); err == nil || !strings.Contains(err.Error(), "outside the output") {
		t.Errorf("a link out of the stage: %v", err)
	}
	if _, err := stage.TileDir(staging, ".."); err == nil {
		t.Error(".. accepted")
	}
	if d, err := stage.TileDir(staging, "T2"); err != nil || d != staging.Path("T2") {
		t.Errorf("T2: %q %v", d, err)
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
