package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// vectorScene is the tiny synthetic scene with lulc synth's labelled
// points beside its label map (the scene TestTrainFromSynthPoints uses):
// its catalog, its point layer and its synth config.
func vectorScene(t *testing.T) (catalog, points string, cfg synth.Config) {
	t.Helper()
	cfg = synthConfig(t)
	cfg.LabelPoints = 3000
	scene := makeScene(t, "tiny-points", cfg)
	gpkg, _ := filepath.Glob(filepath.Join(scene, "esa-worldcover", "*", "*_points.gpkg"))
	if len(gpkg) != 1 {
		t.Fatalf("point layers: %v", gpkg)
	}
	return filepath.Join(scene, "catalog.json"), gpkg[0], cfg
}

// vectorYAML is configs/ingest-tiny.yaml over catalog with source.labels
// in place of the label collection (and of resampling.labels), its
// label_field when field is not empty, and extra lines in source.
func vectorYAML(t *testing.T, catalog, labels, field, extra string) string {
	t.Helper()
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	src := "  labels: " + labels + "\n"
	if field != "" {
		src += "  label_field: " + field + "\n"
	}
	for _, r := range [][2]string{
		{"catalog: runs/demo/scene/catalog.json", "catalog: " + catalog},
		{"  label_collection: esa-worldcover\n", src + extra},
		{"  labels: mode\n", ""},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("ingest-tiny.yaml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

func vectorConfig(t *testing.T, catalog, labels, field, extra string) config.IngestConfig {
	t.Helper()
	cfg, err := config.ParseIngestConfig([]byte(vectorYAML(t, catalog, labels, field, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func readManifest(t *testing.T, tileDir string) stage.Manifest {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(tileDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := stage.ParseManifest(body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func gridOf(m stage.Manifest) geo.Grid {
	return geo.Grid{EPSG: m.Grid.EPSG, Transform: m.Grid.Transform, Width: m.Grid.Width, Height: m.Grid.Height}
}

func outputOf(m stage.Manifest, file string) (stage.ManifestOutput, bool) {
	i := slices.IndexFunc(m.Outputs, func(o stage.ManifestOutput) bool { return o.File == file })
	if i < 0 {
		return stage.ManifestOutput{}, false
	}
	return m.Outputs[i], true
}

// readGroups reads a groups.tif whole.
func readGroups(t *testing.T, path string) []uint32 {
	t.Helper()
	src, err := raster.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ids := make([]uint32, src.Width*src.Height)
	if err := raster.ReadBandWindowInto(src, 1, 0, 0, src.Width, src.Height, ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func sha256Of(t *testing.T, path string) (string, int64) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), int64(len(body))
}

// pointPixels reads a point layer with OGR and places each point on grid
// g itself (lon/lat to the grid's CRS through PROJ, then the pixel that
// holds it): the class each pixel should hold, the later point winning,
// and the pixels whose point lies within a millionth of a pixel of an
// edge, where rounding may place it either side.
func pointPixels(t *testing.T, path, field string, g geo.Grid) (want map[int]uint8, edge map[int]bool) {
	t.Helper()
	godal.RegisterAll()
	ds, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var xs, ys []float64
	var classes []uint8
	l := ds.Layers()[0]
	for f := l.NextFeature(); f != nil; f = l.NextFeature() {
		geom := f.Geometry()
		b, err := geom.Bounds()
		geom.Close()
		if err != nil {
			t.Fatal(err)
		}
		xs, ys = append(xs, b[0]), append(ys, b[1])
		classes = append(classes, uint8(f.Fields()[field].Int()))
		f.Close()
	}
	tr, err := raster.NewTransformer(4326, g.EPSG)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Transform(xs, ys); err != nil {
		t.Fatal(err)
	}
	want, edge = map[int]uint8{}, map[int]bool{}
	for i := range xs {
		cx := (xs[i] - g.Transform[0]) / g.Transform[1]
		cy := (ys[i] - g.Transform[3]) / g.Transform[5]
		col, row := int(math.Floor(cx)), int(math.Floor(cy))
		if col < 0 || row < 0 || col >= g.Width || row >= g.Height {
			continue
		}
		p := row*g.Width + col
		if fx, fy := cx-math.Floor(cx), cy-math.Floor(cy); min(fx, 1-fx, fy, 1-fy) < 1e-6 {
			edge[p] = true
		}
		want[p] = classes[i]
	}
	return want, edge
}

// TestIngestVectorPoints ingests the tiny STAC scene with synth's point
// layer (lon/lat) as source.labels: each point's pixel in labels.tif holds
// the point's class (placed by the test itself), every other pixel is 0;
// groups.tif marks the same pixels; the stack and counts are those of the
// same scene ingested with its label collection; the manifest records the
// layer's href, size and SHA-256 and how it was burned, and no scheme; the
// resolved ingest.yaml is taken back.
func TestIngestVectorPoints(t *testing.T) {
	catalog, gpkg, scfg := vectorScene(t)
	cfg := vectorConfig(t, catalog, gpkg, synth.PointsField, "")
	_, out := mustIngest(t, cfg)
	tile := filepath.Join(out, "31TEJ")
	m := readManifest(t, tile)
	g := gridOf(m)
	if g.EPSG != scfg.EPSG {
		t.Fatalf("grid %+v, the scene is in EPSG:%d", g, scfg.EPSG)
	}
	got, _ := readU16(t, filepath.Join(tile, "labels.tif"), 1)
	groups := readGroups(t, filepath.Join(tile, stage.GroupsFile))
	want, edge := pointPixels(t, gpkg, synth.PointsField, g)
	if len(want) < scfg.LabelPoints/2 {
		t.Fatalf("%d of %d points on the grid", len(want), scfg.LabelPoints)
	}
	for i, v := range got {
		if edge[i] {
			continue
		}
		if v != uint16(want[i]) {
			t.Fatalf("pixel (%d, %d): label %d, the point there has class %d", i%g.Width, i/g.Width, v, want[i])
		}
		if (groups[i] != 0) != (v != 0) {
			t.Fatalf("pixel (%d, %d): label %d, group %d", i%g.Width, i/g.Width, v, groups[i])
		}
	}
	if _, err := os.Stat(filepath.Join(tile, stage.WeightsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("weights.tif without label_weight_field: %v", err)
	}

	// The labels change nothing else.
	_, plain := mustIngest(t, ingestConfig(t, catalog))
	for _, f := range []string{"stack.tif", "valid_count.tif"} {
		sameFile(t, filepath.Join(tile, f), filepath.Join(plain, "31TEJ", f))
	}

	sum, size := sha256Of(t, gpkg)
	if len(m.Labels) != 1 {
		t.Fatalf("manifest labels %+v", m.Labels)
	}
	layer := m.Labels[0].Assets["labels"]
	if layer.Href != gpkg || layer.SHA256 != sum || layer.Size != size {
		t.Errorf("manifest records the layer as %+v, want %s of %d bytes, SHA-256 %s", layer, gpkg, size, sum)
	}
	if !strings.HasPrefix(m.LabelResampling, "burned by GDAL's rasterizer from field "+synth.PointsField) ||
		!strings.HasPrefix(m.LabelGroups, "each feature's FID + 1") || m.LabelWeights != "" || m.LabelScheme != nil {
		t.Errorf("manifest: label_resampling %q, label_groups %q, label_weights %q, scheme %v", m.LabelResampling, m.LabelGroups, m.LabelWeights, m.LabelScheme)
	}
	if _, ok := outputOf(m, stage.GroupsFile); !ok {
		t.Errorf("manifest outputs %+v lack %s", m.Outputs, stage.GroupsFile)
	}
	// The resolved config, written beside the tiles, is taken back: its
	// empty label collection and label resampling are no keys set beside
	// source.labels.
	resolved, err := os.ReadFile(filepath.Join(out, config.IngestConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.ParseIngestConfig(resolved)
	if err != nil || back.Source.Labels != gpkg || back.Source.LabelField != synth.PointsField {
		t.Errorf("%s read back: %v, source %+v", config.IngestConfigFile, err, back.Source)
	}
}

// rect is a rectangle in longitude and latitude.
type rect struct{ w, s, e, n float64 }

// polygonLayer writes two overlapping lon/lat rectangles over the tiny
// scene's tile as GeoJSON (EPSG:4326, so the burn reprojects them to the
// tile's UTM zone): codes 7 then 9, weights 3 then 5.
func polygonLayer(t *testing.T, scfg synth.Config, dir string, codes [2]int) (string, [2]rect) {
	t.Helper()
	ext := float64(scfg.Size) * 10
	tr, err := raster.NewTransformer(scfg.EPSG, 4326)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// Corners at fractions of the tile: the two overlap over 0.45–0.6.
	fr := []float64{0.2, 0.6, 0.45, 0.8}
	xs, ys := make([]float64, 4), make([]float64, 4)
	for i, f := range fr {
		xs[i], ys[i] = scfg.Origin[0]+f*ext, scfg.Origin[1]-f*ext
	}
	if err := tr.Transform(xs, ys); err != nil {
		t.Fatal(err)
	}
	rs := [2]rect{{xs[0], ys[1], xs[1], ys[0]}, {xs[2], ys[3], xs[3], ys[2]}}
	var feats []string
	for i, r := range rs {
		feats = append(feats, fmt.Sprintf(`{"type": "Feature", "properties": {"code": %d, "w": %d}, "geometry": {"type": "Polygon", "coordinates": [[[%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f], [%.9f, %.9f]]]}}`,
			codes[i], 3+2*i, r.w, r.s, r.e, r.s, r.e, r.n, r.w, r.n, r.w, r.s))
	}
	path := filepath.Join(dir, "polygons.geojson")
	body := `{"type": "FeatureCollection", "features": [` + strings.Join(feats, ",\n") + "]}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, rs
}

// polygonPixels is, per pixel of g, which rectangle's feature its centre
// lies in (0 none, 1 or 2, the later winning), computed by the test:
// centres to lon/lat through PROJ. Pixels whose centre lies within 1e-5°
// (about a metre) of an edge are marked -1: GDAL reprojects the vertices
// and joins them straight, which bends the edges by millimetres.
func polygonPixels(t *testing.T, g geo.Grid, rs [2]rect) []int {
	t.Helper()
	n := g.Width * g.Height
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i] = g.Transform[0] + (float64(i%g.Width)+0.5)*g.Transform[1]
		ys[i] = g.Transform[3] + (float64(i/g.Width)+0.5)*g.Transform[5]
	}
	tr, err := raster.NewTransformer(g.EPSG, 4326)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Transform(xs, ys); err != nil {
		t.Fatal(err)
	}
	const tol = 1e-5
	feature := make([]int, n)
	for i := range n {
		x, y := xs[i], ys[i]
		for k, r := range rs {
			switch {
			case x > r.w+tol && x < r.e-tol && y > r.s+tol && y < r.n-tol:
				feature[i] = k + 1 // inside: the later feature wins
			case x > r.w-tol && x < r.e+tol && y > r.s-tol && y < r.n+tol:
				feature[i] = -1 // near its edge
			}
		}
	}
	return feature
}

// TestIngestVectorPolygons burns two overlapping polygons given in
// longitude and latitude onto the tiny scene's UTM grid: every pixel
// whose centre lies in one holds its code (the later polygon's where both
// cover it), its group (FID + 1) and its weight (label_weight_field); all
// other pixels are 0 in the three rasters, as for raster pairs.
func TestIngestVectorPolygons(t *testing.T) {
	catalog, _, scfg := vectorScene(t)
	layer, rs := polygonLayer(t, scfg, t.TempDir(), [2]int{7, 9})
	cfg := vectorConfig(t, catalog, layer, "code", "  label_weight_field: w\n")
	_, out := mustIngest(t, cfg)
	tile := filepath.Join(out, "31TEJ")
	m := readManifest(t, tile)
	g := gridOf(m)
	labels, _ := readU16(t, filepath.Join(tile, "labels.tif"), 1)
	groups := readGroups(t, filepath.Join(tile, stage.GroupsFile))
	weights, _, err := raster.ReadBand[uint8](filepath.Join(tile, stage.WeightsFile), 1)
	if err != nil {
		t.Fatal(err)
	}
	feature := polygonPixels(t, g, rs)
	code := [3]uint16{0, 7, 9}
	weight := [3]uint8{0, 3, 5}
	count := map[uint16]int{}
	edges := 0
	for i, f := range feature {
		if f < 0 {
			edges++
			continue
		}
		if labels[i] != code[f] || groups[i] != uint32(f) || weights[i] != weight[f] {
			t.Fatalf("pixel (%d, %d): label %d, group %d, weight %d; its centre lies in feature %d (code %d, weight %d)",
				i%g.Width, i/g.Width, labels[i], groups[i], weights[i], f, code[f], weight[f])
		}
		count[labels[i]]++
	}
	if count[7] < 100 || count[9] < 100 || count[0] < 100 {
		t.Errorf("pixels by label %v: the rectangles should cover hundreds each", count)
	}
	t.Logf("%d pixels by label %v; %d within a metre of an edge not checked", len(feature), count, edges)
	if m.LabelWeights != "field w, rounded (0: no feature, or never drawn)" || !strings.Contains(m.LabelResampling, "field code (the pixels whose centre a polygon contains") {
		t.Errorf("manifest: label_resampling %q, label_weights %q", m.LabelResampling, m.LabelWeights)
	}
	for _, f := range []string{stage.GroupsFile, stage.WeightsFile} {
		if o, ok := outputOf(m, f); !ok {
			t.Errorf("manifest outputs lack %s", f)
		} else if sum, size, _ := digest.File(filepath.Join(tile, f)); o.BLAKE3 != sum || o.Size != size {
			t.Errorf("manifest output %+v, the file's checksum %s, %d bytes", o, sum, size)
		}
	}
}

// TestIngestVectorFileChanges: the manifest records the layer's SHA-256
// and size; the config hash holds only its path, so an edited layer needs
// --force (the output exists), which burns the new features; and a
// resumed ingest keeps a tile finished from the old layer, whose manifest
// then tells by its SHA-256 (the documented limit).
func TestIngestVectorFileChanges(t *testing.T) {
	catalog, _, scfg := vectorScene(t)
	dir := t.TempDir()
	layer, _ := polygonLayer(t, scfg, dir, [2]int{7, 9})
	cfg := vectorConfig(t, catalog, layer, "code", "")
	hash := cfg.Hash()
	out := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(t.TempDir(), "first")
	if err := os.CopyFS(first, os.DirFS(filepath.Join(out, "31TEJ"))); err != nil {
		t.Fatal(err)
	}
	oldSum, oldSize := sha256Of(t, layer)
	if a := readManifest(t, first).Labels[0].Assets["labels"]; a.SHA256 != oldSum || a.Size != oldSize {
		t.Fatalf("manifest records %+v, the layer is %d bytes, SHA-256 %s", a, oldSize, oldSum)
	}
	countOf := func(tile string, code uint16) int {
		v, _ := readU16(t, filepath.Join(tile, "labels.tif"), 1)
		n := 0
		for _, c := range v {
			if c == code {
				n++
			}
		}
		return n
	}
	sevens := countOf(first, 7)

	// The first polygon becomes class 8: same path, same config hash.
	polygonLayer(t, scfg, dir, [2]int{8, 9})
	newSum, newSize := sha256Of(t, layer)
	if newSum == oldSum || cfg.Hash() != hash {
		t.Fatal("the edit changed nothing, or the config hash saw it")
	}
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("rerun over the output without --force: %v", err)
	}
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Force: true}); err != nil {
		t.Fatal(err)
	}
	tile := filepath.Join(out, "31TEJ")
	if a := readManifest(t, tile).Labels[0].Assets["labels"]; a.SHA256 != newSum || a.Size != newSize {
		t.Errorf("after --force the manifest records %+v, the layer is %d bytes, SHA-256 %s", a, newSize, newSum)
	}
	if n := countOf(tile, 8); n != sevens || countOf(tile, 7) != 0 {
		t.Errorf("after --force: %d pixels of 8 and %d of 7; the first ingest had %d of 7", n, countOf(tile, 7), sevens)
	}

	// An interrupted ingest of the same config leaves its staging
	// directory; a tile finished there (from the old layer) is kept.
	resumed := filepath.Join(t.TempDir(), "stack")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := ingest.Ingest(ctx, cfg, stage.Options{Out: resumed, NewBar: func(int64, string) progress.Bar { return hookBar{cancel} }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted ingest: %v", err)
	}
	if err := os.CopyFS(filepath.Join(atomicfs.StagingDir(resumed), "31TEJ"), os.DirFS(first)); err != nil {
		t.Fatal(err)
	}
	res, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: resumed})
	if err != nil || !res.Resumed || !res.Tiles[0].Skipped {
		t.Fatalf("resume: %v, %+v", err, res)
	}
	sameFile(t, filepath.Join(resumed, "31TEJ", "labels.tif"), filepath.Join(first, "labels.tif"))
	if a := readManifest(t, filepath.Join(resumed, "31TEJ")).Labels[0].Assets["labels"]; a.SHA256 != oldSum || a.SHA256 == newSum {
		t.Errorf("the kept tile's manifest records %s; the layer it was burned from has %s, the layer now %s", a.SHA256, oldSum, newSum)
	}
}

// TestIngestVectorConfigErrors: every refusal of source.labels and the
// label_* keys names the key at fault; a config with source.labels takes
// neither the label collection's nor resampling.labels' default; and a
// config without it hashes as before the key existed.
func TestIngestVectorConfigErrors(t *testing.T) {
	cat := "scene/catalog.json"
	ok, err := config.ParseIngestConfig([]byte(vectorYAML(t, cat, "points.gpkg", "class", "")))
	if err != nil {
		t.Fatal(err)
	}
	if ok.Source.LabelCollection != "" || ok.Resampling.Labels != "" {
		t.Errorf("defaults with source.labels: label_collection %q, resampling.labels %q", ok.Source.LabelCollection, ok.Resampling.Labels)
	}
	rasters := `source:
  rasters:
    - {image: x.tif, labels: x.gpkg, datetime: 2021-07-23}
  bands: [B02, B03, B04, B08, B05, B06, B07, B8A, B11, B12]
  scale: 0.0001
  label_field: class
`
	tiny, _ := configs.Read("ingest-tiny.yaml")
	withSource := func(line string) string {
		return strings.Replace(string(tiny), "  limit: 100\n", "  limit: 100\n"+line+"\n", 1)
	}
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"with label_collection", vectorYAML(t, cat, "points.gpkg", "class", "  label_collection: esa-worldcover\n"), []string{"source.labels", "source.label_collection"}},
		{"without label_field", vectorYAML(t, cat, "points.gpkg", "", ""), []string{"source.label_field", "source.labels"}},
		{"with resampling.labels", strings.Replace(vectorYAML(t, cat, "points.gpkg", "class", ""), "  reflectance: bilinear\n", "  reflectance: bilinear\n  labels: mode\n", 1), []string{"resampling.labels", "source.labels"}},
		{"with rasters", rasters + "  labels: points.gpkg\n", []string{"source.labels", "source.rasters"}},
		{"label_field without labels", withSource("  label_field: class"), []string{"label_field", "source.labels"}},
		{"label_layer without labels", withSource("  label_layer: points"), []string{"label_layer", "source.labels"}},
		{"labels_all_touched without labels", withSource("  labels_all_touched: true"), []string{"labels_all_touched", "source.labels"}},
		{"label_group_field without labels", withSource("  label_group_field: site"), []string{"label_group_field", "source.labels"}},
		{"label_weight_field without labels", withSource("  label_weight_field: w"), []string{"label_weight_field", "source.labels"}},
	} {
		_, err := config.ParseIngestConfig([]byte(c.yaml))
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v (want it to name %s)", c.name, err, w)
			}
		}
	}
	if _, err := config.ParseIngestConfig([]byte(rasters)); err != nil {
		t.Errorf("raster pairs with label_field: %v", err)
	}

	plain := ingestConfig(t, cat)
	body, err := json.Marshal(plain.Source)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), `"Labels"`) {
		t.Errorf("a config without source.labels hashes it: %s", body)
	}
	other := vectorConfig(t, cat, "other.gpkg", "class", "")
	if other.Hash() == ok.Hash() || ok.Hash() == plain.Hash() {
		t.Error("source.labels is not in the config hash")
	}
}

// TestRunSTACVector maps the tiny scene with source.labels in one pass
// (lulc run, training on the points): the stack, labels, groups and
// manifest it writes equal lulc ingest's, and the run scores its map
// against them. A plan made of the config (lulc plan) has no label items,
// and a run from it burns the same labels.
func TestRunSTACVector(t *testing.T) {
	catalog, gpkg, _ := vectorScene(t)
	icfg := vectorConfig(t, catalog, gpkg, synth.PointsField, "")
	stack := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(context.Background(), icfg, stage.Options{Out: stack}); err != nil {
		t.Fatal(err)
	}
	job := demoJob(t)
	job.Ingest = icfg
	job.Train.Sampling.MaxPerClass, job.Train.Sampling.MinPerClass, job.Train.Sampling.Buffer = 100000, 1, 0
	job.Config.Outputs.Stack = config.StackFormats{config.StackCOG}
	out := filepath.Join(t.TempDir(), "run")
	res := runJob(t, job, out, stage.Options{})
	if len(res.Tiles) != 1 || res.Train == nil || res.Tiles[0].Metrics == nil || res.Train.Samples == 0 {
		t.Fatalf("result %+v", res)
	}
	for _, f := range []string{"stack.tif", "labels.tif", stage.GroupsFile, "manifest.json"} {
		sameFile(t, filepath.Join(out, "31TEJ", f), filepath.Join(stack, "31TEJ", f))
	}

	plan, err := MakePlan(context.Background(), icfg, stage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Labels) != 0 || len(plan.Tiles) != 1 {
		t.Fatalf("plan: %d label items, %d tiles", len(plan.Labels), len(plan.Tiles))
	}
	job.Plan, job.Train, job.Model = &plan, nil, filepath.Join(out, "model", stage.ModelFile)
	mapped := filepath.Join(t.TempDir(), "mapped")
	runJob(t, job, mapped, stage.Options{})
	for _, f := range []string{"labels.tif", stage.ClassFile} {
		sameFile(t, filepath.Join(mapped, "31TEJ", f), filepath.Join(out, "31TEJ", f))
	}
}

// TestIngestVectorRemote: a GDAL URL passes the config's checks and the
// output-overlap check (no local existence check refuses it), and a layer
// read through /vsicurl/ from a local HTTP server burns the same labels
// as the file itself, the manifest keeping the URL and the size the
// server gives. A local path that holds no layer fails before anything
// is written, naming source.labels.
func TestIngestVectorRemote(t *testing.T) {
	for _, href := range []string{"/vsicurl/https://example.invalid/survey/points.gpkg", "/vsis3/bucket/lucas.fgb", "https://example.invalid/points.gpkg?sig=x"} {
		cfg, err := config.ParseIngestConfig([]byte(vectorYAML(t, "scene/catalog.json", href, "class", "")))
		if err != nil {
			t.Errorf("%s: %v", href, err)
			continue
		}
		if !slices.Contains(cfg.Inputs(), href) {
			t.Errorf("%s is not among the inputs %v", href, cfg.Inputs())
		}
		if err := atomicfs.CheckInputs(filepath.Join(t.TempDir(), "out"), cfg.Inputs()...); err != nil {
			t.Errorf("%s: %v", href, err)
		}
	}

	catalog, _, scfg := vectorScene(t)
	dir := t.TempDir()
	layer, _ := polygonLayer(t, scfg, dir, [2]int{7, 9})
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	_, local := mustIngest(t, vectorConfig(t, catalog, layer, "code", ""))
	href := "/vsicurl/" + srv.URL + "/polygons.geojson"
	_, remote := mustIngest(t, vectorConfig(t, catalog, href, "code", ""))
	sameFile(t, filepath.Join(remote, "31TEJ", "labels.tif"), filepath.Join(local, "31TEJ", "labels.tif"))
	_, size := sha256Of(t, layer)
	if a := readManifest(t, filepath.Join(remote, "31TEJ")).Labels[0].Assets["labels"]; a.Href != href || a.Size != size || a.SHA256 != "" {
		t.Errorf("manifest records the remote layer as %+v, want %s of %d bytes", a, href, size)
	}

	out := filepath.Join(t.TempDir(), "missing")
	_, err := ingest.Ingest(context.Background(), vectorConfig(t, catalog, filepath.Join(dir, "nowhere.gpkg"), "code", ""), stage.Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "source.labels") {
		t.Errorf("a missing layer: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing layer left an output: %v", err)
	}
}
