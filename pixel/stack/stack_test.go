package stack

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lulc/lulc/geo"
)

func filled(t *testing.T) *Tile {
	t.Helper()
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}, Width: 7, Height: 5}
	tile := New("31TEJ", g, []string{"B04", "B08"}, 0.0001, -0.1)
	// Two windows that cover the grid, written as ingest would.
	for _, w := range [][4]int{{0, 0, 4, 5}, {4, 0, 3, 5}} {
		x, y, ww, hh := w[0], w[1], w[2], w[3]
		n := ww * hh
		dn := [][]uint16{make([]uint16, n), make([]uint16, n)}
		count, labels := make([]uint8, n), make([]uint8, n)
		for r := range hh {
			for c := range ww {
				i := r*ww + c
				px := (y+r)*g.Width + x + c
				dn[0][i], dn[1][i] = uint16(1000+px), uint16(2000+px)
				count[i], labels[i] = uint8(px%3), uint8(10*(px%5))
			}
		}
		if err := tile.Write(x, y, ww, hh, dn, count, labels); err != nil {
			t.Fatal(err)
		}
	}
	return tile
}

func TestWindows(t *testing.T) {
	t.Parallel()
	tile := filled(t)
	for px := range 35 {
		if tile.DN[0][px] != uint16(1000+px) || tile.DN[1][px] != uint16(2000+px) || tile.Labels[px] != uint8(10*(px%5)) || tile.Count[px] != uint8(px%3) {
			t.Fatalf("pixel %d: %d %d %d %d", px, tile.DN[0][px], tile.DN[1][px], tile.Labels[px], tile.Count[px])
		}
	}
	dst := make([]uint16, 6)
	tile.ReadBand(1, 2, 3, 3, 2, dst)
	want := []uint16{2000 + 23, 2000 + 24, 2000 + 25, 2000 + 30, 2000 + 31, 2000 + 32}
	if !reflect.DeepEqual(dst, want) {
		t.Errorf("ReadBand = %v, want %v", dst, want)
	}
	if err := tile.Write(5, 0, 3, 1, [][]uint16{{1, 2, 3}, {1, 2, 3}}, []uint8{1, 2, 3}, []uint8{1, 2, 3}); err == nil {
		t.Error("a window past the grid's edge was accepted")
	}
}

func TestSpillRoundTrip(t *testing.T) {
	t.Parallel()
	tile := filled(t)
	path := filepath.Join(t.TempDir(), "31TEJ.spill")
	if err := tile.Spill(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tile) {
		t.Fatalf("loaded tile differs:\n%+v\n%+v", back, tile)
	}
	body, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"truncated": body[:len(body)-1], "trailing": append(body, 0), "not a spill": []byte("{}\n"), "empty": nil,
	} {
		p := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(p, bad, 0o644)
		if _, err := Load(p); err == nil {
			t.Errorf("%s file loaded", name)
		}
	}
}

// FuzzDecode feeds the spill decoder mutated files, seeded with a real
// spill: it must return an error or a tile whose planes fit its grid, and
// never allocate more than the input backs.
func FuzzDecode(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed.raw")
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{0, 10, 0, 0, 0, -10}, Width: 3, Height: 2}
	if err := New("t", g, []string{"B04"}, 0.0001, -0.1).Spill(path); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, body []byte) {
		tile, err := decode(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			return
		}
		n := tile.Grid.Width * tile.Grid.Height
		if len(tile.Labels) != n || len(tile.Count) != n || len(tile.DN) == 0 || len(tile.DN[0]) != n || int64(n) > int64(len(body)) {
			t.Fatalf("decoded a %d×%d tile from %d bytes", tile.Grid.Width, tile.Grid.Height, len(body))
		}
	})
}
