package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/report/charts"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/predict"
)

// drawer is what the commands set Options.Charts to: tests whose outputs
// must be the commands' draw with it.
var drawer stage.Charts = charts.Drawer{}

// TestNoChartsNoPNGs: without Options.Charts the stages write no PNG and
// name none: no quicklook asset in the tiles' items, no quicklook path in
// the result.
func TestNoChartsNoPNGs(t *testing.T) {
	model := demoModel(t) // trained without charts
	for _, f := range []string{"confusion.png", "importance.png"} {
		if atomicfs.Exists(filepath.Join(filepath.Dir(model), f)) {
			t.Errorf("train wrote %s without charts", f)
		}
	}
	out := filepath.Join(t.TempDir(), "pred")
	res, err := predict.Predict(context.Background(), predict.Config{Model: model, Input: demoStack(t), Window: 1024}, stage.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tiles) != 1 || res.Tiles[0].Quicklook != "" {
		t.Fatalf("tiles %+v", res.Tiles)
	}
	tile := filepath.Join(out, res.Tiles[0].Tile)
	if atomicfs.Exists(filepath.Join(tile, stage.QuicklookFile)) {
		t.Error("predict wrote a quicklook without charts")
	}
	item, err := os.ReadFile(filepath.Join(tile, stage.ItemFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(item), "quicklook") {
		t.Error("the item names a quicklook that was not drawn")
	}
	if !predict.Verified(tile) {
		t.Error("the tile without a quicklook does not verify")
	}
	ev := filepath.Join(t.TempDir(), "ev")
	if _, err := evaluate.Evaluate(context.Background(), res.Tiles[0].Class, filepath.Join(demoStack(t), res.Tiles[0].Tile, "labels.tif"), evaluate.DefaultConfig(), stage.Options{Out: ev}); err != nil {
		t.Fatal(err)
	}
	if atomicfs.Exists(filepath.Join(ev, "confusion.png")) || !atomicfs.Exists(filepath.Join(ev, stage.MetricsFile)) {
		t.Error("evaluate without charts: confusion.png written or metrics.json missing")
	}
}
