package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// rasterTile is one source.rasters pair, opened and checked.
type rasterTile struct {
	pair     config.RasterPair
	index    int // in source.rasters
	grid     geo.Grid
	bands    []int // 1-based image band of each stack band
	nodata   *float64
	sample   int // bytes per stored image sample
	labelsND *float64
	vector   bool          // the labels are a vector layer, burned onto grid
	vec      *vectorLabels // that layer, once read (locate)
	// offset is the image's offset, source.offset's or decided for auto
	// (decideOffset), with the decision's record.
	offset     float64
	offsetNote *stage.ManifestOffset
	layers     *tileLayers // once composited
}

// bytesPerSample are the stored sizes of the image types lulc reads.
var bytesPerSample = map[string]int{"Byte": 1, "Int8": 1, "UInt16": 2, "Int16": 2, "UInt32": 4, "Int32": 4, "Float32": 4, "Float64": 8}

// decideOffset sets the pair's offset: source.offset's number, or for
// auto the baseline-04 correction (−0.1) when the image's dark levels,
// read as declared with no offset, show the +1000 DN offset left in
// (radiometry.LooksOffset), else 0. The decision and its evidence go
// into the manifest.
func (t *rasterTile) decideOffset(cfg config.IngestConfig, log *slog.Logger) error {
	o := cfg.Source.Offset
	if !o.Auto {
		t.offset = o.Value
		return nil
	}
	dark, err := t.darkLevels(cfg)
	if err != nil {
		return fmt.Errorf("source.rasters[%d].image: offset auto: %w", t.index, err)
	}
	note := &stage.ManifestOffset{Setting: "auto", DarkWithout: radiometry.ByName(cfg.Bands, dark)}
	if radiometry.LooksOffset(dark) {
		t.offset = baseline04Offset
		note.Reason = fmt.Sprintf("every band's darkest 1 %% of pixels is above %.2f reflectance with no offset: the +1000 DN offset of processing baseline 04.00 is left in, and is removed", radiometry.OffsetLeftIn)
	} else {
		note.Reason = "some band's darkest 1 % of pixels is at or below 0.08 reflectance with no offset: no offset to remove"
	}
	note.Applied = t.offset
	t.offsetNote = note
	log.Info(fmt.Sprintf("tile %s: offset auto: %g (%s)", t.Name(), t.offset, note.Reason), "tile", t.Name())
	return nil
}

// baseline04Offset removes Sentinel-2's +1000 DN offset (processing
// baseline 04.00 and later) from reflectance × 10000.
const baseline04Offset = -0.1

// darkLevels are the dark levels of the image's stack bands, read as
// declared with no offset, on every radiometry.Stride-th row and column.
func (t *rasterTile) darkLevels(cfg config.IngestConfig) ([]float64, error) {
	img, err := raster.Open(t.pair.Image)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	w := t.grid.Width
	hist := radiometry.NewHistogram(len(t.bands), stage.StackScale, stage.StackOffset)
	row := make([]float32, w)
	dn := make([][]uint16, len(t.bands))
	for y := 0; y < t.grid.Height; y += radiometry.Stride {
		for bi, band := range t.bands {
			if err := raster.ReadBandWindowInto(img, band, 0, y, w, 1, row); err != nil {
				return nil, err
			}
			rasterReflectance(row, t.nodata, float32(cfg.Source.Scale), 0)
			if dn[bi] == nil {
				dn[bi] = make([]uint16, w)
			}
			composite.Quantise(dn[bi], row, stage.StackScale, stage.StackOffset)
		}
		if err := hist.Write(0, y, w, 1, dn, nil, nil); err != nil {
			return nil, err
		}
	}
	return hist.Dark(), nil
}

// checkRasterPair opens a pair and checks it against the config: the
// image's band count and type, its grid, and the labels' grid and type.
func checkRasterPair(cfg config.IngestConfig, i int, p config.RasterPair) (rasterTile, error) {
	key := fmt.Sprintf("source.rasters[%d]", i)
	t := rasterTile{pair: p, index: i}
	img, err := raster.Open(p.Image)
	if err != nil {
		return t, fmt.Errorf("%s.image: %w", key, err)
	}
	t.grid = img.Grid
	t.nodata = img.NoData
	img.Close()
	info, err := raster.Inspect(raster.GDALPath(p.Image))
	if err != nil {
		return t, fmt.Errorf("%s.image: %w", key, err)
	}
	if info.Bands != len(cfg.Source.Bands) {
		return t, fmt.Errorf("%s.image %s has %d bands but source.bands names %d [%s]",
			key, p.Image, info.Bands, len(cfg.Source.Bands), strings.Join(cfg.Source.Bands, ", "))
	}
	if t.sample = bytesPerSample[info.DataType]; t.sample == 0 {
		return t, fmt.Errorf("%s.image %s: data type %s is not an integer or real type lulc reads", key, p.Image, info.DataType)
	}
	if cfg.Source.NoData != nil {
		t.nodata = cfg.Source.NoData
	}
	g := t.grid
	if g.Transform[5] >= 0 {
		return t, fmt.Errorf("%s.image %s: the grid is not north-up (pixel height %g)", key, p.Image, g.Transform[5])
	}
	if r := cfg.Grid.Resolution; r != 0 && (!near(g.Transform[1], r, 1e-9*r) || !near(-g.Transform[5], r, 1e-9*r)) {
		return t, fmt.Errorf("%s.image %s has %g×%g-unit pixels, but grid.resolution is %g: raster sources are stacked on their own grid (set grid.resolution to their pixel size, or leave it out)",
			key, p.Image, g.Transform[1], -g.Transform[5], r)
	}
	for _, b := range cfg.Bands {
		t.bands = append(t.bands, slices.Index(cfg.Source.Bands, b)+1)
	}

	if raster.IsVector(p.Labels) {
		if cfg.Source.LabelField == "" {
			return t, fmt.Errorf("%s.labels %s is a vector layer: set source.label_field to the attribute holding its class codes", key, p.Labels)
		}
		t.vector = true
		return t, nil
	}
	if cfg.Source.LabelWeightField != "" {
		return t, fmt.Errorf("%s.labels %s is a raster: source.label_weight_field weights the features of vector labels only", key, p.Labels)
	}
	lab, err := raster.Open(p.Labels)
	if err != nil {
		return t, fmt.Errorf("%s.labels: %w", key, err)
	}
	lg := lab.Grid
	t.labelsND = lab.NoData
	lab.Close()
	if !sameGrid(g, lg) {
		return t, fmt.Errorf("%s.labels %s is on another grid (%s) than its image (%s): labels must share the image's grid",
			key, p.Labels, describeGrid(lg), describeGrid(g))
	}
	linfo, err := raster.Inspect(raster.GDALPath(p.Labels))
	if err != nil {
		return t, fmt.Errorf("%s.labels: %w", key, err)
	}
	if linfo.DataType != "Byte" {
		return t, fmt.Errorf("%s.labels %s: data type %s, want Byte class codes (0: no label)", key, p.Labels, linfo.DataType)
	}
	return t, nil
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// sameGrid reports whether two grids have the same CRS, size, pixel size
// and origin (to a thousandth of a pixel).
func sameGrid(a, b geo.Grid) bool {
	px := math.Abs(a.Transform[1])
	return a.EPSG == b.EPSG && a.Width == b.Width && a.Height == b.Height &&
		near(a.Transform[1], b.Transform[1], 1e-9*px) && near(a.Transform[5], b.Transform[5], 1e-9*px) &&
		near(a.Transform[0], b.Transform[0], 1e-3*px) && near(a.Transform[3], b.Transform[3], 1e-3*px) &&
		a.Transform[2] == b.Transform[2] && a.Transform[4] == b.Transform[4]
}

func describeGrid(g geo.Grid) string {
	return fmt.Sprintf("EPSG:%d, %d×%d px of %g×%g from (%.3f, %.3f)", g.EPSG, g.Width, g.Height, g.Transform[1], -g.Transform[5], g.Transform[0], g.Transform[3])
}

// Name is the pair's tile name.
func (t *rasterTile) Name() string { return t.pair.TileName() }

// Plan returns the image's grid (checkRasterPair already opened it).
func (t *rasterTile) Plan(config.IngestConfig) (geo.Grid, error) { return t.grid, nil }

// LabelScheme is the scheme the text classes of vector labels name; none
// for numeric codes, which are the user's own.
func (t *rasterTile) LabelScheme(config.IngestConfig) *landcover.Scheme { return t.vec.labelScheme() }

// Dates is always one: the image is the composite.
func (t *rasterTile) Dates() int { return 1 }

// Composite converts every window of the pair on opt.Workers workers and
// hands each to the sinks.
func (t *rasterTile) Composite(ctx context.Context, cfg config.IngestConfig, opt stage.Options, sinks ...TileSink) (tileStats, error) {
	windows := tileWindows(t.grid, t.grid, cfg.Window)
	opt.Log.Info("ingesting raster pair", "tile", t.Name(), "image", t.pair.Image, "grid", fmt.Sprintf("%d×%d EPSG:%d", t.grid.Width, t.grid.Height, t.grid.EPSG), "windows", len(windows))
	job := &rasterJob{cfg: cfg, tile: *t, grid: t.grid, sinks: sinks}
	if t.vector {
		// Vector labels are burned onto the image's grid once, for every
		// window to copy from.
		var err error
		if job.labels, err = burnVectorLabels(cfg, t.vec, t.grid, sinks); err != nil {
			return tileStats{}, err // the callers name the tile
		}
	}
	var err error
	if t.layers, err = makeLayers(ctx, cfg, opt.Log, t.Name(), t.grid, layerInputs{image: t.pair.Image}); err != nil {
		return tileStats{}, err
	}
	defer t.layers.release()
	bar := opt.NewBar(int64(len(windows)), "ingest "+t.Name()+" windows")
	err = eachWindow(ctx, windows, opt.Workers, func() (func(geo.Grid) error, func(), error) {
		img, err := raster.Open(t.pair.Image)
		if err != nil {
			return nil, nil, err
		}
		if t.vector {
			return func(win geo.Grid) error { return job.window(win, img, nil) }, func() { img.Close() }, nil
		}
		lab, err := raster.Open(t.pair.Labels)
		if err != nil {
			img.Close()
			return nil, nil, err
		}
		do := func(win geo.Grid) error { return job.window(win, img, lab) }
		return do, func() { img.Close(); lab.Close() }, nil
	}, func() { bar.Add(1) })
	bar.Finish()
	if err == nil {
		err = t.layers.writeTo(sinks, len(cfg.StackPlanes())-len(cfg.Layers))
	}
	pixels := t.grid.Width * t.grid.Height
	return tileStats{
		Timings: StageTimes{Read: time.Duration(job.readNs.Load()), Composite: time.Duration(job.convertNs.Load()),
			Write: time.Duration(job.writeNs.Load()), Workers: min(opt.Workers, len(windows)), Layers: t.layers.took()},
		decoded: job.decoded.Load(), Pixels: pixels, NoValid: float64(job.empty.Load()) / float64(pixels),
	}, err
}

// Manifest describes the pair's stack: the image re-encoded, no mask
// beyond its nodata, no resampling.
func (t *rasterTile) Manifest(ctx context.Context, cfg config.IngestConfig, opt stage.Options, noValid float64) (stage.Manifest, error) {
	name, grid, src := t.Name(), t.grid, cfg.Source
	m := stage.Manifest{
		Version: opt.Version, ConfigHash: cfg.Hash(), Tile: name,
		Grid:  stage.ManifestGrid{EPSG: grid.EPSG, Transform: grid.Transform, Width: grid.Width, Height: grid.Height},
		Bands: cfg.StackPlanes(), DataType: "uint16", Scale: stage.StackScale, Offset: stage.StackOffset, NoData: 0,
		Composite:       "none: one analysis-ready image, its reflectance re-encoded",
		Mask:            stage.ManifestMask{DropSCL: []int{}, NoData: "any band at the image's nodata (no SCL, so no cloud mask)"},
		Resampling:      "none (the image's own grid)",
		LabelResampling: "none (the image's grid)",
		NoValidFraction: noValid,
	}
	item := stage.ManifestItem{ID: name, Assets: map[string]stage.ManifestAsset{}}
	if t.pair.Datetime != "" {
		dt, _ := config.ParseDatetime(t.pair.Datetime)
		item.Datetime = dt.Format(time.RFC3339Nano)
	}
	img, err := DescribeRasterFile(ctx, opt, t.pair.Image)
	if err != nil {
		return m, err
	}
	for bi, b := range cfg.Bands {
		a := img
		a.Band, a.Scale, a.Offset = t.bands[bi], src.Scale, t.offset
		item.Assets[b] = a
	}
	m.Sources = []stage.ManifestItem{item}
	m.RadiometryOffset = t.offsetNote
	m.Layers = t.layers.manifest()
	lab, err := DescribeRasterFile(ctx, opt, t.pair.Labels)
	if err != nil {
		return m, err
	}
	m.Labels = []stage.ManifestItem{{ID: name, Assets: map[string]stage.ManifestAsset{"labels": lab}}}
	if t.vector {
		describeVectorLabels(&m, cfg, t.vec)
	}
	return m, nil
}

// DescribeRasterFile records an input file's identity (a raster, or a
// vector layer of labels) as ingest writes it into the manifest: href and
// size, and for a local file its SHA-256 (for a remote one, the ETag of a
// HEAD request with opt.HTTP, also through GDAL's /vsicurl/ prefix).
func DescribeRasterFile(ctx context.Context, opt stage.Options, href string) (stage.ManifestAsset, error) {
	opt.Fill() // callers outside the stages may leave opt.HTTP unset
	a := stage.DescribeAsset(ctx, opt.HTTP, catalog.Asset{Href: href}, 0, 0)
	if u, ok := strings.CutPrefix(href, "/vsicurl/"); ok {
		// The URL behind the prefix answers the HEAD; the href stays as
		// the config gives it.
		remote := stage.DescribeAsset(ctx, opt.HTTP, catalog.Asset{Href: u}, 0, 0)
		a.Size, a.ETag = remote.Size, remote.ETag
	}
	if strings.Contains(href, "://") || strings.HasPrefix(href, "/vsi") {
		return a, nil
	}
	sum, _, err := stage.FileSHA256(href)
	if err != nil {
		return a, err
	}
	a.SHA256 = sum
	return a, nil
}

// rasterJob is the per-window work of one raster pair, shared by its
// workers.
type rasterJob struct {
	cfg   config.IngestConfig
	tile  rasterTile
	grid  geo.Grid
	sinks []TileSink

	// labels are vector labels burned onto the grid (nil: read from the
	// label raster).
	labels []uint8

	decoded, empty             atomic.Int64 // image bytes read; pixels with no valid observation
	readNs, convertNs, writeNs atomic.Int64 // summed over workers
}

// window reads the stack bands and labels over win, converts the image's
// values to reflectance and re-encodes them as the STAC path does (one
// date: the median is the value itself), and writes the stack, count and
// labels windows.
func (j *rasterJob) window(win geo.Grid, img, lab *raster.Source) error {
	n := win.Width * win.Height
	x := int(math.Round((win.Transform[0] - j.grid.Transform[0]) / j.grid.Transform[1]))
	y := int(math.Round((win.Transform[3] - j.grid.Transform[3]) / j.grid.Transform[5]))
	t0 := time.Now()
	values := make([][]float32, len(j.tile.bands))
	for bi, band := range j.tile.bands {
		values[bi] = make([]float32, n)
		if err := raster.ReadBandWindowInto(img, band, x, y, win.Width, win.Height, values[bi]); err != nil {
			return err
		}
	}
	labels := make([]uint8, n)
	if lab == nil {
		for r := range win.Height {
			copy(labels[r*win.Width:(r+1)*win.Width], j.labels[(y+r)*j.grid.Width+x:])
		}
	} else if err := raster.ReadBandWindowInto(lab, 1, x, y, win.Width, win.Height, labels); err != nil {
		return err
	}
	j.decoded.Add(int64(n * j.tile.sample * len(values)))
	t1 := time.Now()
	j.readNs.Add(int64(t1.Sub(t0)))

	src := j.cfg.Source
	for bi, v := range values {
		rasterReflectance(v, j.tile.nodata, float32(src.Scale), float32(j.tile.offset))
		values[bi] = v
	}
	valid := make([]bool, n)
	if err := composite.Mask(valid, make([]uint8, n), values, nil); err != nil {
		return err
	}
	stack := make([][]uint16, len(values))
	for bi, v := range values {
		stack[bi] = make([]uint16, n)
		composite.Quantise(stack[bi], v, stage.StackScale, stage.StackOffset)
	}
	count := make([]uint8, n)
	if err := composite.Count(count, [][]bool{valid}); err != nil {
		return err
	}
	var zeros int64
	for _, c := range count {
		if c == 0 {
			zeros++
		}
	}
	j.empty.Add(zeros)
	// The output's label nodata is 0.
	if nd := j.tile.labelsND; nd != nil && *nd != 0 && *nd >= 0 && *nd <= 255 {
		for i, v := range labels {
			if float64(v) == *nd {
				labels[i] = 0
			}
		}
	}
	t2 := time.Now()
	j.convertNs.Add(int64(t2.Sub(t1)))
	for _, sink := range j.sinks {
		if err := sink.Write(x, y, win.Width, win.Height, stack, count, labels); err != nil {
			return err
		}
	}
	j.writeNs.Add(int64(time.Since(t2)))
	return nil
}

// rasterReflectance converts image values in place to reflectance by the
// rule composite.Reflectance applies to Earth Search DNs,
// float32(float32(value)×scale) + offset, with NaN at nodata (and where
// the value is already NaN).
func rasterReflectance(v []float32, nodata *float64, scale, offset float32) {
	nan := float32(math.NaN())
	for i, x := range v {
		if nodata != nil && float64(x) == *nodata {
			v[i] = nan
			continue
		}
		// The explicit conversion rounds the product, as the STAC path does.
		v[i] = float32(x*scale) + offset
	}
}
