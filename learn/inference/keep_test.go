package inference

import (
	"slices"
	"testing"

	"github.com/lulc/lulc/geo"
)

// TestKeepRemapsReference checks that a window's predictions are counted
// against the reference with the model's label remap: a code outside the
// classes counts as the class it is remapped onto, unlabelled pixels and
// codes neither a class nor remapped are left out.
func TestKeepRemapsReference(t *testing.T) {
	tile := Tile{Grid: geo.Grid{Width: 5, Height: 1}, Codes: []uint8{10, 30},
		Reference: []uint8{20, 30, 10, 0, 77}, Remap: map[uint8]uint8{20: 30},
		Confusion: [][]int64{{0, 0}, {0, 0}}}
	index := tile.codeIndex()
	tile.keep(window{g: geo.Grid{Width: 5, Height: 1}, cls: []uint8{30, 30, 10, 10, 10}}, index, tile.referenceIndex(index))
	if want := [][]int64{{1, 0}, {0, 2}}; !slices.EqualFunc(tile.Confusion, want, slices.Equal) {
		t.Errorf("confusion %v, want %v", tile.Confusion, want)
	}
}
