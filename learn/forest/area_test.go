package forest

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// TestEstimateAreasWorked checks a two-class sample worked by hand with
// Olofsson et al.'s (2014) equations: strata of 1,000 and 9,000 mapped
// pixels, 50 sample pixels each, 40 of the first referenced as mapped and
// 45 of the second.
func TestEstimateAreasWorked(t *testing.T) {
	t.Parallel()
	sample := [][]int64{ // [reference][mapped]
		{40, 5},
		{10, 45},
	}
	e, err := EstimateAreas(sample, []int64{1000, 9000})
	if err != nil {
		t.Fatal(err)
	}
	// W = (0.1, 0.9); p00 = 0.08, p01 = 0.02, p10 = 0.09, p11 = 0.81.
	near(t, "overall accuracy", e.Accuracy, 0.89)
	seOA := math.Sqrt(0.01*0.8*0.2/49 + 0.81*0.9*0.1/49)
	near(t, "overall accuracy CI", e.AccuracyCI, 1.96*seOA)
	near(t, "user's 0", e.User[0], 0.8)
	near(t, "user's 1", e.User[1], 0.9)
	near(t, "user's 0 CI", e.UserCI[0], 1.96*math.Sqrt(0.8*0.2/49))
	near(t, "area share 0", e.Proportion[0], 0.17)
	near(t, "area share 1", e.Proportion[1], 0.83)
	near(t, "area share 0 CI", e.ProportionCI[0], 1.96*math.Sqrt(0.01*0.8*0.2/49+0.81*0.1*0.9/49))
	near(t, "area pixels 0", e.Pixels[0], 1700)
	near(t, "producer's 0", e.Producer[0], 0.08/0.17)
	near(t, "producer's 1", e.Producer[1], 0.81/0.83)
	// Equation 7 for class 0: N̂.0 = 1000·0.8 + 9000·0.1 = 1700.
	p0 := 0.08 / 0.17
	own := 1000.0 * 1000 * (1 - p0) * (1 - p0) * 0.8 * 0.2 / 49
	other := 9000.0 * 9000 * 0.1 * 0.9 / 49
	near(t, "producer's 0 CI", e.ProducerCI[0], 1.96*math.Sqrt((own+p0*p0*other)/(1700*1700)))
}

// TestEstimateAreasCensus checks that a "sample" of every mapped pixel
// gives the plain proportions: the overall accuracy of the confusion
// matrix and the reference classes' shares.
func TestEstimateAreasCensus(t *testing.T) {
	t.Parallel()
	conf := [][]int64{ // [reference][mapped]
		{500, 20, 0},
		{30, 300, 10},
		{0, 40, 100},
	}
	mapped := []int64{530, 360, 110}
	e, err := EstimateAreas(conf, mapped)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "overall accuracy", e.Accuracy, 900.0/1000)
	for j, row := range conf {
		var n int64
		for _, v := range row {
			n += v
		}
		near(t, "area share", e.Proportion[j], float64(n)/1000)
		near(t, "producer's", e.Producer[j], float64(conf[j][j])/float64(n))
	}
}

// TestEstimateAreasRefuses checks the errors: a mapped class sampled
// fewer than twice, mismatched shapes, an empty map; and that a class
// never mapped has no user's accuracy.
func TestEstimateAreasRefuses(t *testing.T) {
	t.Parallel()
	if _, err := EstimateAreas([][]int64{{5, 0}, {1, 1}}, []int64{10, 10}); err == nil {
		t.Error("a stratum of one sample pixel was accepted")
	}
	if _, err := EstimateAreas([][]int64{{5, 0}}, []int64{10, 10}); err == nil {
		t.Error("a one-row sample for two classes was accepted")
	}
	if _, err := EstimateAreas([][]int64{{0, 0}, {0, 0}}, []int64{0, 0}); err == nil {
		t.Error("an empty map was accepted")
	}
	e, err := EstimateAreas([][]int64{{5, 0}, {3, 0}}, []int64{10, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(e.User[1]) {
		t.Errorf("user's accuracy of a class never mapped is %v, want NaN", e.User[1])
	}
}
