package features

import (
	"math"
	"strings"
	"testing"
)

func TestIndicesByHand(t *testing.T) {
	t.Parallel()
	bands := []string{"B02", "B03", "B04", "B05", "B08", "B11", "B12"}
	// blue, green, red, rededge1, nir, swir1, swir2
	px := []float32{0.05, 0.08, 0.04, 0.12, 0.40, 0.20, 0.10}
	want := map[string]float64{
		"ndvi":        (0.40 - 0.04) / (0.40 + 0.04),
		"ndwi":        (0.08 - 0.40) / (0.08 + 0.40),
		"mndwi":       (0.08 - 0.20) / (0.08 + 0.20),
		"ndbi":        (0.20 - 0.40) / (0.20 + 0.40),
		"nbr":         (0.40 - 0.10) / (0.40 + 0.10),
		"ndmi":        (0.40 - 0.20) / (0.40 + 0.20),
		"ndre1":       (0.40 - 0.12) / (0.40 + 0.12),
		"evi":         2.5 * (0.40 - 0.04) / (0.40 + 6*0.04 - 7.5*0.05 + 1),
		"savi":        1.5 * (0.40 - 0.04) / (0.40 + 0.04 + 0.5),
		"bsi":         ((0.20 + 0.04) - (0.40 + 0.05)) / ((0.20 + 0.04) + (0.40 + 0.05)),
		"B04":         0.04,
		"nd(B08,B11)": (0.40 - 0.20) / (0.40 + 0.20),
	}
	names := []string{"ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "ndre1", "evi", "savi", "bsi", "red", "nd(nir, swir16)"}
	s, err := NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	src := make([][]float32, len(bands))
	for b := range bands {
		src[b] = []float32{px[b], float32(math.NaN()), 0}
	}
	dst := make([][]float32, len(names))
	for i := range dst {
		dst[i] = make([]float32, 3)
	}
	if err := (CPU{s}).Compute(dst, src); err != nil {
		t.Fatal(err)
	}
	for i, f := range s.Features {
		w, ok := want[f.Name]
		if !ok {
			t.Fatalf("no expectation for %s", f.Name)
		}
		if math.Abs(float64(dst[i][0])-w) > 1e-6 {
			t.Errorf("%s = %v, want %v", f.Name, dst[i][0], w)
		}
		if v := dst[i][1]; v == v {
			t.Errorf("%s of NaN inputs = %v, want NaN", f.Name, v)
		}
		// All-zero reflectance: ratios divide by zero and give NaN, raw
		// bands and SAVI/EVI (with constants in the denominator) do not.
		if v := dst[i][2]; (f.Kind == "band" || f.Name == "savi" || f.Name == "evi") != (v == v) {
			t.Errorf("%s of zeros = %v", f.Name, v)
		}
	}
}

func TestFeatureErrors(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"ndxi":          "unknown feature",
		"nd(B08)":       "two bands",
		"nd(B08, B99)":  "unknown Sentinel-2 band",
		"nd(nir, swir)": "unknown Sentinel-2 band",
	} {
		if _, err := ParseFeature(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewSet([]string{"ndvi"}, []string{"B02", "B03", "B04"}); err == nil || !strings.Contains(err.Error(), "needs band B08") {
		t.Errorf("missing band: %v", err)
	}
	if _, err := NewSet([]string{"ndvi", "NDVI"}, []string{"B04", "B08"}); err == nil {
		t.Error("duplicate feature accepted")
	}
}

// TestColumnsRows checks that Columns and Rows transpose samples both
// ways, on sizes that split unevenly over the cores.
func TestColumnsRows(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 4095, 70_001} {
		const width = 7
		x := make([]float32, n*width)
		for i := range x {
			x[i] = float32(i)
		}
		planes := Columns(x, width)
		for c := range width {
			for i := range n {
				if planes[c][i] != x[i*width+c] {
					t.Fatalf("n %d: plane %d row %d is %v, want %v", n, c, i, planes[c][i], x[i*width+c])
				}
			}
		}
		back := Rows(planes)
		if len(back) != len(x) {
			t.Fatalf("n %d: %d values back, want %d", n, len(back), len(x))
		}
		for i := range x {
			if back[i] != x[i] {
				t.Fatalf("n %d: value %d is %v back, want %v", n, i, back[i], x[i])
			}
		}
	}
}

// BenchmarkRows transposes a full tile's samples (800,000 rows of 56
// planes, as FitAndMeasure's training split holds) back into rows.
func BenchmarkRows(b *testing.B) {
	planes := make([][]float32, 56)
	for c := range planes {
		planes[c] = make([]float32, 800_000)
		for i := range planes[c] {
			planes[c][i] = float32(i + c)
		}
	}
	for b.Loop() {
		Rows(planes)
	}
}

// BenchmarkColumns transposes a full tile's samples (800,000 rows of 56
// values) into planes.
func BenchmarkColumns(b *testing.B) {
	x := make([]float32, 800_000*56)
	for i := range x {
		x[i] = float32(i)
	}
	for b.Loop() {
		Columns(x, 56)
	}
}
