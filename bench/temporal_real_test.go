package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sklearn"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

const sloveniaDir = "../../shared/data/eolearn-slovenia-testpatch"

// sloveniaPatch loads the patch, or skips the test without it.
func sloveniaPatch(t *testing.T) *patch {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sloveniaDir, sloNDVI)); err != nil {
		t.Skipf("no Slovenian test patch: %v", err)
	}
	p, err := loadPatch(sloveniaDir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// trainRealForest is the forest of configs/train-real.yaml, with fewer
// trees when trees > 0 (the tests' time).
func trainRealForest(t *testing.T, trees int) forest.Params {
	t.Helper()
	raw, err := configs.Read("train-real.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if trees > 0 {
		cfg.Forest.Trees = trees
	}
	return cfg.Forest
}

// TestGroupFolds: every group lands in one fold, folds differ by at most
// one group, the assignment is the seed's alone, and another seed deals
// differently.
func TestGroupFolds(t *testing.T) {
	var groups []uint32
	for i := range 1000 {
		groups = append(groups, uint32(1+(i*7919)%88))
	}
	f1 := pixelFolds(groups, 5, 1)
	owner := map[uint32]int{}
	size := make([]map[uint32]bool, 5)
	for i, g := range groups {
		if f, ok := owner[g]; ok && f != f1[i] {
			t.Fatalf("group %d in folds %d and %d", g, f, f1[i])
		}
		owner[g] = f1[i]
		if size[f1[i]] == nil {
			size[f1[i]] = map[uint32]bool{}
		}
		size[f1[i]][g] = true
	}
	lo, hi := len(owner), 0
	for _, s := range size {
		lo, hi = min(lo, len(s)), max(hi, len(s))
	}
	if len(owner) != 88 || hi-lo > 1 {
		t.Errorf("%d groups in folds of %d–%d groups", len(owner), lo, hi)
	}
	// The same groups in another order: the same folds.
	rev := slices.Clone(groups)
	slices.Reverse(rev)
	f1r := pixelFolds(rev, 5, 1)
	for i := range rev {
		if f1r[i] != owner[rev[i]] {
			t.Fatalf("group %d: fold %d in reversed order, %d before", rev[i], f1r[i], owner[rev[i]])
		}
	}
	if slices.Equal(f1, pixelFolds(groups, 5, 2)) {
		t.Error("seeds 1 and 2 deal the same folds")
	}
}

// TestTemporalFeaturesDefinition recomputes a few pixels' features from
// the bands as read, by the definitions: the median of the clear dates
// (mean of the middle two when even), the nearest-rank percentiles, each
// season's median, and the count.
func TestTemporalFeaturesDefinition(t *testing.T) {
	p := sloveniaPatch(t)
	c := DefaultTemporalReal(sloveniaDir, trainRealForest(t, 0))
	tp, err := c.temporal()
	if err != nil {
		t.Fatal(err)
	}
	rows := []int{0, 1234, 5050, len(p.labels) - 1}
	x, names, err := temporalFeatures(p, tp, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1+len(c.Percentiles)+len(c.Seasons)+1 || names[1] != "p10(ndvi)" || names[len(names)-2] != "season(ndvi,son)" {
		t.Fatalf("names %v", names)
	}
	median := func(v []float32) float32 {
		slices.Sort(v)
		k := len(v)
		if k%2 == 1 {
			return v[k/2]
		}
		return (v[k/2-1] + v[k/2]) / 2
	}
	nf := len(names)
	for r, i := range rows {
		var all []float32
		season := make([][]float32, len(c.Seasons))
		for d, when := range p.dates {
			v := p.ndvi[d][i]
			if math.IsNaN(float64(v)) {
				continue
			}
			all = append(all, v)
			for j, s := range c.Seasons {
				if s.Contains(when) {
					season[j] = append(season[j], v)
				}
			}
		}
		want := []float32{median(slices.Clone(all))}
		sorted := slices.Sorted(slices.Values(all))
		for _, q := range c.Percentiles {
			rank := int(math.Ceil(float64(q) * float64(len(sorted)) / 100))
			want = append(want, sorted[rank-1])
		}
		for j := range c.Seasons {
			want = append(want, median(season[j]))
		}
		want = append(want, float32(len(all)))
		if got := x[r*nf : (r+1)*nf]; !slices.Equal(got, want) {
			t.Errorf("pixel %d: features %v, want %v", i, got, want)
		}
	}
}

// TestTemporalReal runs the comparison on the Slovenian patch with
// fewer trees and checks what can fail: the rasterisation equals
// LULC.tif, the folds keep each polygon whole and cover every labelled
// pixel once, the metrics are proportions, and a second run gives the
// same numbers.
func TestTemporalReal(t *testing.T) {
	p := sloveniaPatch(t)
	c := DefaultTemporalReal(sloveniaDir, trainRealForest(t, 10))
	c.Seeds, c.Engines = []uint64{1, 2}, []string{"lulc"}
	rep, err := temporalReal(context.Background(), c, p, "", "", stage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// eo-learn's LULC.tif burns polygon centres, as lulc does.
	if rep.Raster.Differ != 0 {
		t.Errorf("rasterisation differs from %s on %d pixels: %+v", sloReference, rep.Raster.Differ, rep.Raster.Differences)
	}
	labelled := 0
	for _, cl := range rep.Classes {
		labelled += cl.Pixels
	}
	if labelled != rep.Raster.Labelled || len(rep.Classes) < 2 {
		t.Errorf("%d pixels in %d classes, %d labelled", labelled, len(rep.Classes), rep.Raster.Labelled)
	}
	// The folds of the run: each polygon's pixels on one side.
	var groups []uint32
	for i, l := range p.labels {
		if l != 0 && p.groups[i] != 0 {
			groups = append(groups, p.groups[i])
		}
	}
	for si, seed := range c.Seeds {
		fold := pixelFolds(groups, c.Folds, seed)
		in := make([]map[uint32]bool, c.Folds)
		for k, f := range fold {
			if in[f] == nil {
				in[f] = map[uint32]bool{}
			}
			in[f][groups[k]] = true
		}
		polygons, pixels := 0, 0
		for f := range c.Folds {
			for g := range in[f] {
				for o := range c.Folds {
					if o != f && in[o][g] {
						t.Fatalf("seed %d: polygon %d in folds %d and %d", seed, g, f, o)
					}
				}
			}
			fi := rep.Folds[si].Folds[f]
			if fi.Polygons != len(in[f]) {
				t.Errorf("seed %d fold %d: report says %d polygons, %d hold pixels", seed, f, fi.Polygons, len(in[f]))
			}
			polygons, pixels = polygons+fi.Polygons, pixels+fi.Pixels
		}
		if polygons != rep.Polygons || pixels != labelled {
			t.Errorf("seed %d: folds hold %d polygons and %d pixels of %d and %d", seed, polygons, pixels, rep.Polygons, labelled)
		}
	}
	if len(rep.Sets) != 5 {
		t.Fatalf("%d feature sets", len(rep.Sets))
	}
	unit := func(v float64) bool { return v >= 0 && v <= 1 }
	for _, s := range rep.Sets {
		if len(s.Runs) != len(c.Seeds) || len(s.Summary) != 1 {
			t.Fatalf("%s: %d runs, %d summaries", s.Name, len(s.Runs), len(s.Summary))
		}
		for _, r := range s.Runs {
			m := r.Metrics
			ok := unit(m.Accuracy) && unit(m.MacroF1) && m.Kappa <= 1 && m.Total == int64(labelled) && len(r.FoldAccuracy) == c.Folds
			for _, f := range append(m.F1, r.FoldAccuracy...) {
				ok = ok && unit(f)
			}
			if !ok {
				t.Errorf("%s seed %d: OA %v kappa %v macro-F1 %v F1 %v on %d pixels, folds %v", s.Name, r.Seed, m.Accuracy, m.Kappa, m.MacroF1, m.F1, m.Total, r.FoldAccuracy)
			}
		}
		if sm := s.Summary[0]; sm.Accuracy.Min > sm.Accuracy.Mean || sm.Accuracy.Mean > sm.Accuracy.Max {
			t.Errorf("%s: spread %+v", s.Name, sm.Accuracy)
		}
	}
	again, err := temporalReal(context.Background(), c, p, "", "", stage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, again) {
		a, _ := json.Marshal(rep.Sets)
		b, _ := json.Marshal(again.Sets)
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

// TestTemporalRealCommand runs the whole command, scikit-learn included
// when python3 has it, on one seed and few trees: it writes both reports
// into the final directory only, and refuses to overwrite them.
func TestTemporalRealCommand(t *testing.T) {
	sloveniaPatch(t)
	c := DefaultTemporalReal(sloveniaDir, trainRealForest(t, 10))
	c.Seeds = []uint64{4}
	if _, err := sklearn.Python(context.Background(), ""); err != nil {
		t.Logf("without scikit-learn: %v", err)
		c.Engines = []string{"lulc"}
	}
	out := filepath.Join(t.TempDir(), "report")
	rep, err := TemporalReal(context.Background(), c, "lulc bench temporal-real", stage.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Sets {
		if len(s.Summary) != len(c.Engines) {
			t.Errorf("%s: %d engines summarised", s.Name, len(s.Summary))
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	var back TemporalRealReport
	if raw, err := os.ReadFile(filepath.Join(out, "report.json")); err != nil || json.Unmarshal(raw, &back) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !reflect.DeepEqual(back.Sets, rep.Sets) || !strings.Contains(string(md), "| percentiles+seasons | 9 | lulc |") {
		t.Errorf("reports do not hold the run:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(out, "npy")); err == nil {
		t.Error("the scikit-learn files were left in the report")
	}
	if _, err := TemporalReal(context.Background(), c, "", stage.Options{Out: out}); err == nil {
		t.Error("an existing report was overwritten without force")
	}
	c.Folds = 1
	if _, err := TemporalReal(context.Background(), c, "", stage.Options{Out: out + "2"}); err == nil || !strings.Contains(err.Error(), "folds") {
		t.Errorf("one fold: %v", err)
	}
}
