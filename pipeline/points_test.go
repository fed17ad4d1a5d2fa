package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// TestTrainFromSynthPoints trains from the point layer lulc synth writes
// (label_points): the tiny scene's composite, ingested from STAC, paired
// with the points as vector labels. Ingest burns each point into the
// one pixel that holds it (as raster.RasterizeLabels does, reprojected
// from lon/lat), and training draws only those pixels, every one of them
// with data under a cap no class reaches, on both sides of the split.
func TestTrainFromSynthPoints(t *testing.T) {
	cfg := synthConfig(t)
	cfg.LabelPoints = 3000
	scene := makeScene(t, "tiny-points", cfg)
	_, composite := mustIngest(t, ingestConfig(t, filepath.Join(scene, "catalog.json")))
	image := filepath.Join(composite, "31TEJ", "stack.tif")
	gpkg, _ := filepath.Glob(filepath.Join(scene, "esa-worldcover", "*", "*_points.gpkg"))
	if len(gpkg) != 1 {
		t.Fatalf("point layers: %v", gpkg)
	}
	raw := fmt.Sprintf(`source:
  rasters:
    - image: %s
      labels: %s
      tile: points
      datetime: 2024-06-01T10:00:00Z
  bands: [B02, B03, B04, B08, B05, B06, B07, B8A, B11, B12]
  scale: %g
  offset: %g
  nodata: 0
  label_field: %s
  label_layer: %s
bands: [B02, B03, B04, B08, B05, B06, B07, B8A, B11, B12]
grid:
  resolution: 10
window: 1024
output:
  compress: DEFLATE
  blocksize: 512
`, image, gpkg[0], stage.StackScale, stage.StackOffset, synth.PointsField, synth.PointsLayer)
	icfg, err := config.ParseIngestConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, stack := mustIngest(t, icfg)
	labels, g := readU16(t, filepath.Join(stack, "points", "labels.tif"), 1)
	g.EPSG = cfg.EPSG // the grid as read back names no EPSG code
	want, err := raster.RasterizeLabels(gpkg[0], raster.VectorLabels{Field: synth.PointsField}, g)
	if err != nil {
		t.Fatal(err)
	}
	labelled := map[uint64]uint8{}
	for i, v := range labels {
		if v != uint16(want[i]) {
			t.Fatalf("pixel %d: label %d, the point layer burns %d", i, v, want[i])
		}
		if v != 0 {
			labelled[uint64(i/g.Width)<<20|uint64(i%g.Width)] = uint8(v)
		}
	}
	// Label pixels are smaller than 10 m ones: a few points share a pixel.
	if len(labelled) < cfg.LabelPoints*9/10 || len(labelled) > cfg.LabelPoints {
		t.Fatalf("%d pixels labelled by %d points", len(labelled), cfg.LabelPoints)
	}
	pointPixels := len(labelled)

	// Pixels with no valid observation (DN 0 in every band) are never
	// candidates.
	for b := 1; b <= 10; b++ {
		dn, _ := readU16(t, filepath.Join(stack, "points", "stack.tif"), b)
		for p := range labelled {
			if dn[int(p>>20)*g.Width+int(p&(1<<20-1))] == 0 {
				delete(labelled, p)
			}
		}
	}

	tcfg := trainConfig(t, "train-demo.yaml", stack)
	tcfg.Sampling.MaxPerClass, tcfg.Sampling.MinPerClass = 100000, 1
	tcfg.Sampling.Buffer = 0 // every labelled point drawn: none dropped by the split's buffer
	res, out := mustTrain(t, tcfg)
	body, err := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	set, err := sampleset.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range set.Pixel {
		code, ok := labelled[p&(1<<40-1)]
		if !ok || set.Classes[set.Y[i]] != code {
			t.Fatalf("sample %d at pixel %d: class %d, not a point's (%d)", i, p, set.Classes[set.Y[i]], code)
		}
	}
	if set.N() != len(labelled) || res.Samples == 0 || res.Validation == 0 {
		t.Errorf("%d samples (%d training, %d validation) from %d labelled pixels", set.N(), res.Samples, res.Validation, len(labelled))
	}
	t.Logf("%d points, %d pixels (%d with data): %d training, %d validation samples, validation accuracy %.3f", cfg.LabelPoints, pointPixels, len(labelled), res.Samples, res.Validation, res.Metrics.Accuracy)
	if res.Metrics.Accuracy < 0.5 {
		t.Errorf("validation accuracy %.3f from %d points", res.Metrics.Accuracy, cfg.LabelPoints)
	}
}
