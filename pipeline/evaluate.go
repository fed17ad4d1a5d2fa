package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/lulc/lulc/charts"
	"github.com/lulc/lulc/forest"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/landcover"
	"github.com/lulc/lulc/raster"
)

// EvaluateResult is the comparison of a class map with reference labels.
type EvaluateResult struct {
	Dir     string
	Metrics forest.Metrics
	Names   []string
	Pixels  int // compared pixels (both sides labelled with a known class)
}

// Evaluate compares a class map with a label raster, warping the labels
// onto the class map's grid with alg (mode or nearest) when the grids
// differ. Classes are the class map's categories (from its GDAL category
// names), else WorldCover's. Pixels where either side is 0 or a code
// outside the classes are left out. It writes metrics.json and
// confusion.png into opt.Out.
func Evaluate(prediction, labels, alg string, opt Options) (EvaluateResult, error) {
	opt.Fill()
	if err := atomicfs.CheckInputs(opt.Out, append([]string{prediction, labels}, opt.Inputs...)...); err != nil {
		return EvaluateResult{}, err
	}
	pred, err := raster.Open(prediction)
	if err != nil {
		return EvaluateResult{}, err
	}
	defer pred.Close()
	lab, err := raster.Open(labels)
	if err != nil {
		return EvaluateResult{}, err
	}
	defer lab.Close()
	n := pred.Width * pred.Height
	p := make([]uint8, n)
	if err := raster.ReadBandWindowInto(pred, 1, 0, 0, pred.Width, pred.Height, p); err != nil {
		return EvaluateResult{}, err
	}
	l := make([]uint8, n)
	if err := lab.Read(pred.Grid, alg, l); err != nil {
		return EvaluateResult{}, err
	}
	scheme := landcover.WorldCover
	if names, err := raster.Categories(prediction); err == nil && len(names) > 0 {
		scheme = landcover.Scheme{Name: "prediction"}
		for code, name := range names {
			if code > 0 && name != "" {
				c, _ := landcover.WorldCover.Class(uint8(code))
				scheme.Classes = append(scheme.Classes, landcover.Class{Code: uint8(code), Name: name, Color: c.Color})
			}
		}
	}
	index := map[uint8]uint8{}
	for i, c := range scheme.Classes {
		index[c.Code] = uint8(i)
	}
	var ref, got []uint8
	for i := range n {
		ri, ok1 := index[l[i]]
		pi, ok2 := index[p[i]]
		if ok1 && ok2 {
			ref, got = append(ref, ri), append(got, pi)
		}
	}
	if len(ref) == 0 {
		return EvaluateResult{}, fmt.Errorf("no pixel of %s has a known class in both the prediction and the labels (%s)", prediction, labels)
	}
	m, err := forest.Evaluate(ref, got, scheme.Codes())
	if err != nil {
		return EvaluateResult{}, err
	}
	res := EvaluateResult{Dir: opt.Out, Metrics: m, Pixels: len(ref)}
	for _, c := range scheme.Classes {
		res.Names = append(res.Names, c.Name)
	}
	stage, err := atomicfs.Begin(opt.Out, opt.Force, opt.BreakLock, fmt.Sprintf("evaluate %s %s %s", prediction, labels, alg))
	if err != nil {
		return res, err
	}
	defer stage.Release()
	body, _ := json.MarshalIndent(struct {
		forest.Metrics
		Names      []string `json:"class_names"`
		Prediction string   `json:"prediction"`
		Labels     string   `json:"labels"`
		Resampling string   `json:"label_resampling"`
	}{m, res.Names, prediction, labels, alg}, "", "  ")
	if err := atomicfs.WriteFile(stage.Path(MetricsFile), append(body, '\n')); err != nil {
		return res, err
	}
	if err := charts.Confusion(stage.Path("confusion.png"), m.Confusion, res.Names,
		fmt.Sprintf("Prediction vs labels: OA %.3f, κ %.3f", m.Accuracy, m.Kappa)); err != nil {
		return res, err
	}
	return res, stage.Commit()
}
