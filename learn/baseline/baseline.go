// Package baseline trains golearn's random forest (github.com/sjwhitworth/golearn)
// on lulc's samples: the CPU baseline that lulc's own forest is measured
// against.
//
// golearn's ensemble.RandomForest differs from lulc's forest (package
// forest) in ways that matter for speed and accuracy:
//   - its trees are ID3 trees choosing splits by information gain, each
//     numeric attribute split by sorting every (value, class) pair at every
//     node, where lulc bins features once and builds integer histograms;
//   - it draws the candidate features once per tree, not per node, and uses
//     each attribute at most once on a path;
//   - it has no max_depth and no min_samples_leaf;
//   - its bootstrap uses the global math/rand source: there is no seed
//     parameter, so runs are not reproducible (lulc seeds that source, which
//     still leaves goroutine scheduling free to reorder draws);
//   - it stores every value as float64 in memory and grows one goroutine per
//     tree.
//
// golearn links liblinear through cgo, so this package, unlike forest,
// needs cgo.
package baseline

import (
	"errors"
	"fmt"
	"math"
	"math/rand"

	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/ensemble"
)

// Forest is a trained golearn forest with the attribute layout it expects.
type Forest struct {
	rf       *ensemble.RandomForest
	template *base.DenseInstances
	attrs    []base.Attribute
	class    *base.CategoricalAttribute
	classes  int
}

// instances builds golearn's DenseInstances straight from a row-major
// float matrix (no CSV round trip). y may be nil for prediction. NaN
// features become 0: golearn has no missing values.
func instances(x []float32, nf int, y []uint8, classes int) (*base.DenseInstances, []base.Attribute, *base.CategoricalAttribute) {
	n := len(x) / nf
	inst := base.NewDenseInstances()
	attrs := make([]base.Attribute, nf)
	for f := range nf {
		a := base.NewFloatAttribute(fmt.Sprintf("f%d", f))
		attrs[f] = a
		inst.AddAttribute(a)
	}
	values := make([]string, classes)
	for c := range classes {
		values[c] = fmt.Sprint(c)
	}
	cls := base.NewCategoricalAttribute()
	cls.SetName("class")
	for _, v := range values {
		cls.GetSysValFromString(v)
	}
	inst.AddAttribute(cls)
	inst.AddClassAttribute(cls)
	specs := base.ResolveAttributes(inst, append(append([]base.Attribute{}, attrs...), cls))
	inst.Extend(n)
	for i := range n {
		for f := range nf {
			v := float64(x[i*nf+f])
			if math.IsNaN(v) {
				v = 0
			}
			inst.Set(specs[f], i, base.PackFloatToBytes(v))
		}
		c := 0
		if y != nil {
			c = int(y[i])
		}
		inst.Set(specs[nf], i, cls.GetSysValFromString(values[c]))
	}
	return inst, attrs, cls
}

// Train fits ensemble.NewRandomForest(trees, featuresPerTree) to the rows.
// seed seeds math/rand's global source, which golearn's bootstrap reads.
func Train(x []float32, nf int, y []uint8, classes, trees, featuresPerTree int, seed int64) (f *Forest, err error) {
	if nf <= 0 || len(x) != len(y)*nf || len(y) == 0 {
		return nil, fmt.Errorf("golearn: %d values for %d rows × %d features", len(x), len(y), nf)
	}
	if featuresPerTree < 1 || featuresPerTree > nf {
		return nil, fmt.Errorf("golearn: %d features per tree of %d", featuresPerTree, nf)
	}
	rand.Seed(seed) //nolint:staticcheck // golearn draws from the global source
	inst, attrs, cls := instances(x, nf, y, classes)
	rf := ensemble.NewRandomForest(trees, featuresPerTree)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("golearn: fit panicked: %v", r)
		}
	}()
	if err := rf.Fit(inst); err != nil {
		return nil, fmt.Errorf("golearn: fit: %w", err)
	}
	return &Forest{rf: rf, template: inst, attrs: attrs, class: cls, classes: classes}, nil
}

// Predict classifies rows; golearn returns class labels as strings, mapped
// back to class indices.
func (f *Forest) Predict(x []float32, nf int) (out []uint8, err error) {
	if len(f.attrs) != nf {
		return nil, errors.New("golearn: feature count differs from training")
	}
	inst, _, _ := instances(x, nf, nil, f.classes)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("golearn: predict panicked: %v", r)
		}
	}()
	pred, err := f.rf.Predict(inst)
	if err != nil {
		return nil, fmt.Errorf("golearn: predict: %w", err)
	}
	n := len(x) / nf
	out = make([]uint8, n)
	for i := range n {
		var c int
		if _, err := fmt.Sscan(base.GetClass(pred, i), &c); err != nil {
			return nil, fmt.Errorf("golearn: prediction %q: %w", base.GetClass(pred, i), err)
		}
		out[i] = uint8(c)
	}
	return out, nil
}
