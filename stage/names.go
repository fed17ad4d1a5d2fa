package stage

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/stage/config"
)

// TileDir is the directory of a tile in a stage, checked: the name with
// checkTileName, the path to lie inside the stage (atomicfs.Entry).
func TileDir(staging *atomicfs.Stage, name string) (string, error) {
	if err := config.CheckTileName(name); err != nil {
		return "", fmt.Errorf("tile: %w", err)
	}
	dir, err := atomicfs.Entry(staging.Dir, name)
	if err != nil {
		return "", fmt.Errorf("tile %s: %w", name, err)
	}
	return dir, nil
}

// NewTileOut is where a tile of an output writes its files, checked as
// tileDir checks them.
func NewTileOut(staging *atomicfs.Stage, name string, c CollectionRef) (TileOut, error) {
	dir, err := TileDir(staging, name)
	if err != nil {
		return TileOut{}, err
	}
	return TileOut{Dir: dir, Final: filepath.Join(staging.Final, name), Collection: c}, nil
}

// Output files per tile.
const (
	ClassFile      = "class.tif"
	ConfidenceFile = "confidence.tif"
	QuicklookFile  = "quicklook.png"
	ItemFile       = "item.json"
	// ClassNamesFile holds the class map's category names, where GDAL
	// reads them (a GeoTIFF has no tag for them).
	ClassNamesFile = ClassFile + ".aux.xml"
	// StyleFile is the class map's QGIS style (colours and names), which
	// QGIS applies when it opens class.tif.
	StyleFile = "class.qml"
)

// SHA256 is the SHA-256 digest of b.
func SHA256(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// Files of a training run directory.
const (
	SamplesFile = "samples.lulcs"
	ModelFile   = "model.lulcrf"
	MetricsFile = "metrics.json"
)

// CollectDir is where lulc collect writes, under the job's output.
const CollectDir = "collection"

// DrawFile is a sample phase's output: the draw of its tiles (a samples
// file marked as a draw, see sampleset.Draw).
const DrawFile = "draw.lulcd"

// RunMetricsFile is the per-tile evaluation a run writes beside the map.
const RunMetricsFile = "metrics.json"

// GroupsFile is a tile's group ids (UInt32, 0: no feature) when its labels
// came from a vector layer.
const GroupsFile = "groups.tif"

// WeightsFile is a tile's pixel weights (UInt8, 0: never drawn) when its
// labels came from a vector layer with source.label_weight_field.
const WeightsFile = "weights.tif"
