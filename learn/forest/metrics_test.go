package forest

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestMetricsByHand checks a 3-class confusion matrix worked on paper:
//
//	ref\pred  A  B  C
//	   A      5  1  0
//	   B      2  3  1
//	   C      0  0  4
func TestMetricsByHand(t *testing.T) {
	t.Parallel()
	conf := [3][3]int{{5, 1, 0}, {2, 3, 1}, {0, 0, 4}}
	var ref, pred []uint8
	for a := range 3 {
		for b := range 3 {
			for range conf[a][b] {
				ref = append(ref, uint8(a))
				pred = append(pred, uint8(b))
			}
		}
	}
	m, err := Evaluate(ref, pred, []uint8{10, 20, 30})
	if err != nil {
		t.Fatal(err)
	}
	// OA = 12/16. pe = (6·7 + 6·4 + 4·5)/256 = 86/256. κ = (0.75 − pe)/(1 − pe).
	pe := 86.0 / 256
	want := map[string]float64{
		"oa": 0.75, "kappa": (0.75 - pe) / (1 - pe),
		"pA": 5.0 / 7, "rA": 5.0 / 6, "pB": 3.0 / 4, "rB": 3.0 / 6, "pC": 4.0 / 5, "rC": 1,
	}
	fA := 2 * want["pA"] * want["rA"] / (want["pA"] + want["rA"])
	fB := 2 * want["pB"] * want["rB"] / (want["pB"] + want["rB"])
	fC := 2 * want["pC"] * want["rC"] / (want["pC"] + want["rC"])
	got := map[string]float64{
		"oa": m.Accuracy, "kappa": m.Kappa,
		"pA": m.Precision[0], "rA": m.Recall[0], "pB": m.Precision[1], "rB": m.Recall[1], "pC": m.Precision[2], "rC": m.Recall[2],
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if math.Abs(m.MacroF1-(fA+fB+fC)/3) > 1e-12 || m.Confusion[1][0] != 2 || m.Support[2] != 4 {
		t.Errorf("macro-F1 %v, confusion %v", m.MacroF1, m.Confusion)
	}
	if _, err := Evaluate([]uint8{0}, []uint8{0, 1}, []uint8{1}); err == nil {
		t.Error("length mismatch accepted")
	}
}

// TestMetricsJSONCodes: metrics files list class codes as numbers, and
// the base64 strings of older files still read.
func TestMetricsJSONCodes(t *testing.T) {
	t.Parallel()
	m, err := Evaluate([]uint8{0, 1, 1}, []uint8{0, 1, 0}, []uint8{10, 80})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"classes":[10,80]`) {
		t.Fatalf("classes not a list of codes: %s", body)
	}
	var back Metrics
	if err := json.Unmarshal(body, &back); err != nil || len(back.Classes) != 2 || back.Classes[1] != 80 {
		t.Fatalf("round trip: %v %v", back.Classes, err)
	}
	var old Metrics
	if err := json.Unmarshal([]byte(`{"classes":"ClA="}`), &old); err != nil || len(old.Classes) != 2 || old.Classes[0] != 10 || old.Classes[1] != 80 {
		t.Fatalf("older base64 codes: %v %v", old.Classes, err)
	}
	if err := json.Unmarshal([]byte(`{"classes":[300]}`), &old); err == nil {
		t.Fatal("a code above 255 was read")
	}
}
