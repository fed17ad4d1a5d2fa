package scenes

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/catalog"
)

func TestGroupByTileRefusesBadTileIDs(t *testing.T) {
	day := time.Date(2024, 4, 18, 0, 0, 0, 0, time.UTC)
	good := catalog.Item{ID: "S2A_31TEJ", Tile: "31TEJ", Datetime: day}
	for _, it := range []catalog.Item{
		{ID: "evil", Tile: "../../victim", Datetime: day, Location: "/cat/evil.json"},
		{ID: "dot", Tile: ".", Datetime: day},
		// Without a tile the id names the directory.
		{ID: "../up", Datetime: day},
	} {
		_, err := GroupByTile([]catalog.Item{good, it})
		if err == nil || !strings.Contains(err.Error(), `item "`+it.ID+`"`) || !errors.Is(err, atomicfs.ErrBadName) {
			t.Errorf("%+v: got %v", it, err)
		}
	}
	g, err := GroupByTile([]catalog.Item{good})
	if err != nil || len(g) != 1 || g[0].Tile != "31TEJ" {
		t.Errorf("good item: %v %v", g, err)
	}
}
