package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lulc/lulc/internal/atomicfs"
)

// reservedNames are the entries lulc writes at the root of an ingest,
// predict or run output (and of a job directory), which a tile's
// directory must not take: a tile named "model" would write into the
// run's model, one named "shards" among the tasks of an array job.
var reservedNames = []string{
	"model", "shards", "draws", CollectDir, CollectionFile, IngestConfigFile,
	"run.yaml", "report.json", "report.md", DrawFile, RunMetricsFile,
}

// checkTileName refuses a tile name from data (an item's s2:mgrs_tile or
// grid:code, its id, a plan's tile, a raster pair's tile, a manifest's
// tile) that cannot be a directory of its own in an output: what
// atomicfs.CheckName refuses, a hidden name (lulc's staging and spill
// entries start with a dot) and the names of lulc's own entries.
func checkTileName(name string) error {
	if err := atomicfs.CheckName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, ".") {
		return fmt.Errorf("%w: %q: it starts with a dot, as lulc's hidden staging entries do", atomicfs.ErrBadName, name)
	}
	for _, r := range reservedNames {
		// Case-folded: on macOS and Windows file systems "Model" is "model".
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%w: %q: lulc writes its own %s there", atomicfs.ErrBadName, name, r)
		}
	}
	return nil
}

// tileDir is the directory of a tile in a stage, checked: the name with
// checkTileName, the path to lie inside the stage (atomicfs.Entry).
func tileDir(stage *atomicfs.Stage, name string) (string, error) {
	if err := checkTileName(name); err != nil {
		return "", fmt.Errorf("tile: %w", err)
	}
	dir, err := atomicfs.Entry(stage.Dir, name)
	if err != nil {
		return "", fmt.Errorf("tile %s: %w", name, err)
	}
	return dir, nil
}

// newTileOut is where a tile of an output writes its files, checked as
// tileDir checks them.
func newTileOut(stage *atomicfs.Stage, name string, c collectionRef) (tileOut, error) {
	dir, err := tileDir(stage, name)
	if err != nil {
		return tileOut{}, err
	}
	return tileOut{dir: dir, final: filepath.Join(stage.Final, name), collection: c}, nil
}
