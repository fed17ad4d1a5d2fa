package features

import (
	"strings"
	"testing"
)

func TestParseTemporal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, name, op, base string }{
		{"p10(NDVI)", "p10(ndvi)", "shift", "ndvi"},
		{" p90( red ) ", "p90(B04)", "band", "B04"},
		{"p5(nd(nir, swir16))", "p5(nd(B08,B11))", "shift", "nd(B08,B11)"},
		{"season(ndvi, summer)", "season(ndvi,summer)", "shift", "ndvi"},
		{"Season(B08,late-summer_2)", "season(B08,late-summer_2)", "band", "B08"},
	} {
		f, err := ParseFeature(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if f.Name != c.name || f.Kind != "temporal" || f.Op != c.op || f.Base == nil || f.Base.Name != c.base ||
			len(f.Inputs) != 1 || f.Inputs[0] != c.name {
			t.Errorf("%q parsed as %+v", c.in, f)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"p0(ndvi)", "outside 1–99"},
		{"p100(ndvi)", "outside 1–99"},
		{"p10(mean(B08,7))", "not mean(B08,7)"},
		{"p10(p50(ndvi))", "not p50(ndvi)"},
		{"season(ndvi)", "a feature and a season's name"},
		{"season(ndvi, 2023)", "starting with a letter"},
		{"season(foo, summer)", "unknown feature"},
	} {
		if _, err := ParseFeature(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.in, err, c.want)
		}
	}
	// A context feature may summarise a temporal plane.
	f, err := ParseFeature("mean(p10(ndvi), 7)")
	if err != nil || f.Name != "mean(p10(ndvi),7)" || f.Base.Kind != "temporal" {
		t.Errorf("mean(p10(ndvi), 7): %+v, %v", f, err)
	}
}

// TestTemporalValues: a temporal feature reads its plane, less the shift
// for indices; NaN stays canonical NaN.
func TestTemporalValues(t *testing.T) {
	t.Parallel()
	bands := []string{"B04", "B08", "p10(ndvi)", "p90(B08)"}
	s, err := NewSet([]string{"p10(ndvi)", "p90(B08)", "ndvi"}, bands)
	if err != nil {
		t.Fatal(err)
	}
	src := [][]float32{{0.1, 0.1}, {0.3, 0.3}, {1.25, nan32}, {0.4, 0.2}}
	dst := [][]float32{make([]float32, 2), make([]float32, 2), make([]float32, 2)}
	if err := (CPU{s}).Compute(dst, src); err != nil {
		t.Fatal(err)
	}
	if dst[0][0] != float32(1.25)-1 || dst[0][1] == dst[0][1] || dst[1][0] != 0.4 || dst[1][1] != 0.2 {
		t.Errorf("temporal values %v", dst[:2])
	}
	if _, err := NewSet([]string{"p50(ndvi)"}, bands); err == nil || !strings.Contains(err.Error(), "needs the temporal plane p50(ndvi)") {
		t.Errorf("a missing temporal plane: %v", err)
	}
}
