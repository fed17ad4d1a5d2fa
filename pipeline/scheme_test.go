package pipeline

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// relabelledScene copies the tiny synthetic scene with its label items'
// classification:classes renamed and recoloured (WorldCover's codes,
// other names): a label product that is not WorldCover.
func relabelledScene(t *testing.T) string {
	t.Helper()
	src := makeScene(t, "tiny", synthConfig(t))
	dst := filepath.Join(t.TempDir(), "scene")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".json") && strings.Contains(string(body), "classification:classes") {
			body = []byte(strings.NewReplacer(`"Tree cover"`, `"Forest"`, `"006400"`, `"123456"`, `"Cropland"`, `"Arable land"`).Replace(string(body)))
		}
		return os.WriteFile(out, body, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestLabelSchemeFromItems checks that the labels' own scheme, from their
// STAC items' classification:classes, goes through: ingest writes the
// labels COG with its names and records it in the manifest; a train
// config with classes.scheme labels trains on it, and the map carries its
// names; a built-in scheme of other codes is refused with the reason.
func TestLabelSchemeFromItems(t *testing.T) {
	scene := relabelledScene(t)
	ic := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	stack := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(context.Background(), ic, stage.Options{Out: stack}); err != nil {
		t.Fatal(err)
	}
	tiles, _ := filepath.Glob(filepath.Join(stack, "*", "manifest.json"))
	if len(tiles) == 0 {
		t.Fatal("no tile ingested")
	}
	body, _ := os.ReadFile(tiles[0])
	m, err := stage.ParseManifest(body)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.LabelScheme.Scheme()
	if err != nil || s == nil || s.Classes[0].Name != "Forest" {
		t.Fatalf("recorded label scheme %+v (%v)", s, err)
	}
	names, err := raster.Categories(filepath.Join(filepath.Dir(tiles[0]), "labels.tif"))
	if err != nil || !slices.Contains(names, "Forest") || !slices.Contains(names, "Arable land") {
		t.Errorf("labels COG categories %q (%v)", names, err)
	}

	tc := trainConfig(t, "train-demo.yaml", stack)
	tc.Classes.Scheme = "labels"
	model := filepath.Join(t.TempDir(), "model")
	if _, err := train.Train(context.Background(), tc, stage.Options{Out: model}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pred")
	if _, err := predict.Predict(context.Background(), predict.Config{Model: filepath.Join(model, stage.ModelFile), Input: stack, Window: 512}, stage.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	names, err = raster.Categories(filepath.Join(out, m.Tile, stage.ClassFile))
	if err != nil || !slices.Contains(names, "Forest") {
		t.Errorf("class map categories %q (%v)", names, err)
	}

	// The same job in one pass.
	job := demoJob(t)
	job.Ingest = ic
	jt := *job.Train
	jt.Classes.Scheme = "labels"
	job.Train = &jt
	res := runJob(t, job, filepath.Join(t.TempDir(), "run"), stage.Options{})
	names, err = raster.Categories(filepath.Join(res.Dir, m.Tile, stage.ClassFile))
	if err != nil || !slices.Contains(names, "Forest") {
		t.Errorf("run's class map categories %q (%v)", names, err)
	}

	// Esri/IO's codes are not the labels': no class has training samples.
	tc.Classes.Scheme = "esri-io"
	if _, err := train.Train(context.Background(), tc, stage.Options{Out: filepath.Join(t.TempDir(), "io")}); err == nil {
		t.Error("training WorldCover-coded labels as esri-io succeeded")
	}
}

// TestClassRemap checks classes.remap: refused onto a code outside the
// scheme or outside 1–255, accepted from one of its classes; the remapped
// labels train as their class (none is reported outside the scheme), the
// model records the remap, and the run's per-tile evaluation counts them
// the same way.
func TestClassRemap(t *testing.T) {
	stack := demoStack(t)
	tc := trainConfig(t, "train-demo.yaml", stack)
	for _, c := range []struct {
		remap map[int]int
		want  string
	}{{map[int]int{5: 99}, "is not a class"}, {map[int]int{0: 10}, "codes are 1–255"}, {map[int]int{300: 10}, "codes are 1–255"}} {
		bad := tc
		bad.Classes.Remap = c.remap
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("remap %v: %v, want %q", bad.Classes.Remap, err, c.want)
		}
	}
	ok := tc
	ok.Classes.Remap = map[int]int{10: 20}
	if err := ok.Validate(); err != nil {
		t.Errorf("remapping the scheme's own code 10 onto 20: %v", err)
	}
	// WorldCover without shrubland, whose pixels count as grassland.
	tc.Classes.Scheme, tc.Classes.Name = "custom", "no shrubland"
	for _, c := range []uint8{10, 30, 40, 50, 60, 80, 90} {
		cl, _ := landcover.WorldCover.Class(c)
		tc.Classes.List = append(tc.Classes.List, config.ClassConfig{Code: int(c), Name: cl.Name, Color: fmt.Sprintf("#%02x%02x%02x", cl.Color.R, cl.Color.G, cl.Color.B)})
	}
	plain := tc
	tc.Classes.Remap = map[int]int{20: 30}
	out := filepath.Join(t.TempDir(), "model")
	res, err := train.Train(context.Background(), tc, stage.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, " 20 (") {
			t.Errorf("remapped code 20 still reported outside the scheme: %s", w)
		}
	}
	model, _, err := predict.LoadModel(filepath.Join(out, stage.ModelFile))
	if err != nil || model.Remap[20] != 30 {
		t.Fatalf("model remap %v (%v)", model.Remap, err)
	}
	pres, err := train.Train(context.Background(), plain, stage.Options{Out: filepath.Join(t.TempDir(), "plain")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pres.Warnings, func(w string) bool { return strings.Contains(w, " 20 (") }) {
		t.Errorf("without the remap, code 20 is not reported outside the scheme: %q", pres.Warnings)
	}
}

// TestRunCountsLabelsOutsideScheme checks the per-tile report of label
// codes outside the scheme: a scheme without shrubland reports every
// shrubland pixel of the tile, and remapping them reports none.
func TestRunCountsLabelsOutsideScheme(t *testing.T) {
	job := demoJob(t)
	tc := *job.Train
	tc.Classes.Scheme, tc.Classes.Name = "custom", "no shrubland"
	for _, c := range []uint8{10, 30, 40, 50, 60, 80, 90} {
		cl, _ := landcover.WorldCover.Class(c)
		tc.Classes.List = append(tc.Classes.List, config.ClassConfig{Code: int(c), Name: cl.Name, Color: fmt.Sprintf("#%02x%02x%02x", cl.Color.R, cl.Color.G, cl.Color.B)})
	}
	job.Train = &tc
	res := runJob(t, job, filepath.Join(t.TempDir(), "run"), stage.Options{})
	labels, _, err := raster.ReadBand[uint8](filepath.Join(demoStack(t), res.Tiles[0].Tile, "labels.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint8]int64{}
	for _, code := range labels {
		if code != 0 && !slices.Contains([]uint8{10, 30, 40, 50, 60, 80, 90}, code) {
			want[code]++
		}
	}
	if got := res.Tiles[0].Outside; len(want) == 0 || !maps.Equal(got, want) {
		t.Errorf("outside the scheme: %v, the labels have %v", got, want)
	}
	remapped := tc
	remapped.Classes.Remap = map[int]int{}
	for code := range want {
		remapped.Classes.Remap[int(code)] = 30
	}
	job.Train = &remapped
	res = runJob(t, job, filepath.Join(t.TempDir(), "remapped"), stage.Options{})
	if got := res.Tiles[0].Outside; len(got) != 0 {
		t.Errorf("remapped codes reported outside the scheme: %v", got)
	}
}

// TestRemapSchemeCode remaps one of the scheme's own classes onto another
// (WorldCover's shrubland onto grassland): its pixels train as grassland,
// shrubland draws no sample and is not reported as a class the labels
// lack, and the log counts one class fewer than without the remap.
func TestRemapSchemeCode(t *testing.T) {
	stack := demoStack(t)
	tc := trainConfig(t, "train-demo.yaml", stack)
	var plainLog strings.Builder
	plain, err := train.Train(context.Background(), tc, stage.Options{Out: filepath.Join(t.TempDir(), "plain"), Log: textLog(&plainLog)})
	if err != nil {
		t.Fatal(err)
	}
	tc.Classes.Remap = map[int]int{20: 30}
	out := filepath.Join(t.TempDir(), "model")
	var log strings.Builder
	res, err := train.Train(context.Background(), tc, stage.Options{Out: out, Log: textLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "20 (Shrubland)") {
			t.Errorf("shrubland, remapped onto grassland, is reported: %s", w)
		}
	}
	body, err := os.ReadFile(filepath.Join(out, stage.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	set, err := sampleset.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	shrub, grass := slices.Index(set.Classes, 20), slices.Index(set.Classes, 30)
	if slices.Contains(set.Y, uint8(shrub)) || !slices.Contains(set.Y, uint8(grass)) {
		t.Errorf("samples of shrubland (%d) or none of grassland (%d): classes %v", shrub, grass, set.Classes)
	}
	if plain.Samples == res.Samples && plain.Validation == res.Validation {
		t.Error("the remap changed no sample")
	}
	classes := func(log string) string {
		i := strings.Index(log, " classes=")
		if i < 0 {
			t.Fatalf("no classes= in the log %q", log)
		}
		return strings.Fields(log[i+1:])[0]
	}
	if p, r := classes(plainLog.String()), classes(log.String()); p == r {
		t.Errorf("the log counts %s classes with and without the remap (%s)", r, p)
	}
}
