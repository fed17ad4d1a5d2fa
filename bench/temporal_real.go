package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sklearn"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/stage"
)

// TemporalRealConfig sets up the comparison of temporal NDVI features on
// real data: an NDVI series with cloud masks and polygon labels in the
// layout of eo-learn's Slovenian test patch (NDVI.tif, CLM.tif,
// timestamps.json, LULC.gpkg, LULC.tif in Data), per-pixel feature sets
// computed with package composite, and lulc's forest (and scikit-learn's)
// scored by group k-fold over the polygons, once per seed.
type TemporalRealConfig struct {
	Data        string
	Folds       int
	Seeds       []uint64 // each seeds the fold assignment and the forest
	Percentiles []int
	Seasons     []composite.Season
	Forest      forest.Params // its Seed is replaced by each of Seeds
	Engines     []string      // lulc, sklearn
	Python      string        // scikit-learn's interpreter (empty: sklearn.Python's choice)
	Jobs        int           // scikit-learn's n_jobs (0: every CPU)
}

// The files of the patch and the fields of its polygons.
const (
	sloNDVI, sloCLM, sloTimes   = "NDVI.tif", "CLM.tif", "timestamps.json"
	sloPolygons, sloReference   = "LULC.gpkg", "LULC.tif"
	sloClassField, sloNameField = "LULC_ID", "LULC_NAME"
)

// DefaultTemporalReal is the comparison of docs/train.md: 5 folds, seeds
// 1–3, the 10th to 90th percentiles and the four meteorological seasons
// (winter December–February, pooled over the years), with forest
// parameters the caller sets (lulc bench temporal-real takes train-real's).
func DefaultTemporalReal(data string, p forest.Params) TemporalRealConfig {
	md := func(m time.Month, d int) composite.MonthDay { return composite.MonthDay{Month: m, Day: d} }
	return TemporalRealConfig{
		Data: data, Folds: 5, Seeds: []uint64{1, 2, 3},
		Percentiles: []int{10, 25, 50, 75, 90},
		Seasons: []composite.Season{
			{Name: "djf", From: md(time.December, 1), To: md(time.February, 29)},
			{Name: "mam", From: md(time.March, 1), To: md(time.May, 31)},
			{Name: "jja", From: md(time.June, 1), To: md(time.August, 31)},
			{Name: "son", From: md(time.September, 1), To: md(time.November, 30)},
		},
		Forest: p, Engines: []string{"lulc", "sklearn"},
	}
}

// Check names the first bad setting.
func (c TemporalRealConfig) Check() error {
	switch {
	case c.Data == "":
		return errors.New("data: no folder given")
	case c.Folds < 2 || c.Folds > 100:
		return fmt.Errorf("folds: %d is outside 2–100", c.Folds)
	case len(c.Seeds) == 0:
		return errors.New("seeds: none given")
	case len(c.Engines) == 0:
		return errors.New("engines: none given (lulc, sklearn)")
	}
	for i, s := range c.Seeds {
		if slices.Contains(c.Seeds[:i], s) {
			return fmt.Errorf("seeds: %d listed twice", s)
		}
	}
	for i, e := range c.Engines {
		if e != "lulc" && e != "sklearn" {
			return fmt.Errorf("engines: %q is not lulc or sklearn", e)
		}
		if slices.Contains(c.Engines[:i], e) {
			return fmt.Errorf("engines: %s listed twice", e)
		}
	}
	// max_features is checked against each set's features when it is fitted.
	fp := c.Forest
	fp.MaxFeatures = 0
	if err := fp.Validate(1); err != nil {
		return fmt.Errorf("forest: %w", err)
	}
	if _, err := c.temporal(); err != nil {
		return err
	}
	return nil
}

// temporal is the composite.Temporal whose Summarise computes the
// percentiles and seasonal medians: NDVI of bands B04 and B08, which only
// makes the configuration valid; the values summarised are the patch's
// NDVI as stored.
func (c TemporalRealConfig) temporal() (*composite.Temporal, error) {
	return composite.NewTemporal([]string{"ndvi"}, []string{"B04", "B08"}, c.Percentiles, c.Seasons)
}

// TemporalRealReport is the comparison's outcome.
type TemporalRealReport struct {
	Command string   `json:"command"`
	Host    HostInfo `json:"host"`
	Data    string   `json:"data"`
	Width   int      `json:"width"`
	Height  int      `json:"height"`
	EPSG    int      `json:"epsg"`
	Dates   int      `json:"dates"`
	First   string   `json:"first_date"`
	Last    string   `json:"last_date"`
	// Cloudy is the fraction of the date × pixel observations CLM marks
	// cloudy; ValidDates the valid dates per labelled pixel.
	Cloudy      float64       `json:"cloudy_fraction"`
	ValidDates  Spread        `json:"valid_dates_per_pixel"`
	SeasonDates []SeasonDates `json:"dates_per_season"`
	Raster      RasterCheck   `json:"rasterisation"`
	Classes     []ClassCount  `json:"classes"`
	Polygons    int           `json:"polygons"` // with labelled pixels
	Folds       []FoldSplit   `json:"folds"`    // per seed
	Forest      forest.Params `json:"forest"`   // seed: each run's
	Sklearn     string        `json:"sklearn_version,omitempty"`
	Sets        []TemporalSet `json:"feature_sets"`
	Seconds     float64       `json:"seconds"`
}

// SeasonDates is how many of the dates lie in a season.
type SeasonDates struct {
	Season string `json:"season"`
	Dates  int    `json:"dates"`
}

// RasterCheck compares lulc's rasterisation of the polygons (centre rule)
// with the reference raster: pixels whose class differs, the first few
// listed.
type RasterCheck struct {
	Pixels      int         `json:"pixels"`
	Labelled    int         `json:"labelled"`
	Differ      int         `json:"differ"`
	Differences []PixelDiff `json:"differences,omitempty"`
}

// PixelDiff is one pixel where lulc's class and the reference's differ.
type PixelDiff struct {
	X, Y      int
	Lulc, Ref int
}

// ClassCount is a class's labelled pixels and polygons.
type ClassCount struct {
	Code     uint8  `json:"code"`
	Name     string `json:"name"`
	Pixels   int    `json:"pixels"`
	Polygons int    `json:"polygons"`
}

// FoldSplit is one seed's folds.
type FoldSplit struct {
	Seed  uint64     `json:"seed"`
	Folds []FoldInfo `json:"folds"`
}

// FoldInfo is one fold's polygons and pixels, per class in the order of
// the report's classes.
type FoldInfo struct {
	Polygons int   `json:"polygons"`
	Pixels   int   `json:"pixels"`
	PerClass []int `json:"pixels_per_class"`
}

// TemporalSet is one feature set's runs (per engine and seed) and their
// summaries (per engine).
type TemporalSet struct {
	Name     string            `json:"name"`
	Features []string          `json:"features"`
	NaNs     int               `json:"nan_values"` // over the labelled pixels
	Runs     []TemporalRun     `json:"runs"`
	Summary  []TemporalSummary `json:"summary"`
}

// TemporalRun is one engine's cross-validation with one seed: the metrics
// of every labelled pixel predicted by the fold's forest that did not see
// its polygon, and each fold's accuracy.
type TemporalRun struct {
	Engine       string         `json:"engine"`
	Seed         uint64         `json:"seed"`
	Metrics      forest.Metrics `json:"metrics"`
	FoldAccuracy []float64      `json:"fold_accuracy"`
}

// TemporalSummary is an engine's metrics over the seeds.
type TemporalSummary struct {
	Engine   string   `json:"engine"`
	Accuracy Spread   `json:"overall_accuracy"`
	Kappa    Spread   `json:"kappa"`
	MacroF1  Spread   `json:"macro_f1"`
	F1       []Spread `json:"f1"` // per class
}

// Spread is the mean, the sample standard deviation, the least and the
// greatest of some values.
type Spread struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func spreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := Spread{Min: v[0], Max: v[0]}
	for _, x := range v {
		s.Mean += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean /= float64(len(v))
	if len(v) > 1 {
		for _, x := range v {
			s.SD += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(s.SD / float64(len(v)-1))
	}
	return s
}

// patch is the data read: NDVI per date (NaN where cloudy), its dates,
// the polygons' classes and group ids as lulc rasterises them.
type patch struct {
	grid   geo.Grid
	dates  []time.Time
	ndvi   [][]float32 // date → pixel
	cloudy int         // cloudy observations
	labels []uint8
	groups []uint32
	ref    []uint16
	names  map[int]string
}

// loadPatch reads the patch in dir and checks its parts agree: as many
// NDVI and CLM bands as timestamps, one grid, CLM of 0 (clear) and 1
// (cloud) only.
func loadPatch(dir string) (*patch, error) {
	p := &patch{}
	raw, err := os.ReadFile(filepath.Join(dir, sloTimes))
	if err != nil {
		return nil, err
	}
	var stamps []string
	if err := json.Unmarshal(raw, &stamps); err != nil {
		return nil, fmt.Errorf("%s: %w", sloTimes, err)
	}
	for i, s := range stamps {
		t, err := time.Parse("2006-01-02T15:04:05", s)
		if err != nil {
			return nil, fmt.Errorf("%s: timestamp %d: %w", sloTimes, i, err)
		}
		p.dates = append(p.dates, t)
	}
	if len(p.dates) == 0 {
		return nil, fmt.Errorf("%s: no timestamps", sloTimes)
	}
	ndvi, err := readBands[float32](filepath.Join(dir, sloNDVI), len(p.dates))
	if err != nil {
		return nil, err
	}
	p.grid = ndvi.grid
	clm, err := readBands[uint8](filepath.Join(dir, sloCLM), len(p.dates))
	if err != nil {
		return nil, err
	}
	if clm.grid != p.grid {
		return nil, fmt.Errorf("%s: grid %+v differs from %s's %+v", sloCLM, clm.grid, sloNDVI, p.grid)
	}
	p.ndvi = ndvi.bands
	for d, mask := range clm.bands {
		for i, c := range mask {
			switch c {
			case 0:
			case 1:
				p.ndvi[d][i] = float32(math.NaN())
				p.cloudy++
			default:
				return nil, fmt.Errorf("%s: band %d pixel %d holds %d; a cloud mask is 0 (clear) or 1 (cloud)", sloCLM, d+1, i, c)
			}
		}
	}
	gpkg := filepath.Join(dir, sloPolygons)
	v := raster.VectorLabels{Field: sloClassField}
	if p.labels, err = raster.RasterizeLabels(gpkg, v, p.grid); err != nil {
		return nil, err
	}
	if p.groups, err = raster.RasterizeGroups(gpkg, v, "", p.grid); err != nil {
		return nil, err
	}
	if p.names, err = raster.ClassNames(gpkg, v, sloNameField); err != nil {
		return nil, err
	}
	ref, g, err := raster.ReadBand[uint16](filepath.Join(dir, sloReference), 1)
	if err != nil {
		return nil, err
	}
	if g.Transform != p.grid.Transform || g.Width != p.grid.Width || g.Height != p.grid.Height {
		return nil, fmt.Errorf("%s: grid %+v differs from %s's %+v", sloReference, g, sloNDVI, p.grid)
	}
	p.ref = ref
	return p, nil
}

type bandStack[T float32 | uint8] struct {
	grid  geo.Grid
	bands [][]T
}

// readBands reads every band of a small raster that must have n.
func readBands[T float32 | uint8](path string, n int) (*bandStack[T], error) {
	info, err := raster.Inspect(path)
	if err != nil {
		return nil, err
	}
	if info.Bands != n {
		return nil, fmt.Errorf("%s: %d bands for %d timestamps", path, info.Bands, n)
	}
	src, err := raster.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	s := &bandStack[T]{grid: src.Grid}
	for b := range n {
		buf := make([]T, s.grid.Width*s.grid.Height)
		if err := raster.ReadBandWindowInto(src, b+1, 0, 0, s.grid.Width, s.grid.Height, buf); err != nil {
			return nil, err
		}
		s.bands = append(s.bands, buf)
	}
	return s, nil
}

// check compares the rasterised classes with the reference raster.
func (p *patch) check() RasterCheck {
	rc := RasterCheck{Pixels: len(p.labels)}
	for i, c := range p.labels {
		if c != 0 {
			rc.Labelled++
		}
		if uint16(c) != p.ref[i] {
			rc.Differ++
			if len(rc.Differences) < 20 {
				rc.Differences = append(rc.Differences, PixelDiff{X: i % p.grid.Width, Y: i / p.grid.Width, Lulc: int(c), Ref: int(p.ref[i])})
			}
		}
	}
	return rc
}

// groupFolds deals the groups into k folds: sorted by a seeded hash of
// their ids and dealt in turn, so that folds differ by at most one group
// and all of a group's pixels share its fold.
func groupFolds(groups []uint32, k int, seed uint64) map[uint32]int {
	ids := slices.Clone(groups)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	key := func(g uint32) uint64 { return rng.Hash(seed, 0x666f6c64, uint64(g)) }
	slices.SortFunc(ids, func(a, b uint32) int { return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a, b)) })
	folds := make(map[uint32]int, len(ids))
	for i, g := range ids {
		folds[g] = i % k
	}
	return folds
}

// pixelFolds is each pixel's fold, its group's (groupFolds).
func pixelFolds(groups []uint32, k int, seed uint64) []int {
	folds := groupFolds(groups, k, seed)
	out := make([]int, len(groups))
	for i, g := range groups {
		out[i] = folds[g]
	}
	return out
}

// temporalFeatures computes every labelled pixel's features, row-major
// in the order of names: the median NDVI over the valid dates
// (composite.Median), the percentiles and seasonal medians
// (composite.Temporal.Summarise) and the number of valid dates.
func temporalFeatures(p *patch, tp *composite.Temporal, rows []int) (x []float32, names []string, err error) {
	n := p.grid.Width * p.grid.Height
	med := make([]float32, n)
	if err := composite.Median(med, p.ndvi); err != nil {
		return nil, nil, err
	}
	masks := make([]uint32, len(p.dates))
	for d, t := range p.dates {
		masks[d] = tp.SeasonMask(t)
	}
	names = append(append([]string{"median(ndvi)"}, tp.Planes()...), "valid_dates")
	nf := len(names)
	x = make([]float32, 0, len(rows)*nf)
	vals := make([]float32, len(p.dates))
	stats := make([]float32, tp.PerSource())
	var s composite.Scratch
	for _, i := range rows {
		count := 0
		for d := range p.dates {
			vals[d] = p.ndvi[d][i]
			if vals[d] == vals[d] {
				count++
			}
		}
		tp.Summarise(stats, vals, masks, &s)
		x = append(x, med[i])
		x = append(x, stats...)
		x = append(x, float32(count))
	}
	return x, names, nil
}

// TemporalReal runs the comparison into opt.Out (report.json, report.md).
func TemporalReal(ctx context.Context, c TemporalRealConfig, command string, opt stage.Options) (*TemporalRealReport, error) {
	opt.Fill()
	if err := c.Check(); err != nil {
		return nil, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append([]string{c.Data}, opt.Inputs...)...); err != nil {
		return nil, err
	}
	var python string
	if slices.Contains(c.Engines, "sklearn") {
		var err error
		if python, err = sklearn.Python(ctx, c.Python); err != nil {
			return nil, fmt.Errorf("%w (or leave sklearn out of the engines)", err)
		}
	}
	start := time.Now()
	p, err := loadPatch(c.Data)
	if err != nil {
		return nil, fmt.Errorf("temporal-real: %w", err)
	}
	stage, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "temporal-real bench")
	if err != nil {
		return nil, err
	}
	defer stage.Release()
	rep, err := temporalReal(ctx, c, p, python, stage.Path("npy"), opt)
	if err != nil {
		return nil, err
	}
	rep.Command, rep.Host = command, hostInfo(opt.Version)
	rep.Seconds = time.Since(start).Seconds()
	body, _ := json.MarshalIndent(rep, "", "  ")
	if err := atomicfs.WriteFile(stage.Path("report.json"), append(body, '\n')); err != nil {
		return nil, err
	}
	if err := atomicfs.WriteFile(stage.Path("report.md"), []byte(TemporalRealMarkdown(rep))); err != nil {
		return nil, err
	}
	if err := stage.Commit(); err != nil {
		return nil, err
	}
	return rep, nil
}

// temporalReal measures the patch: everything in the report but the
// command, host and time. npyDir holds scikit-learn's files meanwhile.
func temporalReal(ctx context.Context, c TemporalRealConfig, p *patch, python, npyDir string, opt stage.Options) (*TemporalRealReport, error) {
	opt.Fill()
	tp, err := c.temporal()
	if err != nil {
		return nil, err
	}
	rep := &TemporalRealReport{Data: c.Data, Width: p.grid.Width, Height: p.grid.Height, EPSG: p.grid.EPSG,
		Dates: len(p.dates), First: p.dates[0].Format(time.DateOnly), Last: p.dates[len(p.dates)-1].Format(time.DateOnly),
		Cloudy: float64(p.cloudy) / float64(len(p.dates)*len(p.labels)), Raster: p.check(), Forest: c.Forest}
	rep.Forest.Seed = 0
	for j, s := range c.Seasons {
		sd := SeasonDates{Season: s.Name}
		for _, t := range p.dates {
			if tp.SeasonMask(t)>>j&1 != 0 {
				sd.Dates++
			}
		}
		rep.SeasonDates = append(rep.SeasonDates, sd)
	}

	// The labelled pixels: a class and a polygon. Classes are indexed in
	// code order.
	var rows []int
	var codes []uint8
	for i, c := range p.labels {
		if c != 0 && p.groups[i] != 0 {
			rows = append(rows, i)
			if !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
	}
	slices.Sort(codes)
	if len(codes) < 2 {
		return nil, fmt.Errorf("temporal-real: %d labelled pixels of %d classes; the comparison needs two classes at least", len(rows), len(codes))
	}
	y := make([]uint8, len(rows))
	groups := make([]uint32, len(rows))
	polys := make([]map[uint32]bool, len(codes))
	for k, i := range rows {
		y[k] = uint8(slices.Index(codes, p.labels[i]))
		groups[k] = p.groups[i]
		if polys[y[k]] == nil {
			polys[y[k]] = map[uint32]bool{}
		}
		polys[y[k]][groups[k]] = true
	}
	for ci, code := range codes {
		n := 0
		for _, v := range y {
			if int(v) == ci {
				n++
			}
		}
		rep.Classes = append(rep.Classes, ClassCount{Code: code, Name: p.names[int(code)], Pixels: n, Polygons: len(polys[ci])})
	}
	fold0 := groupFolds(groups, c.Folds, c.Seeds[0])
	rep.Polygons = len(fold0)
	if rep.Polygons < c.Folds {
		return nil, fmt.Errorf("temporal-real: %d polygons for %d folds", rep.Polygons, c.Folds)
	}

	x, names, err := temporalFeatures(p, tp, rows)
	if err != nil {
		return nil, err
	}
	valid := make([]float64, len(rows))
	for k := range rows {
		valid[k] = float64(x[k*len(names)+len(names)-1])
	}
	rep.ValidDates = spreadOf(valid)
	// The feature sets, as columns of x.
	np, ns := len(c.Percentiles), len(c.Seasons)
	span := func(lo, hi int) []int {
		var s []int
		for i := lo; i < hi; i++ {
			s = append(s, i)
		}
		return s
	}
	sets := []struct {
		name string
		cols []int
	}{
		{"median", []int{0}},
		{"percentiles", span(1, 1+np)},
		{"seasons", span(1+np, 1+np+ns)},
		{"percentiles+seasons", span(1, 1+np+ns)},
		{"percentiles+seasons+count", span(1, 2+np+ns)},
	}
	for _, s := range sets {
		if len(s.cols) == 0 {
			continue // no percentiles or no seasons configured
		}
		set := TemporalSet{Name: s.name}
		for _, col := range s.cols {
			set.Features = append(set.Features, names[col])
		}
		rep.Sets = append(rep.Sets, set)
	}

	if python != "" {
		if err := os.MkdirAll(npyDir, 0o755); err != nil {
			return nil, err
		}
		defer os.RemoveAll(npyDir)
	}
	for _, seed := range c.Seeds {
		fold := pixelFolds(groups, c.Folds, seed)
		rep.Folds = append(rep.Folds, describeFolds(fold, groups, y, c.Folds, len(codes), seed))
		params := c.Forest
		params.Seed = seed
		for _, s := range sets {
			if len(s.cols) == 0 {
				continue
			}
			set := &rep.Sets[slices.IndexFunc(rep.Sets, func(t TemporalSet) bool { return t.Name == s.name })]
			xs := columns(x, len(names), s.cols)
			if seed == c.Seeds[0] {
				for _, v := range xs {
					if v != v {
						set.NaNs++
					}
				}
			}
			for _, e := range c.Engines {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run, err := crossValidate(ctx, e, folds{x: xs, nf: len(s.cols), y: y, fold: fold, k: c.Folds, codes: codes}, params, sklearn.Runner{Python: python, Jobs: c.Jobs, Dir: npyDir}, &rep.Sklearn)
				if err != nil {
					return nil, fmt.Errorf("temporal-real: %s, %s, seed %d: %w", s.name, e, seed, err)
				}
				run.Seed = seed
				set.Runs = append(set.Runs, run)
				opt.Log.Info("temporal-real: cross-validated", "set", s.name, "engine", e, "seed", seed,
					"accuracy", run.Metrics.Accuracy, "kappa", run.Metrics.Kappa, "macro_f1", run.Metrics.MacroF1)
			}
		}
	}
	for i := range rep.Sets {
		rep.Sets[i].Summary = summarise(rep.Sets[i].Runs, c.Engines, len(codes))
	}
	return rep, nil
}

// describeFolds counts, per fold of a seed's split (fold: each pixel's),
// its polygons, its pixels and its pixels per class.
func describeFolds(fold []int, groups []uint32, y []uint8, k, classes int, seed uint64) FoldSplit {
	split := FoldSplit{Seed: seed, Folds: make([]FoldInfo, k)}
	seen := map[uint32]bool{}
	for i, f := range fold {
		fi := &split.Folds[f]
		if fi.PerClass == nil {
			fi.PerClass = make([]int, classes)
		}
		if !seen[groups[i]] {
			seen[groups[i]] = true
			fi.Polygons++
		}
		fi.Pixels++
		fi.PerClass[y[i]]++
	}
	return split
}

// columns copies the columns cols of a row-major matrix of nf columns.
func columns(x []float32, nf int, cols []int) []float32 {
	n := len(x) / nf
	out := make([]float32, 0, n*len(cols))
	for i := range n {
		for _, c := range cols {
			out = append(out, x[i*nf+c])
		}
	}
	return out
}

// folds is the pixels of a cross-validation: rows of nf features with
// their class indices y and fold ids (fold, 0 to k − 1), and the codes of
// the scheme's classes.
type folds struct {
	x     []float32
	nf    int
	y     []uint8
	fold  []int
	k     int
	codes []uint8
}

// crossValidate fits the engine on every fold's complement and predicts
// the fold, then scores all predictions together.
func crossValidate(ctx context.Context, engine string, d folds, p forest.Params, sk sklearn.Runner, skVersion *string) (TemporalRun, error) {
	x, nf, y, fold, k, codes := d.x, d.nf, d.y, d.fold, d.k, d.codes
	pred := make([]uint8, len(y))
	run := TemporalRun{Engine: engine}
	for f := range k {
		var tr, te []int
		for i, g := range fold {
			if g == f {
				te = append(te, i)
			} else {
				tr = append(tr, i)
			}
		}
		if len(te) == 0 || len(tr) < 2 {
			return run, fmt.Errorf("fold %d: %d training and %d test pixels", f, len(tr), len(te))
		}
		xtr, ytr := gather(x, y, nf, tr)
		xte, yte := gather(x, y, nf, te)
		var out []uint8
		var err error
		switch engine {
		case "lulc":
			out, err = lulcFold(xtr, ytr, xte, nf, len(codes), p)
		case "sklearn":
			out, err = sklearnFold(ctx, sk, labelled{xtr, ytr}, labelled{xte, yte}, nf, p, skVersion)
		}
		if err != nil {
			return run, fmt.Errorf("fold %d: %w", f, err)
		}
		ok := 0
		for j, i := range te {
			pred[i] = out[j]
			if out[j] == yte[j] {
				ok++
			}
		}
		run.FoldAccuracy = append(run.FoldAccuracy, float64(ok)/float64(len(te)))
	}
	m, err := forest.Evaluate(y, pred, codes)
	if err != nil {
		return run, err
	}
	run.Metrics = m
	return run, nil
}

// lulcFold bins the training rows' quantiles, fits lulc's forest on all
// cores and classifies the test rows, as lulc train does.
func lulcFold(xtr []float32, ytr []uint8, xte []float32, nf, classes int, p forest.Params) ([]uint8, error) {
	bins, err := forest.QuantileBins(xtr, nf, p.Bins, 200_000, p.Seed)
	if err != nil {
		return nil, err
	}
	bt, err := bins.Bin(xtr, nf)
	if err != nil {
		return nil, err
	}
	f, err := forest.Train(context.Background(), bt, ytr, classes, p, 0)
	if err != nil {
		return nil, err
	}
	bv, err := bins.Bin(xte, nf)
	if err != nil {
		return nil, err
	}
	pred, _, err := f.Compile().Classify(bv)
	return pred, err
}

// sklearnFold fits scikit-learn on the same rows. scikit-learn 1.2's
// forest refuses NaN, which lulc's bins treat as below every value: a
// NaN becomes a value below the column's least, which splits the same.
func sklearnFold(ctx context.Context, sk sklearn.Runner, train, test labelled, nf int, p forest.Params, version *string) ([]uint8, error) {
	xtr, xte := slices.Clone(train.x), slices.Clone(test.x)
	ytr, yte := train.y, test.y
	for c := range nf {
		lo := float32(math.Inf(1))
		for _, x := range [][]float32{xtr, xte} {
			for i := c; i < len(x); i += nf {
				if x[i] == x[i] {
					lo = min(lo, x[i])
				}
			}
		}
		below := lo - 1
		if math.IsInf(float64(lo), 1) {
			below = 0 // all NaN: a constant column
		}
		for _, x := range [][]float32{xtr, xte} {
			for i := c; i < len(x); i += nf {
				if x[i] != x[i] {
					x[i] = below
				}
			}
		}
	}
	vx, vy := filepath.Join(sk.Dir, "val_x.npy"), filepath.Join(sk.Dir, "val_y.npy")
	if err := sklearn.WriteNpy(vx, xte, []int{len(yte), nf}); err != nil {
		return nil, err
	}
	if err := sklearn.WriteNpy(vy, yte, []int{len(yte)}); err != nil {
		return nil, err
	}
	res, pred, err := sk.FitPredict(ctx, p, sklearn.Data{X: xtr, Y: ytr, Features: nf, ValX: vx, ValY: vy}, len(yte))
	if err != nil {
		return nil, err
	}
	*version = res.Version
	return pred, nil
}

// labelled is rows of features with their class indices.
type labelled struct {
	x []float32
	y []uint8
}

// summarise gives each engine's spread of metrics over its runs.
func summarise(runs []TemporalRun, engines []string, classes int) []TemporalSummary {
	var out []TemporalSummary
	for _, e := range engines {
		var oa, kappa, mf1 []float64
		f1 := make([][]float64, classes)
		for _, r := range runs {
			if r.Engine != e {
				continue
			}
			oa, kappa, mf1 = append(oa, r.Metrics.Accuracy), append(kappa, r.Metrics.Kappa), append(mf1, r.Metrics.MacroF1)
			for c := range classes {
				f1[c] = append(f1[c], r.Metrics.F1[c])
			}
		}
		if len(oa) == 0 {
			continue
		}
		s := TemporalSummary{Engine: e, Accuracy: spreadOf(oa), Kappa: spreadOf(kappa), MacroF1: spreadOf(mf1)}
		for c := range classes {
			s.F1 = append(s.F1, spreadOf(f1[c]))
		}
		out = append(out, s)
	}
	return out
}

// TemporalRealMarkdown renders the report: the data, the classes and
// folds, then the metrics per feature set and engine over the seeds, and
// each set's paired differences from the sets before it.
func TemporalRealMarkdown(r *TemporalRealReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Temporal NDVI features on real data\n\n")
	fmt.Fprintf(&b, "Data: `%s`, %d×%d px (EPSG:%d), %d dates %s … %s; %.1f %% of the observations cloudy; %.1f valid dates per labelled pixel (%.0f–%.0f). Dates per season: %s.\n\n",
		r.Data, r.Width, r.Height, r.EPSG, r.Dates, r.First, r.Last, 100*r.Cloudy, r.ValidDates.Mean, r.ValidDates.Min, r.ValidDates.Max, seasonText(r.SeasonDates))
	fmt.Fprintf(&b, "Rasterisation (lulc, centre rule) against the reference raster: %d of %d pixels differ; %d labelled.\n\n", r.Raster.Differ, r.Raster.Pixels, r.Raster.Labelled)
	fmt.Fprintf(&b, "| code | class | pixels | polygons |\n|---:|---|---:|---:|\n")
	for _, c := range r.Classes {
		fmt.Fprintf(&b, "| %d | %s | %d | %d |\n", c.Code, c.Name, c.Pixels, c.Polygons)
	}
	fmt.Fprintf(&b, "\nLeave-polygon-out: %d polygons dealt into %d folds by a seeded hash per seed. Pixels per fold:\n\n", r.Polygons, len(r.Folds[0].Folds))
	for _, s := range r.Folds {
		var parts []string
		for _, f := range s.Folds {
			parts = append(parts, fmt.Sprintf("%d (%d polygons)", f.Pixels, f.Polygons))
		}
		fmt.Fprintf(&b, "- seed %d: %s\n", s.Seed, strings.Join(parts, ", "))
	}
	p := r.Forest
	fmt.Fprintf(&b, "\nForest: %d trees, max_depth %d, max_features %s, min_samples_leaf %d, bootstrap %v, %d bins (lulc); seeds %s. Metrics pool every pixel's prediction by the fold that held out its polygon; mean ± sample SD over the seeds (range).\n\n",
		p.Trees, p.MaxDepth, mtryName(p), p.MinSamplesLeaf, p.Bootstrap, p.Bins, seedText(r.Folds))
	fmt.Fprintf(&b, "| features | n | engine | OA | kappa | macro-F1 |")
	for _, c := range r.Classes {
		fmt.Fprintf(&b, " F1 %s |", c.Name)
	}
	fmt.Fprintf(&b, "\n|---|---:|---|---:|---:|---:|%s\n", strings.Repeat("---:|", len(r.Classes)))
	for _, s := range r.Sets {
		for _, sum := range s.Summary {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |", s.Name, len(s.Features), sum.Engine, spreadText(sum.Accuracy), spreadText(sum.Kappa), spreadText(sum.MacroF1))
			for _, f := range sum.F1 {
				fmt.Fprintf(&b, " %.3f ± %.3f |", f.Mean, f.SD)
			}
			b.WriteString("\n")
		}
	}
	// Paired: the same folds and forest seed, so the differences are the
	// features' alone.
	fmt.Fprintf(&b, "\nPaired differences, set minus baseline, per seed; folds better: the folds (same polygons) where the set's accuracy is higher, of all:\n\n")
	fmt.Fprintf(&b, "| features | baseline | engine | ΔOA per seed | Δkappa per seed | Δmacro-F1 per seed | folds better |\n|---|---|---|---|---|---|---:|\n")
	for i, s := range r.Sets {
		for _, base := range r.Sets[:i] {
			for _, e := range engineNames(s.Runs) {
				var doa, dk, df1 []string
				better, all := 0, 0
				for _, run := range s.Runs {
					if run.Engine != e {
						continue
					}
					j := slices.IndexFunc(base.Runs, func(o TemporalRun) bool { return o.Engine == e && o.Seed == run.Seed })
					if j < 0 {
						continue
					}
					o := base.Runs[j]
					doa = append(doa, fmt.Sprintf("%+.3f", run.Metrics.Accuracy-o.Metrics.Accuracy))
					dk = append(dk, fmt.Sprintf("%+.3f", run.Metrics.Kappa-o.Metrics.Kappa))
					df1 = append(df1, fmt.Sprintf("%+.3f", run.Metrics.MacroF1-o.Metrics.MacroF1))
					for f := range run.FoldAccuracy {
						all++
						if run.FoldAccuracy[f] > o.FoldAccuracy[f] {
							better++
						}
					}
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d/%d |\n", s.Name, base.Name, e, strings.Join(doa, ", "), strings.Join(dk, ", "), strings.Join(df1, ", "), better, all)
			}
		}
	}
	fmt.Fprintf(&b, "\nFeatures: ")
	for i, s := range r.Sets {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", s.Name, strings.Join(s.Features, ", "))
	}
	fmt.Fprintf(&b, ".\n")
	if r.Sklearn != "" {
		fmt.Fprintf(&b, "\nscikit-learn %s, same rows and folds, RandomForestClassifier with the same parameters on the raw values.\n", r.Sklearn)
	}
	if r.Command != "" {
		fmt.Fprintf(&b, "\nReproduce: `%s` (%.0f s on %s, %d CPUs).\n", r.Command, r.Seconds, r.Host.CPU, r.Host.Cores)
	}
	return b.String()
}

func spreadText(s Spread) string {
	return fmt.Sprintf("%.3f ± %.3f (%.3f–%.3f)", s.Mean, s.SD, s.Min, s.Max)
}

func seasonText(seasons []SeasonDates) string {
	var parts []string
	for _, s := range seasons {
		parts = append(parts, fmt.Sprintf("%s %d", s.Season, s.Dates))
	}
	return strings.Join(parts, ", ")
}

func seedText(f []FoldSplit) string {
	var s []string
	for _, x := range f {
		s = append(s, fmt.Sprint(x.Seed))
	}
	return strings.Join(s, ", ")
}

func engineNames(runs []TemporalRun) []string {
	var out []string
	for _, r := range runs {
		if !slices.Contains(out, r.Engine) {
			out = append(out, r.Engine)
		}
	}
	return out
}

func mtryName(p forest.Params) string {
	if p.MaxFeatures == 0 {
		return "sqrt of the set's features"
	}
	return fmt.Sprint(p.MaxFeatures)
}
