package sampling

import (
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/pixel/stack"
)

// TestSplitPlaneIsTheDraws draws every candidate of two tiles (max per
// class above their pixels) with a buffered block split, and checks the
// split plane of each against the draw pixel for pixel: every training
// sample lies on a train pixel, every validation sample on a validation
// pixel, and there are as many of each, and as many buffer pixels as the
// draw dropped.
func TestSplitPlaneIsTheDraws(t *testing.T) {
	t.Parallel()
	bands := []string{"B04", "B08"}
	cfg := Config{MaxPerClass: 1 << 20, BlockSize: 8, ValidationFraction: 0.3, Seed: 11, Buffer: 3}
	var ins []Input
	var planes [][]uint8
	for ti := range 2 {
		g := geo.Grid{EPSG: 32631, Width: 53, Height: 37, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
		tile := stack.New("t", g, bands, 1e-4, 0)
		for i := range tile.Labels {
			tile.Labels[i] = []uint8{10, 30, 0, 80, 40}[(i*7+ti)%5]
			tile.DN[0][i] = uint16(1000 + i%97)
			tile.DN[1][i] = uint16(3000 + i%89)
		}
		ins = append(ins, Input{Name: "t", Bands: bands, Scale: 1e-4, NoData: new(float64), Tile: tile})
		p, err := SplitPlane(cfg, ti, tile.Labels, g.Width, g.Height)
		if err != nil {
			t.Fatal(err)
		}
		planes = append(planes, p)
	}
	sp := New(cfg, bands, landcover.WorldCover, cpu)
	for _, in := range ins {
		if err := sp.Add(in); err != nil {
			t.Fatal(err)
		}
	}
	set, _, err := sp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var count [4]int64
	for _, p := range planes {
		for _, v := range p {
			count[v]++
		}
	}
	var drawn [2]int64
	for i, px := range set.Pixel {
		src, row, col := px>>40, (px>>20)&(1<<20-1), px&(1<<20-1)
		got := planes[src][int(row)*53+int(col)]
		want := uint8(PlaneTrain)
		if set.Split[i] == 1 {
			want = PlaneValidation
		}
		if got != want {
			t.Fatalf("sample %d (input %d, row %d, col %d, split %d): plane %d", i, src, row, col, set.Split[i], got)
		}
		drawn[set.Split[i]]++
	}
	if drawn[0] != count[PlaneTrain] || drawn[1] != count[PlaneValidation] || sp.Buffered() != count[PlaneBuffer] || count[PlaneBuffer] == 0 {
		t.Errorf("drawn %v, plane train %d validation %d buffer %d, buffered %d", drawn, count[PlaneTrain], count[PlaneValidation], count[PlaneBuffer], sp.Buffered())
	}
	if _, err := SplitPlane(Config{Split: SplitFeatures, BlockSize: 8}, 0, nil, 0, 0); err == nil {
		t.Error("a split by features has a plane")
	}
}
