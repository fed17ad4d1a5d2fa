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

// weightedScene writes a 120 × 120 image of ten bands (class 1 bright,
// class 2 dark, with texture) and a GeoJSON layer of four quadrant
// polygons with class codes and weights (rounded by ingest: 2.4 is 2):
// class 1 weights 1 (top left) and 4 (top right), class 2 weights 0 (bottom
// left, never drawn) and 2.4 (bottom right). It returns the ingest config
// with source.label_weight_field set to weights (weights in the layer's
// w field).
func weightedScene(t *testing.T, weights [4]string) (config.IngestConfig, geo.Grid) {
	t.Helper()
	dir := t.TempDir()
	g := geo.Grid{EPSG: 32631, Width: 120, Height: 120, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	image := filepath.Join(dir, "image.tif")
	w, err := raster.NewWriter(image, g, "uint16", make([]raster.BandInfo, len(bands)), raster.COGOptions{BlockSize: 256, Compress: "DEFLATE"})
	if err != nil {
		t.Fatal(err)
	}
	n := g.Width * g.Height
	dn := make([]uint16, n)
	for b := range bands {
		for i := range dn {
			row, col := i/g.Width, i%g.Width
			base := 3000
			if row >= 60 {
				base = 1000 // class 2
			}
			dn[i] = uint16(base + 100*b + (row*7+col*13+b*5)%400)
		}
		if err := w.Write(b, 0, 0, g.Width, g.Height, dn); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	square := func(x0, y0 int) string {
		x, y := 500000+x0, 4000000-y0
		return fmt.Sprintf("[[[%d, %d], [%d, %d], [%d, %d], [%d, %d], [%d, %d]]]", x, y, x+600, y, x+600, y-600, x, y-600, x, y)
	}
	var feats []string
	for q, c := range []struct {
		class  int
		x0, y0 int
	}{{1, 0, 0}, {1, 600, 0}, {2, 0, 600}, {2, 600, 600}} {
		feats = append(feats, fmt.Sprintf(`{"type": "Feature", "properties": {"c": %d, "w": %s}, "geometry": {"type": "Polygon", "coordinates": %s}}`, c.class, weights[q], square(c.x0, c.y0)))
	}
	layer := filepath.Join(dir, "fields.geojson")
	body := `{"type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32631"}}, "features": [` + strings.Join(feats, ",\n") + `]}`
	if err := os.WriteFile(layer, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`source:
  rasters:
    - {image: %s, labels: %s, tile: fields, datetime: 2024-06-01T10:00:00Z}
  bands: [%s]
  scale: 0.0001
  offset: 0
  nodata: 0
  label_field: c
  label_weight_field: w
bands: [%s]
window: 1024
output:
  compress: DEFLATE
  blocksize: 512
`, image, layer, strings.Join(bands, ", "), strings.Join(bands, ", "))
	cfg, err := config.ParseIngestConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, g
}

// weightedTrainConfig trains on the weighted scene's two classes with a
// cap that bites.
func weightedTrainConfig(t *testing.T, stack string) config.TrainConfig {
	t.Helper()
	raw := fmt.Sprintf(`input:
  stack: %s
features: [B02, B03, B04, B08, B05, B06, B07, B8A, B11, B12, ndvi]
classes:
  scheme: custom
  name: fields
  list:
    - {code: 1, name: Bright, color: "#e3c16f"}
    - {code: 2, name: Dark, color: "#2f6b2f"}
sampling:
  max_per_class: 400
  balance: false
  block_size: 16
  validation_fraction: 0.3
  min_per_class: 0
  seed: 9
engine: lulc
forest:
  trees: 10
  max_depth: 8
  min_samples_leaf: 1
  max_features: 0
  bins: 64
  bootstrap: true
  seed: 1
`, stack)
	cfg, err := config.ParseTrainConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTrainWeightedVectorLabels ingests polygons with a weight attribute:
// weights.tif holds each labelled pixel's feature weight, rounded, and the
// manifest lists it and says what it holds. Training from the stack, with
// a cap that bites, draws no pixel of weight 0 and pixels of weight 4
// about three times as often as those of weight 1 of the same class (2.9
// here: below 4, as the cap takes 5–35 % of a class); lulc run draws the same
// samples from its tiles in memory. A layer with a weight out of range is
// refused, naming the feature and the value, and so is a weight field for
// raster labels.
func TestTrainWeightedVectorLabels(t *testing.T) {
	icfg, g := weightedScene(t, [4]string{"1", "4", "0", "2.4"})
	_, stack := mustIngest(t, icfg)
	weights, _, err := raster.ReadBand[uint8](filepath.Join(stack, "fields", stage.WeightsFile), 1)
	if err != nil {
		t.Fatal(err)
	}
	quadrant := func(i int) int { return i/g.Width/60*2 + i%g.Width/60 }
	for i, w := range weights {
		if want := []uint8{1, 4, 0, 2}[quadrant(i)]; w != want {
			t.Fatalf("pixel %d: weight %d, want %d", i, w, want)
		}
	}
	manifest, _ := os.ReadFile(filepath.Join(stack, "fields", "manifest.json"))
	if !strings.Contains(string(manifest), `"file": "`+stage.WeightsFile+`"`) || !strings.Contains(string(manifest), `"label_weights": "field w, rounded`) {
		t.Error("the manifest does not list weights.tif or say what it holds")
	}

	tc := weightedTrainConfig(t, stack)
	_, out := mustTrain(t, tc)
	body, err := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	set, err := sampleset.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	var drawn [4]int
	for _, p := range set.Pixel {
		drawn[quadrant(int(p>>20&0xfffff)*g.Width+int(p&0xfffff))]++
	}
	t.Logf("samples by quadrant (weights 1, 4, 0, 2): %v", drawn)
	if set.N() != 4*tc.Sampling.MaxPerClass {
		t.Errorf("%d samples; the cap %d should bite in both classes and splits", set.N(), tc.Sampling.MaxPerClass)
	}
	if r := float64(drawn[1]) / float64(drawn[0]); drawn[2] != 0 || r < 2.5 || r > 5.5 {
		t.Errorf("samples by quadrant %v: weight 4 drawn %.2f times as often as weight 1 (want about 3), weight 0 drawn %d times", drawn, r, drawn[2])
	}

	// lulc run draws the same samples from its tiles in memory.
	raw, err := configs.Read("run-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ParseRunConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	tc.Input.Stack = ""
	runOut := filepath.Join(t.TempDir(), "run")
	runJob(t, Job{Config: rc, Ingest: icfg, Train: &tc}, runOut, stage.Options{})
	body, err = os.ReadFile(filepath.Join(runOut, "model", stage.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	ran, err := sampleset.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran.Pixel, set.Pixel) || !slices.Equal(ran.Split, set.Split) || !slices.Equal(ran.X, set.X) {
		t.Errorf("lulc run drew %d samples, lulc train %d, or others", ran.N(), set.N())
	}

	// Weights out of range are refused.
	bad, _ := weightedScene(t, [4]string{"1", "300", "0", "1"})
	ingestFails(t, bad, []string{"label weights", "feature FID 1: weight field w holds 300; weights are integers 0–255"})
	// A weight field for raster labels is refused.
	rasterLabels := icfg
	rasterLabels.Source.Rasters = slices.Clone(icfg.Source.Rasters)
	rasterLabels.Source.Rasters[0].Labels = filepath.Join(stack, "fields", "labels.tif")
	ingestFails(t, rasterLabels, []string{"source.label_weight_field weights the features of vector labels only"})
}
