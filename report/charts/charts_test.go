package charts

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestConfusionChart draws the chart both ways: a PNG wider than tall by
// the colour bar, absent classes left out, and the counts variant a
// different image.
func TestConfusionChart(t *testing.T) {
	conf := [][]int64{{90, 10, 0, 0}, {5, 45, 0, 0}, {0, 0, 0, 0}, {1, 2, 0, 30}}
	names := []string{"Tree cover", "Cropland", "Snow and ice", "Built-up"}
	dir := t.TempDir()
	var sizes []int64
	for i, counts := range []bool{false, true} {
		path := filepath.Join(dir, []string{"shares.png", "counts.png"}[i])
		if err := Confusion(path, conf, names, "test", counts); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Three present classes: a 280-point matrix and a 70-point bar.
		if b := img.Bounds(); b.Dx() <= b.Dy() {
			t.Errorf("counts %v: %d × %d, no room for the colour bar", counts, b.Dx(), b.Dy())
		}
		info, _ := os.Stat(path)
		sizes = append(sizes, info.Size())
		if os.Getenv("LULC_KEEP_CHARTS") != "" {
			body, _ := os.ReadFile(path)
			os.WriteFile(filepath.Join(os.Getenv("LULC_KEEP_CHARTS"), filepath.Base(path)), body, 0o644)
		}
	}
	if sizes[0] == sizes[1] {
		t.Error("the counts chart is the shares chart")
	}
	if err := Confusion(filepath.Join(dir, "x.png"), [][]int64{{0}}, []string{"a"}, "t", false); err == nil {
		t.Error("an empty matrix drew")
	}
}
