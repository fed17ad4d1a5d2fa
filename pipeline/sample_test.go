package pipeline

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// TestSampleFilesMatchMemory checks that drawing from a tile's files (the
// stack and labels as ingest writes them, read strip by strip through
// GDAL) gives the samples a draw from the tile in memory gives: the same
// pixels, features and splits, bit for bit, only the sources' names
// differing.
func TestSampleFilesMatchMemory(t *testing.T) {
	tile := syntheticTile(300, 260, 7)
	var cfg config.TrainConfig
	cfg.Features = []string{"B02", "B04", "B08", "B11", "ndvi", "ndwi", "nbr"}
	cfg.Sampling = config.SamplingConfig{MaxPerClass: 400, BlockSize: 16, ValidationFraction: 0.3, Seed: 11}
	zero := 0.0
	mem := train.Input{Image: tile.Name, Labels: tile.Name, Bands: tile.Bands, Scale: tile.Scale, Offset: tile.Offset, Nodata: &zero, Mem: tile, InMemory: true}

	dir := t.TempDir()
	img, lab := filepath.Join(dir, "stack.tif"), filepath.Join(dir, "labels.tif")
	w, err := raster.NewWriter(img, tile.Grid, "uint16", make([]raster.BandInfo, len(tile.DN)), raster.COGOptions{BlockSize: 256, Compress: "DEFLATE"})
	if err != nil {
		t.Fatal(err)
	}
	for b, plane := range tile.DN {
		if err := w.Write(b, 0, 0, tile.Grid.Width, tile.Grid.Height, plane); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := raster.WriteCOG(lab, tile.Grid, tile.Labels, raster.COGOptions{BlockSize: 256, Compress: "DEFLATE"}); err != nil {
		t.Fatal(err)
	}
	file := mem
	file.Image, file.Labels, file.Mem, file.InMemory = img, lab, nil, false

	draw := func(in train.Input) *sampleset.Set {
		t.Helper()
		set, _, err := train.Sample(cfg, []train.Input{in}, landcover.WorldCover, stage.Options{}.Engine(), progress.Nop{})
		if err != nil {
			t.Fatal(err)
		}
		set.Sources = nil
		return set
	}
	a, b := draw(mem), draw(file)
	if a.N() == 0 {
		t.Fatal("no samples drawn")
	}
	ab, _ := a.Encode()
	bb, _ := b.Encode()
	if !bytes.Equal(ab, bb) {
		t.Errorf("samples from files (%d) differ from those from memory (%d)", b.N(), a.N())
	}

	// A stack whose band count is not the input's is refused, naming it.
	short := file
	short.Bands = tile.Bands[:4]
	if _, _, err := train.Sample(cfg, []train.Input{short}, landcover.WorldCover, stage.Options{}.Engine(), progress.Nop{}); err == nil {
		t.Error("a stack with more bands than listed was accepted")
	}
}
