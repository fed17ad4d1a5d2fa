package pipeline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// layersScene is the tiny scene with its elevation and radar layers
// (configs/synth-layers.yaml).
func layersScene(t *testing.T) string {
	t.Helper()
	raw, err := configs.Read("synth-layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return makeScene(t, "layers", cfg)
}

// layersIngest is configs/ingest-layers.yaml on the layers scene; with
// layers given (YAML, a list), those replace the config's, and with dates
// given, those the config's.
func layersIngest(t *testing.T, layers string, dates ...string) config.IngestConfig {
	t.Helper()
	raw, err := configs.Read("ingest-layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if layers != "" {
		text = text[:strings.Index(text, "\nlayers:")] + "\nlayers:\n" + layers
	}
	if len(dates) == 2 {
		text = strings.Replace(text, "start: 2024-04-01\n  end: 2024-10-31", "start: "+dates[0]+"\n  end: "+dates[1], 1)
	}
	cfg, err := config.ParseIngestConfig([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source.Catalog = filepath.Join(layersScene(t), "catalog.json")
	return cfg
}

// layerValues reads a stacked layer in its units: its plane through the
// manifest's map.
func layerValues(t *testing.T, tileDir, name string) []float32 {
	t.Helper()
	m := readManifest(t, tileDir)
	band := slices.Index(m.Bands, name)
	i := slices.IndexFunc(m.Layers, func(l stage.ManifestLayer) bool { return l.Name == name })
	if band < 0 || i < 0 {
		t.Fatalf("stack of %s has no layer %s (bands %v)", tileDir, name, m.Bands)
	}
	dn, _ := readU16(t, filepath.Join(tileDir, "stack.tif"), band+1)
	out := make([]float32, len(dn))
	for k, d := range dn {
		out[k] = float32(math.NaN())
		if d != 0 {
			p := float32(float32(d)*float32(m.Scale)) + float32(m.Offset)
			out[k] = m.Layers[i].Map.Apply(p)
		}
	}
	return out
}

// TestLayersRun maps the layers scene with elevation and backscatter
// features (configs/run-layers.yaml) in one pass and stage by stage: the
// stack holds the layers after the bands, recorded in the manifest, their
// values in their units where the synthetic scene put them; the forest
// uses them; and the one-pass map is the staged one, byte for byte.
func TestLayersRun(t *testing.T) {
	raw, err := configs.Read("run-layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ParseRunConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	rc.Outputs.Stack = config.StackFormats{config.StackCOG}
	tc := trainConfig(t, "train-layers.yaml", "")
	icfg := layersIngest(t, "")
	job := Job{Config: rc, Ingest: icfg, Train: &tc}
	out := filepath.Join(t.TempDir(), "run")
	runJob(t, job, out, stage.Options{Version: "test"})

	tileDir := filepath.Join(out, "31TEJ")
	m := readManifest(t, tileDir)
	want := []string{"elevation", "slope", "aspect", "VV", "VH"}
	if !slices.Equal(m.Bands[len(m.Bands)-5:], want) || len(m.Layers) != 5 {
		t.Fatalf("stack planes %v, layers %+v", m.Bands, m.Layers)
	}
	for _, l := range m.Layers {
		if l.Valid < 0.9 || l.Clamped != 0 || l.Map.Scale <= 0 {
			t.Errorf("layer %+v", l)
		}
	}
	if m.Layers[3].Units != "db" || len(m.Layers[3].Items) != 3 || m.Layers[1].Derived != "elevation" {
		t.Errorf("layers' records: %+v", m.Layers)
	}
	// Elevation resampled bilinearly stays within the DEM's; slope and
	// aspect are degrees; backscatter lies between water's −28 dB and
	// built-up's few dB.
	demLo, demHi, err := raster.LayerStats(raster.LayerSource{Hrefs: m.Layers[0].Rasters, Band: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		lo, hi float32
	}{{"elevation", float32(demLo), float32(demHi)}, {"slope", 0, 90}, {"aspect", 0, 360}, {"VV", -40, 10}, {"VH", -45, 5}} {
		v := layerValues(t, tileDir, c.name)
		// The plane resolves a 40,000th of the layer's range.
		tol := m.Layers[slices.Index(want, c.name)].Map.Scale * 1e-4
		var n int
		for _, x := range v {
			if x == x {
				n++
				if x < c.lo-tol || x > c.hi+tol {
					t.Fatalf("%s: value %v outside [%v, %v]", c.name, x, c.lo, c.hi)
				}
			}
		}
		if n < len(v)*9/10 {
			t.Errorf("%s: %d of %d pixels have a value", c.name, n, len(v))
		}
	}

	model, _, err := predict.LoadModel(filepath.Join(out, "model", stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	var used float64
	for i, f := range model.Features {
		if slices.Contains(want, f) || strings.Contains(f, "(V") {
			used += model.Importance[i]
		}
	}
	if used <= 0.02 {
		t.Errorf("the layers' features take %.3f of the forest's importance", used)
	}

	// Stage by stage: the stack just written, trained on and mapped.
	tc2 := trainConfig(t, "train-layers.yaml", out)
	_, runDir := mustTrain(t, tc2)
	mapDir := filepath.Join(t.TempDir(), "map")
	if _, err := predict.Predict(context.Background(), predict.Config{Model: filepath.Join(runDir, "model.lulcrf"), Input: out, Window: 1024, Confidence: true, Compress: "DEFLATE"},
		stage.Options{Out: mapDir, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(mapDir, "31TEJ", "class.tif"), filepath.Join(out, "31TEJ", "class.tif"))
	sameFile(t, filepath.Join(mapDir, "31TEJ", "confidence.tif"), filepath.Join(out, "31TEJ", "confidence.tif"))
}

// writeLayerTIFF writes a Float32 raster of one band on g.
func writeLayerTIFF(t *testing.T, path string, g geo.Grid, v []float32, nodata *float64) {
	t.Helper()
	w, err := raster.NewWriter(path, g, "float32", []raster.BandInfo{{Description: "layer"}}, raster.COGOptions{BlockSize: 512, Compress: "DEFLATE", NoData: nodata})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(0, 0, 0, g.Width, g.Height, v); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLayersOfYourOwn ingests layers given as files: a DEM in feet on the
// tile's grid with a scale, holes without a nodata value, and a raster
// on another CRS; and refuses what cannot be stacked, naming the layer,
// with nothing written.
func TestLayersOfYourOwn(t *testing.T) {
	g := geo.Grid{EPSG: 32631, Width: 252, Height: 252, Transform: [6]float64{499980, 10, 0, 5000040, 0, -10}}
	dir := t.TempDir()
	feet := make([]float32, g.Width*g.Height)
	holes := make([]float32, len(feet))
	for i := range feet {
		x, y := i%g.Width, i/g.Width
		feet[i] = float32(1000 + 3*x + 2*y) // feet
		holes[i] = float32(x)
		if (x/20+y/20)%5 == 0 {
			holes[i] = float32(math.NaN())
		}
	}
	writeLayerTIFF(t, filepath.Join(dir, "dem_ft.tif"), g, feet, nil)
	writeLayerTIFF(t, filepath.Join(dir, "holes.tif"), g, holes, nil)
	// A lon/lat raster over the Alps: nowhere near the tile.
	far := geo.Grid{EPSG: 4326, Width: 50, Height: 50, Transform: [6]float64{10, 0.001, 0, 47, 0, -0.001}}
	writeLayerTIFF(t, filepath.Join(dir, "far.tif"), far, make([]float32, 2500), nil)

	cfg := layersIngest(t, "  - {name: elevation, raster: "+filepath.Join(dir, "dem_ft.tif")+", scale: 0.3048, range: [-500, 9000]}\n"+
		"  - {name: holes, raster: "+filepath.Join(dir, "holes.tif")+"}\n")
	_, out := mustIngest(t, cfg)
	tileDir := filepath.Join(out, "31TEJ")
	el := layerValues(t, tileDir, "elevation")
	for i, v := range el {
		if want := float64(feet[i]) * 0.3048; math.Abs(float64(v)-want) > 0.25 {
			t.Fatalf("elevation at %d: %v m, want %v (feet × 0.3048)", i, v, want)
		}
	}
	m := readManifest(t, tileDir)
	h := m.Layers[1]
	// The range of a raster of your own is its statistics'; its holes are
	// missing.
	if h.Range != [2]float64{0, 251} || h.Valid > 0.85 || h.Valid < 0.7 {
		t.Errorf("holes layer: %+v", h)
	}
	hv := layerValues(t, tileDir, "holes")
	for i, v := range hv {
		if (v != v) != (holes[i] != holes[i]) || v == v && math.Abs(float64(v-holes[i])) > 0.01 {
			t.Fatalf("holes at %d: %v, want %v", i, v, holes[i])
		}
	}

	for _, c := range []struct {
		name string
		cfg  config.IngestConfig
		want string
	}{
		{"another CRS, no overlap", layersIngest(t, "  - {name: elevation, raster: "+filepath.Join(dir, "far.tif")+"}\n"),
			"layers[0] (elevation): " + filepath.Join(dir, "far.tif") + " (EPSG:4326"},
		{"backscatter without a date in the window", layersIngest(t, "  - {name: VV, collection: sentinel-1-rtc, asset: vv}\n", "2024-04-01", "2024-04-30"),
			"layers[0] (VV): no sentinel-1-rtc items with asset \"vv\" over the area"},
		{"a missing file", layersIngest(t, "  - {name: ndsm, raster: "+filepath.Join(dir, "nope.tif")+"}\n"), "nope.tif"},
	} {
		out := filepath.Join(t.TempDir(), "stack")
		_, err := ingest.Ingest(context.Background(), c.cfg, stage.Options{Out: out, Version: "test"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%s: %s written", c.name, out)
		}
	}

	// A feature naming a layer the stack lacks.
	tc := trainConfig(t, "train-layers.yaml", out)
	tc.Features = config.FeatureList{"B04", "ndvi", "elevation", "VV"}
	_, err := train.Train(context.Background(), tc, stage.Options{Out: filepath.Join(t.TempDir(), "run"), Version: "test"})
	if err == nil || !strings.Contains(err.Error(), `unknown feature "VV"`) || !strings.Contains(err.Error(), "the stack's layers: elevation, holes") {
		t.Errorf("a feature of a missing layer: %v", err)
	}
}

// TestLayersOfImages stacks a band of raster pairs' images as a layer
// (layers: [elevation]): each image's band, one map for all (its type's
// range), so that a forest trains on both tiles' layers at once.
func TestLayersOfImages(t *testing.T) {
	raw, err := configs.Read("synth-your-data.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	scene := makeScene(t, "your-data", scfg)
	img := filepath.Join(scene, "your-data", "images")
	fields := filepath.Join(scene, "your-data", "fields.gpkg")
	cfg, err := config.ParseIngestConfig([]byte(`source:
  rasters:
    - {image: ` + filepath.Join(img, "31tej_west.tif") + `, labels: ` + fields + `}
    - {image: ` + filepath.Join(img, "31tej_east.tif") + `, labels: ` + fields + `}
  bands: [B02, B03, B04, B05, B06, B07, B08, B8A, B11, B12, elevation]
  scale: 0.0001
  label_field: landcover
layers: [elevation]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, out := mustIngest(t, cfg)
	for _, tile := range []string{"31tej_west", "31tej_east"} {
		dir := filepath.Join(out, tile)
		m := readManifest(t, dir)
		if len(m.Layers) != 1 || m.Layers[0].Band != 11 || m.Layers[0].Range != [2]float64{0, 65535} || m.Bands[len(m.Bands)-1] != "elevation" {
			t.Fatalf("%s: bands %v, layers %+v", tile, m.Bands, m.Layers)
		}
		want, _ := readU16(t, filepath.Join(img, tile+".tif"), 11)
		got := layerValues(t, dir, "elevation")
		for i := range want {
			// The plane resolves 65535 / 40000 of the band's units.
			if math.Abs(float64(got[i])-float64(want[i])) > 0.9 {
				t.Fatalf("%s: elevation at %d: %v, the image's band %d", tile, i, got[i], want[i])
			}
		}
	}
	tc := trainConfig(t, "train-layers.yaml", out)
	tc.Features = config.FeatureList{"B04", "B08", "ndvi", "elevation", "mean(elevation,7)"}
	tc.Classes.Scheme, tc.AOA.MaxPoints = "labels", 2000
	tc.Sampling.MinPerClass = 5
	res, err := train.Train(context.Background(), tc, stage.Options{Out: filepath.Join(t.TempDir(), "run"), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	model, _, err := predict.LoadModel(filepath.Join(res.Dir, stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if model.Importance[3]+model.Importance[4] <= 0 {
		t.Errorf("elevation's importance: %v", model.Importance)
	}
}

// TestLayersFromSTACAPI ingests the layers scene from a STAC API over HTTP
// (search pages, rasters read by range requests): the layers' items are
// searched and read as the scenes' are, into the static catalog's bytes.
func TestLayersFromSTACAPI(t *testing.T) {
	_, local := mustIngest(t, layersIngest(t, ""))
	srv := newStacServer(t, layersScene(t))
	cfg := layersIngest(t, "")
	cfg.Source.Catalog, cfg.Source.API = "", srv.URL
	_, remote := mustIngest(t, cfg)
	sameFile(t, filepath.Join(local, "31TEJ", "stack.tif"), filepath.Join(remote, "31TEJ", "stack.tif"))
	m := readManifest(t, filepath.Join(remote, "31TEJ"))
	if len(m.Layers) != 5 || !strings.HasPrefix(m.Layers[0].Rasters[0], srv.URL) || !strings.HasPrefix(m.Layers[4].Rasters[0], srv.URL) {
		t.Errorf("layers read from %+v", m.Layers)
	}
}
