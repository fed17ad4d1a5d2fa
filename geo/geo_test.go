package geo

import "testing"

// TestBounds: the extent of a north-up grid, and of one whose rows run
// south to north (dy > 0), as minx, miny, maxx, maxy.
func TestBounds(t *testing.T) {
	t.Parallel()
	g := Grid{EPSG: 32631, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}, Width: 300, Height: 200}
	if got, want := g.Bounds(), [4]float64{500000, 4998000, 503000, 5000000}; got != want {
		t.Errorf("north-up: %v, want %v", got, want)
	}
	g.Transform[5] = 10
	if got, want := g.Bounds(), [4]float64{500000, 5000000, 503000, 5002000}; got != want {
		t.Errorf("south-up: %v, want %v", got, want)
	}
}
