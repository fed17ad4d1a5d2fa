package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sklearn"
	"github.com/lulc/lulc/stage"
)

// CompareFile is where lulc train --compare sklearn writes its comparison.
const CompareFile = "compare-sklearn.json"

// Comparison is lulc's forest against scikit-learn's on one training run's
// samples: the same training and validation rows, the same trees, depth,
// features per split, leaf size, bootstrap and seed.
type Comparison struct {
	Rows           int     `json:"training_rows"`
	ValidationRows int     `json:"validation_rows"`
	Lulc           float64 `json:"lulc_accuracy"`
	Sklearn        float64 `json:"sklearn_accuracy"`
	SklearnVersion string  `json:"sklearn_version"`
	SklearnFit     float64 `json:"sklearn_fit_seconds"`
	Difference     float64 `json:"difference_points"` // (lulc − scikit-learn) × 100
}

// CompareSklearn fits scikit-learn on the samples of the training run in
// dir (its samples.lulcs) with the run's forest parameters p, compares its
// validation accuracy with lulc's (the run's, lulcAccuracy) and writes
// CompareFile into dir. python is the interpreter (python3 when empty).
func CompareSklearn(ctx context.Context, dir string, p forest.Params, lulcAccuracy float64, python string) (Comparison, error) {
	body, err := os.ReadFile(filepath.Join(dir, stage.SamplesFile))
	if err != nil {
		return Comparison{}, fmt.Errorf("compare: %w", err)
	}
	set, err := sampleset.Decode(body)
	if err != nil {
		return Comparison{}, fmt.Errorf("compare: %s: %w", stage.SamplesFile, err)
	}
	nf := len(set.Features)
	xt, yt := set.Subset(0)
	xv, yv := set.Subset(1)
	tmp, err := os.MkdirTemp("", "lulc-sklearn-")
	if err != nil {
		return Comparison{}, err
	}
	defer os.RemoveAll(tmp)
	vx, vy := filepath.Join(tmp, "val_x.npy"), filepath.Join(tmp, "val_y.npy")
	if err := sklearn.WriteNpy(vx, xv, []int{len(yv), nf}); err != nil {
		return Comparison{}, err
	}
	if err := sklearn.WriteNpy(vy, yv, []int{len(yv)}); err != nil {
		return Comparison{}, err
	}
	res, err := sklearn.Runner{Python: python, Dir: tmp}.Fit(ctx, p, sklearn.Data{X: xt, Y: yt, Features: nf, ValX: vx, ValY: vy})
	if err != nil {
		return Comparison{}, fmt.Errorf("compare: %w", err)
	}
	c := Comparison{Rows: len(yt), ValidationRows: len(yv), Lulc: lulcAccuracy, Sklearn: res.Accuracy,
		SklearnVersion: res.Version, SklearnFit: res.Fit, Difference: 100 * (lulcAccuracy - res.Accuracy)}
	out, _ := json.MarshalIndent(c, "", "  ")
	return c, atomicfs.WriteFile(filepath.Join(dir, CompareFile), append(out, '\n'))
}
