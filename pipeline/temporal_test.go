package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// temporalIngest is the tiny scene's ingest with temporal planes: NDVI's
// and B08's 10th and 90th percentiles and their spring and summer medians.
func temporalIngest(t *testing.T) config.IngestConfig {
	t.Helper()
	cfg := ingestConfig(t, filepath.Join(makeScene(t, "tiny", synthConfig(t)), "catalog.json"))
	cfg.Temporal = &config.TemporalConfig{Of: []string{"ndvi", "B08"}, Percentiles: []int{10, 90},
		Seasons: []config.SeasonConfig{{Name: "spring", From: "03-01", To: "05-31"}, {Name: "summer", From: "06-01", To: "08-31"}}}
	return cfg
}

var temporalPlanes = []string{"p10(ndvi)", "p90(ndvi)", "season(ndvi,spring)", "season(ndvi,summer)",
	"p10(B08)", "p90(B08)", "season(B08,spring)", "season(B08,summer)"}

// TestTemporalStack ingests the tiny scene (three dates: April, July,
// September) with temporal planes, checks what the stack holds against
// rules that follow from the definitions, trains and predicts with
// temporal features, and checks that a model with them refuses a stack
// without them.
func TestTemporalStack(t *testing.T) {
	cfg := temporalIngest(t)
	_, out := mustIngest(t, cfg)
	dir := filepath.Join(out, "31TEJ")
	var m stage.Manifest
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(dir, "manifest.json"))), &m); err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(cfg.Bands), temporalPlanes...); !slices.Equal(m.Bands, want) || m.Temporal == nil {
		t.Fatalf("manifest bands %v (temporal %v), want %v", m.Bands, m.Temporal, want)
	}
	stackPath := filepath.Join(dir, "stack.tif")
	plane := func(name string) []uint16 {
		i := slices.Index(m.Bands, name)
		v, _ := readU16(t, stackPath, i+1)
		return v
	}
	count, _, err := raster.ReadBand[uint8](filepath.Join(dir, "valid_count.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	med, p10, p90 := plane("B08"), plane("p10(B08)"), plane("p90(B08)")
	ndvi10, ndvi90, spring, summer := plane("p10(ndvi)"), plane("p90(ndvi)"), plane("season(ndvi,spring)"), plane("season(ndvi,summer)")
	var filled, springOnly int
	for i, c := range count {
		if c == 0 {
			if p10[i] != 0 || p90[i] != 0 || ndvi10[i] != 0 || spring[i] != 0 {
				t.Fatalf("pixel %d has no valid date but temporal DNs %d %d %d %d", i, p10[i], p90[i], ndvi10[i], spring[i])
			}
			continue
		}
		filled++
		// With at most three dates, p10 is the least value and p90 the
		// greatest; the median lies between.
		if !(p10[i] <= med[i] && med[i] <= p90[i]) {
			t.Fatalf("pixel %d: B08 p10 %d, median %d, p90 %d out of order", i, p10[i], med[i], p90[i])
		}
		// NDVI + 1 in the stack's encoding, clamped to it (negative
		// reflectance at offset −0.1 takes NDVI outside [−1, 1]).
		if ndvi10[i] < 1 || ndvi10[i] > ndvi90[i] {
			t.Fatalf("pixel %d: NDVI planes %d %d", i, ndvi10[i], ndvi90[i])
		}
		// Each season holds one date of the three: where it counts, its
		// median is one of the date's values, between p10 and p90.
		for _, s := range []uint16{spring[i], summer[i]} {
			if s != 0 && (s < ndvi10[i] || s > ndvi90[i]) {
				t.Fatalf("pixel %d: a season's NDVI %d outside p10 %d … p90 %d", i, s, ndvi10[i], ndvi90[i])
			}
		}
		if spring[i] != 0 && summer[i] == 0 {
			springOnly++
		}
	}
	if filled == 0 || springOnly == 0 {
		t.Errorf("%d pixels with dates, %d where only spring counts: the scene does not exercise the seasons", filled, springOnly)
	}
	if _, _, err := raster.ReadBand[uint16](stackPath, len(m.Bands)+1); err == nil {
		t.Errorf("stack.tif has more than the manifest's %d bands", len(m.Bands))
	}

	item := string(must(os.ReadFile(filepath.Join(dir, "stack-item.json"))))
	for _, want := range []string{`"name": "p10(ndvi)"`, "percentile 10 (nearest rank) of ndvi over the valid dates, as value + 1",
		"median over the season summer of B08 over the valid dates, as reflectance"} {
		if !strings.Contains(item, want) {
			t.Errorf("the stack item lacks %q", want)
		}
	}

	// A model with temporal features trains and maps the stack.
	tc := trainConfig(t, "train-demo.yaml", out)
	tc.Features = append(tc.Features[:20:20], "p10(ndvi)", "p90(ndvi)", "season(ndvi,summer)", "p90(B08)", "mean(p10(ndvi),7)")
	_, trained := mustTrain(t, tc)
	model := filepath.Join(trained, stage.ModelFile)
	mustPredict(t, predict.Config{Model: model, Input: out})
	// The demo stack has no temporal planes: predict says so.
	_, err = predict.Predict(t.Context(), predict.Config{Model: model, Input: demoStack(t)}, stage.Options{Out: filepath.Join(t.TempDir(), "p")})
	if err == nil || !strings.Contains(err.Error(), "p10(ndvi)") {
		t.Errorf("a model with temporal features on a stack without them: %v", err)
	}
	// And training asks for the planes by name.
	tc = trainConfig(t, "train-demo.yaml", demoStack(t))
	tc.Features = append(tc.Features[:20:20], "p10(ndvi)")
	if _, err := train.Train(t.Context(), tc, stage.Options{Out: filepath.Join(t.TempDir(), "t")}); err == nil || !strings.Contains(err.Error(), "temporal plane p10(ndvi)") {
		t.Errorf("training temporal features on a stack without them: %v", err)
	}
}

// TestTemporalRunMatchesIngest: the one-pass run's stack with temporal
// planes is the ingest's, byte for byte.
func TestTemporalRunMatchesIngest(t *testing.T) {
	job := demoJob(t)
	job.Ingest = temporalIngest(t)
	job.Config.Outputs.Stack = config.StackFormats{config.StackCOG}
	job.Train.Features = append(job.Train.Features[:20:20], "p10(ndvi)", "season(ndvi,summer)")
	out := filepath.Join(t.TempDir(), "run")
	runJob(t, job, out, stage.Options{})
	stack := filepath.Join(t.TempDir(), "stack")
	if _, err := ingest.Ingest(t.Context(), job.Ingest, stage.Options{Out: stack}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stack.tif", "manifest.json"} {
		sameFile(t, filepath.Join(out, "31TEJ", f), filepath.Join(stack, "31TEJ", f))
	}

}

func TestTemporalConfigErrors(t *testing.T) {
	for _, c := range []struct {
		tc   config.TemporalConfig
		want string
	}{
		{config.TemporalConfig{Of: []string{"ndvi"}}, "temporal: set percentiles, seasons or both"},
		{config.TemporalConfig{Of: []string{"ndvi"}, Percentiles: []int{120}}, "temporal.percentiles: 120 is outside 1–99"},
		{config.TemporalConfig{Of: []string{"B01"}, Percentiles: []int{10}}, "needs band B01"},
		{config.TemporalConfig{Of: []string{"ndvi"}, Seasons: []config.SeasonConfig{{Name: "summer", From: "06-01", To: "31-08"}}}, "temporal.seasons[0].to"},
		{config.TemporalConfig{Of: []string{"ndvi"}, Seasons: []config.SeasonConfig{{Name: "", From: "06-01", To: "08-31"}}}, "a season needs a name"},
	} {
		cfg := temporalIngest(t)
		cfg.Temporal = &c.tc
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.tc, err, c.want)
		}
	}
	if err := temporalIngest(t).Validate(); err != nil {
		t.Errorf("the tiny temporal config: %v", err)
	}
}
