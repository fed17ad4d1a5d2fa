package stage

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/planetlabs/go-stac"
	"github.com/planetlabs/go-stac/extensions/raster/v1"

	"github.com/lulc/lulc/device/cuda/classifier"
	"github.com/lulc/lulc/geo"
	lraster "github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/pixel/features"
)

// AOAFile is a tile's area of applicability: band 1 the dissimilarity
// index, band 2 the mask (1 inside, 0 outside), float32, NaN without data.
const AOAFile = "aoa.tif"

// DefaultAOAStep is the default grid step of the area of applicability,
// on the CPU and the GPU alike (so that their aoa.tif are the same): the
// DI of every 10th pixel's cell (100 m on a 10 m tile), 3 to 5
// core-minutes a full tile against 20,000 points of 20 to 40 features on
// the CPU (BenchmarkMapWindow), about 2 s on an H100. Every pixel (step
// 1) took the H100 64 s a full tile (docs/benchmarks.md).
const DefaultAOAStep = 10

// AOAWarnPercent is the share of a tile's pixels outside the area of
// applicability above which predict and run warn.
const AOAWarnPercent = 10.0

// AOAOptions is the aoa section of a prediction (predict config, run
// config's predict section).
type AOAOptions struct {
	// Off writes no aoa.tif even when the model has an area of
	// applicability.
	Off bool `yaml:"off"`
	// Step is the grid step in pixels: the DI is computed at the centre of
	// every Step × Step cell and aoa.tif has one pixel per cell. 0 is
	// DefaultAOAStep.
	Step int `yaml:"step"`
}

// Check refuses a step outside 0–1000.
func (o AOAOptions) Check() error {
	if o.Step < 0 || o.Step > 1000 {
		return fmt.Errorf("aoa.step: %d is not between 0 (automatic) and 1000", o.Step)
	}
	return nil
}

// GridStep is the grid step.
func (o AOAOptions) GridStep() int {
	if o.Step > 0 {
		return o.Step
	}
	return DefaultAOAStep
}

// AOASink fills a tile's DI map from the windows inference streams, its
// DI computed by the engine's diComputer.
type AOASink struct {
	Ref *aoa.Reference
	Map *aoa.Map
	di  diComputer
}

// diComputer computes the DI of a window's cells into a map: from feature
// planes on the CPU, from digital numbers on a device (which computes the
// features there again, as its predictor does). A GPU predictor with
// context features measures the cells in its own pass instead
// (gpuDNPredictor.PredictDNSink), and dn is not called.
type diComputer interface {
	features(m *aoa.Map, ref *aoa.Reference, x, y, w, h int, feats [][]float32) error
	dn(m *aoa.Map, x, y, w, h int, dn features.DN) error
}

// NewAOASink checks a tile's DI grid against the model and starts its
// map, its DI computed on e; done frees what the computer holds.
func NewAOASink(e Engine, set *features.Set, ref *aoa.Reference, grid aoa.Grid) (sink *AOASink, done func(), err error) {
	if err := grid.Check(); err != nil {
		return nil, nil, err
	}
	if ref.Features() != len(set.Features) {
		return nil, nil, fmt.Errorf("area of applicability of %d features for %d", ref.Features(), len(set.Features))
	}
	sink = &AOASink{Ref: ref, Map: aoa.NewMap(grid)}
	if sink.di, done, err = e.di(set, ref); err != nil {
		return nil, nil, err
	}
	return sink, done, nil
}

// Features implements inference.WindowSink.
func (s *AOASink) Features(x, y, w, h int, feats [][]float32) error {
	return s.di.features(s.Map, s.Ref, x, y, w, h, feats)
}

// DN implements inference.WindowSink.
func (s *AOASink) DN(x, y, w, h int, dn features.DN) error {
	return s.di.dn(s.Map, x, y, w, h, dn)
}

// cpuDI is the CPU's diComputer: the reference's index over feature
// planes.
type cpuDI struct{ idx *aoa.Index }

func (c cpuDI) features(m *aoa.Map, ref *aoa.Reference, x, y, w, h int, feats [][]float32) error {
	m.Features(c.idx, ref, x, y, w, h, feats)
	return nil
}

func (cpuDI) dn(*aoa.Map, int, int, int, int, features.DN) error {
	return errors.New("area of applicability: digital numbers reached the CPU's sink")
}

// gpuDI is a device's diComputer.
type gpuDI struct {
	a  *classifier.AOA
	fe *classifier.Features
}

func (g gpuDI) features(m *aoa.Map, _ *aoa.Reference, x, y, w, h int, feats [][]float32) error {
	cells, pixels := m.Grid.In(x, y, w, h)
	sub := make([][]float32, len(feats))
	for f, plane := range feats {
		sub[f] = make([]float32, len(pixels))
		for k, p := range pixels {
			sub[f][k] = plane[p]
		}
	}
	di := make([]float32, len(cells))
	if err := g.a.DI(sub, di); err != nil {
		return err
	}
	for k, c := range cells {
		m.DI[c] = di[k]
	}
	return nil
}

func (g gpuDI) dn(m *aoa.Map, x, y, w, h int, dn features.DN) error {
	return measureCells(m, x, y, w, h, func(px []int32, di []float32) error {
		return g.a.DIFromDN(g.fe, dn, px, di)
	})
}

// measureCells fills m's DIs of the cells of the window at (x, y), w × h,
// by measure, which takes the cells' pixels as indices into the window
// and gives their DIs.
func measureCells(m *aoa.Map, x, y, w, h int, measure func(px []int32, di []float32) error) error {
	cells, pixels := m.Grid.In(x, y, w, h)
	px := make([]int32, len(pixels))
	for k, p := range pixels {
		px[k] = int32(p)
	}
	di := make([]float32, len(cells))
	if err := measure(px, di); err != nil {
		return err
	}
	for k, c := range cells {
		m.DI[c] = di[k]
	}
	return nil
}

// close frees the device's model and features.
func (g gpuDI) close() {
	g.fe.Close()
	g.a.Close()
}

// Grid is the tile grid of aoa.tif: one pixel per cell.
func (s *AOASink) Grid(tile geo.Grid) geo.Grid {
	cw, ch := s.Map.Grid.Cells()
	g := geo.Grid{EPSG: tile.EPSG, Width: cw, Height: ch, Transform: tile.Transform}
	step := float64(s.Map.Grid.Step)
	g.Transform[1] *= step
	g.Transform[2] *= step
	g.Transform[4] *= step
	g.Transform[5] *= step
	return g
}

// OutsidePercent is the share of the tile's cells with data that lie
// outside the area of applicability (NaN when none has data).
func (s *AOASink) OutsidePercent() float64 {
	valid, outside := s.Map.Summary(s.Ref)
	if valid == 0 {
		return math.NaN()
	}
	return 100 * float64(outside) / float64(valid)
}

// Write encodes aoa.tif into dir.
func (s *AOASink) Write(dir string, tile geo.Grid, compress string, gdalCOG bool) error {
	g := s.Grid(tile)
	nan := math.NaN()
	w, err := lraster.NewWriter(filepath.Join(dir, AOAFile), g, "float32",
		[]lraster.BandInfo{{Description: "dissimilarity index"}, {Description: "inside the area of applicability (1) or outside (0)"}},
		lraster.COGOptions{BlockSize: 512, Compress: compress, NoData: &nan, OverviewResampling: "AVERAGE", GDALDriver: gdalCOG,
			Metadata: map[string]string{"LULC_AOA_THRESHOLD": fmt.Sprint(s.Ref.Threshold), "LULC_AOA_STEP": fmt.Sprint(s.Map.Grid.Step)}})
	if err != nil {
		return err
	}
	if err := w.Write(0, 0, 0, g.Width, g.Height, s.Map.DI); err != nil {
		w.Abort()
		return err
	}
	if err := w.Write(1, 0, 0, g.Width, g.Height, s.Map.Mask(s.Ref)); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// AoaAsset describes aoa.tif in a tile's item.
func AoaAsset(dir string, g geo.Grid) (*stac.Asset, error) {
	f, err := FileOf(dir, AOAFile)
	if err != nil {
		return nil, err
	}
	res := Ptr(g.Transform[1])
	return &stac.Asset{Href: "./" + AOAFile, Type: CogType, Title: "Area of applicability: dissimilarity index and mask", Roles: []string{"data", "quality"},
		Extensions: []stac.Extension{GridProjection(g), &raster.Asset{Bands: []*raster.Band{
			{NoData: "nan", DataType: "float32", SpatialResolution: res},
			{NoData: "nan", DataType: "float32", SpatialResolution: res},
		}}, f}}, nil
}
