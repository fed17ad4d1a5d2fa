package evaluate

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAreaEstimateSample checks the stratified sample behind evaluate's
// area-adjusted estimates: each map class gives min(its labelled pixels,
// the sample size) pixels; a census of a fully labelled map gives the
// plain overall accuracy; another seed draws another sample; unlabelled
// pixels count in the strata's sizes but are never sampled.
func TestAreaEstimateSample(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	const w, h = 300, 200
	codes := []uint8{10, 20, 30}
	index := map[uint8]uint8{10: 0, 20: 1, 30: 2}
	pred, lab := make([]uint8, w*h), make([]uint8, w*h)
	for i := range pred {
		pred[i] = codes[r.IntN(3)]
		lab[i] = pred[i]
		if r.IntN(5) == 0 {
			lab[i] = codes[r.IntN(3)]
		}
	}
	pred[0] = 0 // nodata: in no stratum
	var agree, known int
	for i := range pred {
		if _, ok := index[pred[i]]; ok {
			known++
			if pred[i] == lab[i] {
				agree++
			}
		}
	}
	census, err := AreaEstimate(pred, lab, index, w, 3, Config{SamplePerClass: 0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(census.Accuracy-float64(agree)/float64(known)) > 1e-12 {
		t.Errorf("census OA %v, plain %v", census.Accuracy, float64(agree)/float64(known))
	}
	a, err := AreaEstimate(pred, lab, index, w, 3, Config{SamplePerClass: 500, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range a.Sampled {
		if n != 500 || a.MapPixels[i] != census.MapPixels[i] {
			t.Errorf("class %d: %d sampled of %d mapped, want 500 of %d", i, n, a.MapPixels[i], census.MapPixels[i])
		}
	}
	if a.AccuracyCI <= census.AccuracyCI {
		t.Errorf("a sample of 500 a class has a narrower interval (%v) than the census (%v)", a.AccuracyCI, census.AccuracyCI)
	}
	b, _ := AreaEstimate(pred, lab, index, w, 3, Config{SamplePerClass: 500, Seed: 2})
	if b.Accuracy == a.Accuracy && b.Proportion[0] == a.Proportion[0] {
		t.Error("seeds 1 and 2 drew the same sample")
	}
	// Unlabelled pixels: in N_i, never in the sample.
	for i := range lab {
		if i%2 == 0 {
			lab[i] = 0
		}
	}
	c, err := AreaEstimate(pred, lab, index, w, 3, Config{SamplePerClass: 0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sampled int64
	for i := range c.Sampled {
		sampled += c.Sampled[i]
		if c.MapPixels[i] != census.MapPixels[i] {
			t.Errorf("class %d: %d mapped pixels with half the labels, %d with all", i, c.MapPixels[i], census.MapPixels[i])
		}
	}
	if want := int64(w * h / 2); sampled != want { // the odd pixels; pixel 0 is even
		t.Errorf("%d pixels sampled from %d labelled", sampled, want)
	}
}

// TestStratumSampleKeepsSmallest checks the bounded heap behind the area
// sample against sorting all the candidates: the same ones are kept,
// ties on the key broken by position, whatever the cap.
func TestStratumSampleKeepsSmallest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, capacity := range []int{1, 2, 7, 100, 5000} {
		all := make([]areaCand, 3000)
		var h stratumSample
		for i := range all {
			// Few distinct keys, so that ties are common.
			all[i] = areaCand{Key: r.Uint64N(500), pos: i, ref: uint8(r.IntN(3))}
			h.offer(all[i], capacity)
		}
		slices.SortFunc(all, func(a, b areaCand) int {
			return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.pos, b.pos))
		})
		want := all[:min(capacity, len(all))]
		got := slices.Clone([]areaCand(h))
		slices.SortFunc(got, func(a, b areaCand) int {
			return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.pos, b.pos))
		})
		if !slices.Equal(got, want) {
			t.Errorf("cap %d: the heap kept %d candidates, not the %d smallest", capacity, len(got), len(want))
		}
	}
}
