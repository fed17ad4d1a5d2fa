package composite

import (
	"testing"
)

// TestWindow checks the window composite by hand on four pixels over three
// dates: kept, cloud-dropped, nodata and never-valid pixels.
func TestWindow(t *testing.T) {
	t.Parallel()
	dates := []Date{
		{DN: [][]uint16{{2000, 3000, 0, 5000}}, NoData: []uint16{0}, Scale: []float64{0.0001}, Offset: []float64{-0.1}, SCL: []uint8{4, 4, 4, 9}},
		{DN: [][]uint16{{4000, 3000, 1500, 5000}}, NoData: []uint16{0}, Scale: []float64{0.0001}, Offset: []float64{-0.1}, SCL: []uint8{4, 9, 5, 8}},
		{DN: [][]uint16{{1200, 4000, 0, 5000}}, NoData: []uint16{0}, Scale: []float64{0.0001}, Offset: []float64{0}, SCL: []uint8{5, 4, 4, 3}},
	}
	out := [][]uint16{make([]uint16, 4)}
	count := make([]uint8, 4)
	if err := Window(dates, DefaultDropSCL, 0.0001, -0.1, out, count); err != nil {
		t.Fatal(err)
	}
	// Pixel 0: reflectances 0.1, 0.3, 0.12 → median 0.12 → DN 2200.
	// Pixel 1: date 2 dropped (cloud); 0.2 and 0.4 → 0.3 → DN 4000.
	// Pixel 2: only date 2 valid: 0.05 → DN 1500. Pixel 3: all dropped.
	want := []uint16{2200, 4000, 1500, 0}
	wantCount := []uint8{3, 2, 1, 0}
	for i := range want {
		if out[0][i] != want[i] || count[i] != wantCount[i] {
			t.Errorf("pixel %d: DN %d count %d, want %d and %d", i, out[0][i], count[i], want[i], wantCount[i])
		}
	}
	if err := Window(dates[:1], DefaultDropSCL, 0.0001, -0.1, [][]uint16{make([]uint16, 3)}, make([]uint8, 4)); err == nil {
		t.Error("an output plane of the wrong size was accepted")
	}
}
