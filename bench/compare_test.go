package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/learn/sklearn"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// TestCompareSklearn trains lulc's forest on each real TerraMind patch and
// has scikit-learn fit the same samples with the same parameters: the
// validation accuracies must agree within one point, and the comparison
// lands in the run directory. It needs python3 with scikit-learn.
func TestCompareSklearn(t *testing.T) {
	if _, err := os.Stat("../../shared/data/terramind-s2-lulc"); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	if _, err := sklearn.Python(context.Background(), ""); err != nil {
		t.Skip(err)
	}
	raw, err := configs.Read("train-real.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := config.ParseTrainConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	base.Forest.Trees = 30 // quick; the config grows 100
	for _, r := range base.Input.Rasters {
		cfg := base
		r.Image, r.Labels = filepath.Join("..", r.Image), filepath.Join("..", r.Labels)
		cfg.Input.Rasters = append(cfg.Input.Rasters[:0:0], r)
		dir := filepath.Join(t.TempDir(), "run")
		res, err := train.Train(context.Background(), cfg, stage.Options{Out: dir})
		if err != nil {
			t.Fatal(err)
		}
		c, err := CompareSklearn(context.Background(), dir, cfg.Forest, res.Metrics.Accuracy, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: lulc %.4f, scikit-learn %s %.4f", filepath.Base(r.Image), c.Lulc, c.SklearnVersion, c.Sklearn)
		if math.Abs(c.Difference) > 1 || c.ValidationRows == 0 || c.SklearnVersion == "" {
			t.Errorf("%s: lulc %.4f against scikit-learn %.4f on %d rows", r.Image, c.Lulc, c.Sklearn, c.ValidationRows)
		}
		var back Comparison
		body, err := os.ReadFile(filepath.Join(dir, CompareFile))
		if err == nil {
			err = json.Unmarshal(body, &back)
		}
		if err != nil || back != c {
			t.Errorf("%s: %v, %+v", CompareFile, err, back)
		}
	}
}
