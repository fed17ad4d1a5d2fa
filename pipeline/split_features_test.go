package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

const sloveniaDir = "../../shared/data/eolearn-slovenia-testpatch"

// sloveniaStack ingests the Slovenian land-use polygons (LULC.gpkg) as
// vector labels of an image on their reference grid. The shared copy of
// the patch has no spectral bands, so the image's ten "bands" are ten of
// its NDVI dates as DNs (NDVI × 5000 + 5000): enough to fit on, not a
// Sentinel-2 stack; the point is the labels and their groups.
func sloveniaStack(t *testing.T) (stack string, g geo.Grid, cfg config.IngestConfig) {
	t.Helper()
	gpkg := filepath.Join(sloveniaDir, "LULC.gpkg")
	if _, err := os.Stat(gpkg); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	ndvi, err := raster.Open(filepath.Join(sloveniaDir, "NDVI.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer ndvi.Close()
	g = ndvi.Grid
	g.EPSG = 32633 // the patch's CRS carries no EPSG code (../shared/data/README.md)
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	image := filepath.Join(t.TempDir(), "slovenia.tif")
	w, err := raster.NewWriter(image, g, "uint16", make([]raster.BandInfo, len(bands)), raster.COGOptions{BlockSize: 256, Compress: "DEFLATE"})
	if err != nil {
		t.Fatal(err)
	}
	n := g.Width * g.Height
	vals, dn := make([]float32, n), make([]uint16, n)
	for b := range bands {
		// Dates spread over the two years, summer and winter.
		if err := raster.ReadBandWindowInto(ndvi, 1+6*b, 0, 0, g.Width, g.Height, vals); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			dn[i] = uint16(min(max(v*5000+5000, 1), 10000))
		}
		if err := w.Write(b, 0, 0, g.Width, g.Height, dn); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`source:
  rasters:
    - {image: %s, labels: %s, tile: slovenia, datetime: 2017-06-01T10:00:00Z}
  bands: [%s]
  scale: 0.0001
  offset: -0.1
  label_field: LULC_ID
bands: [%s]
window: 1024
output:
  compress: DEFLATE
  blocksize: 512
`, image, gpkg, strings.Join(bands, ", "), strings.Join(bands, ", "))
	cfg, err = config.ParseIngestConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, stack = mustIngest(t, cfg)
	return stack, g, cfg
}

// sloveniaTrainConfig trains on the Slovenian stack's land-use classes.
func sloveniaTrainConfig(t *testing.T, stack, split string) config.TrainConfig {
	t.Helper()
	raw := fmt.Sprintf(`input:
  stack: %s
features: [B02, B03, B04, B08, B05, B06, B07, B8A, B11, B12, ndvi, "mean(B08, 7)", "std(ndvi, 7)"]
classes:
  scheme: custom
  name: raba-slovenia
  list:
    - {code: 1, name: Cultivated land, color: "#e3c16f"}
    - {code: 2, name: Forest, color: "#2f6b2f"}
    - {code: 3, name: Grassland, color: "#a4d36b"}
    - {code: 4, name: Shrubland, color: "#8a8f3c"}
    - {code: 8, name: Artificial surface, color: "#c4281b"}
sampling:
  max_per_class: 100000
  balance: false
  block_size: 16
  validation_fraction: 0.3
  min_per_class: 0
  seed: 5
  split: %s
engine: lulc
forest:
  trees: 30
  max_depth: 12
  min_samples_leaf: 1
  max_features: 0
  bins: 128
  bootstrap: true
  seed: 1
`, stack, split)
	cfg, err := config.ParseTrainConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSplitByFeaturesSlovenia ingests the Slovenian polygons and trains
// with sampling.split features: groups.tif holds each labelled pixel's
// polygon (FID + 1: one class per group), every labelled pixel is drawn
// (no cap is reached), and each polygon's pixels are all training or all
// validation, with polygons on both sides. The blocked split, on the same
// stack, cuts polygons.
func TestSplitByFeaturesSlovenia(t *testing.T) {
	stack, g, icfg := sloveniaStack(t)
	labels, _, err := raster.ReadBand[uint8](filepath.Join(stack, "slovenia", "labels.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := raster.Open(filepath.Join(stack, "slovenia", stage.GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint32, g.Width*g.Height)
	err = raster.ReadBandWindowInto(src, 1, 0, 0, g.Width, g.Height, ids)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	classOf := map[uint32]uint8{}
	labelled := 0
	for i, id := range ids {
		if labels[i] == 0 {
			continue
		}
		labelled++
		if c, ok := classOf[id]; id == 0 || ok && c != labels[i] {
			t.Fatalf("pixel %d: group %d, class %d (the group's class %d)", i, id, labels[i], c)
		}
		classOf[id] = labels[i]
	}
	manifest, _ := os.ReadFile(filepath.Join(stack, "slovenia", "manifest.json"))
	if !strings.Contains(string(manifest), `"file": "`+stage.GroupsFile+`"`) || !strings.Contains(string(manifest), `"label_groups": "each feature's FID + 1`) {
		t.Error("the manifest does not list groups.tif or say what it holds")
	}

	accuracy := map[string]float64{}
	sides := func(split string) (map[uint32][2]int, *sampleset.Set) {
		res, out := mustTrain(t, sloveniaTrainConfig(t, stack, split))
		accuracy[split] = res.Metrics.Accuracy
		body, err := os.ReadFile(filepath.Join(out, stage.SamplesFile))
		if err != nil {
			t.Fatal(err)
		}
		set, err := sampleset.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		by := map[uint32][2]int{}
		for i, p := range set.Pixel {
			id := ids[int(p>>20&0xfffff)*g.Width+int(p&0xfffff)]
			n := by[id]
			n[set.Split[i]]++
			by[id] = n
		}
		return by, set
	}
	by, set := sides("features")

	// lulc run draws the same samples from its tiles in memory.
	raw, err := configs.Read("run-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ParseRunConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	tc := sloveniaTrainConfig(t, stack, "features")
	tc.Input.Stack = ""
	out := filepath.Join(t.TempDir(), "run")
	runJob(t, Job{Config: rc, Ingest: icfg, Train: &tc}, out, stage.Options{})
	body, err := os.ReadFile(filepath.Join(out, "model", stage.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	ran, err := sampleset.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran.Pixel, set.Pixel) || !slices.Equal(ran.Split, set.Split) || !slices.Equal(ran.Y, set.Y) || !slices.Equal(ran.X, set.X) {
		t.Errorf("lulc run drew %d samples, lulc train %d, or others", ran.N(), set.N())
	}
	if set.N() != labelled {
		t.Errorf("%d samples of %d labelled pixels", set.N(), labelled)
	}
	var polygons [2]int
	for id, n := range by {
		if n[0] > 0 && n[1] > 0 {
			t.Errorf("polygon %d: %d training and %d validation pixels", id-1, n[0], n[1])
		}
		if n[1] > 0 {
			polygons[1]++
		} else {
			polygons[0]++
		}
	}
	if polygons[0] == 0 || polygons[1] == 0 {
		t.Errorf("%d training and %d validation polygons", polygons[0], polygons[1])
	}
	cut := 0
	blocks, _ := sides("blocks")
	for _, n := range blocks {
		if n[0] > 0 && n[1] > 0 {
			cut++
		}
	}
	if cut == 0 {
		t.Error("the blocked split cuts no polygon: the test cannot tell the splits apart")
	}
	t.Logf("%d labelled pixels in %d polygons: %d training and %d validation polygons; the blocked split cuts %d of %d; validation accuracy %.3f by features, %.3f by blocks",
		labelled, len(classOf), polygons[0], polygons[1], cut, len(blocks), accuracy["features"], accuracy["blocks"])
}
