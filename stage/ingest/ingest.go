package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/classrule"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/bufpool"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/internal/meminfo"
	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/scenes"
)

// Result summarises an ingest.
type Result struct {
	Dir          string
	Tiles        []TileResult
	DecodedBytes int64 // source pixels read, at their stored size
	Elapsed      time.Duration
	Resumed      bool
	DeviceBusy   time.Duration // summed over the GPUs: how long they ran lulc's work
}

// StageTimes splits a tile's time by stage. Read, Composite and Write are
// summed over the workers that ran windows in parallel; Encode (the COG
// encoding of the outputs) is wall time.
type StageTimes struct {
	Read, Composite, Write, Encode time.Duration
	// Labels is the part of Read spent on the label rasters (GDAL's
	// warper when they are on another grid); the rest of Read is decoding.
	// Resample is the CPU's bilinear upsampling of coarse bands, apart from
	// Composite (on the GPU path it is inside the device's composite).
	Resample, Labels time.Duration
	// Layers is the time the tile's layer planes took to make (wall,
	// before the windows); 0 without layers.
	Layers  time.Duration
	Workers int
	// RawRects counts the band rectangles that went to the composite
	// still compressed, decoded by the engine (on the device) rather than
	// by GDAL.
	RawRects int64
}

// TileResult is one tile's output.
type TileResult struct {
	Timings     StageTimes
	Tile        string
	Dir         string
	Dates       int
	Pixels      int
	NoValidFrac float64 // share of pixels with no valid observation
	Skipped     bool    // finished by an interrupted run and kept
	// Outside counts, by code, the labelled pixels whose code is not in
	// the labels' scheme (the label items' classification:classes, or
	// the built-in scheme of their collection); nil when none are, or the
	// labels have no scheme (raster pairs, source.labels).
	Outside map[uint8]int64
}

// Ingest finds the scenes the config selects and writes, per tile, an
// analysis-ready stack into opt.Out/<tile>/: stack.tif (median composite),
// labels.tif, valid_count.tif and manifest.json. With source.rasters it
// stacks the given image/label pairs instead, one tile each, in the same
// format.
func Ingest(ctx context.Context, cfg config.IngestConfig, opt stage.Options) (Result, error) {
	opt.Fill()
	start := time.Now()
	// mark logs, at debug level, a step of the ingest's timeline.
	mark := func(step, tile string) {
		opt.Log.Debug("ingest timeline", "step", step, "tile", tile, "at_s", time.Since(start).Seconds())
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append(cfg.Inputs(), opt.Inputs...)...); err != nil {
		return Result{}, err
	}
	tiles, err := Locate(ctx, cfg, opt)
	if err != nil {
		return Result{}, err
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "ingest "+cfg.Hash())
	if err != nil {
		return Result{}, err
	}
	defer staging.Release()
	mark("located", "")
	res := Result{Dir: staging.Final, Resumed: staging.Resumed}
	busy := opt.Engine().Busy()
	mark("engine ready", "")
	for _, t := range tiles {
		tr, decoded, err := ingestOne(ctx, cfg, opt, staging, t, mark)
		res.DecodedBytes += decoded
		if err != nil {
			return res, fmt.Errorf("tile %s: %w", t.Name(), err)
		}
		res.Tiles = append(res.Tiles, tr)
	}
	if err := writeStackCatalog(staging, cfg, res.Tiles, opt.BaseURL); err != nil {
		return res, err
	}
	if err := stage.WriteResolvedConfig(staging.Path(config.IngestConfigFile), cfg.Redacted()); err != nil {
		return res, err
	}
	if err := staging.Commit(); err != nil {
		return res, err
	}
	mark("committed", "")
	res.Elapsed = time.Since(start)
	res.DeviceBusy = opt.Engine().Busy() - busy
	return res, nil
}

// writeStackCatalog writes an item beside each tile's stack and the
// output's collection linking them. Both are made from the manifests, so
// that a resumed ingest writes them again to the same bytes.
func writeStackCatalog(staging *atomicfs.Stage, cfg config.IngestConfig, tiles []TileResult, base string) error {
	col := stage.OwnCollection(stage.CollectionID("lulc-stack-", "ingest "+cfg.Hash()))
	col.Base = base
	names := make([]string, len(tiles))
	for i, t := range tiles {
		names[i] = t.Tile
		out, err := stage.NewTileOut(staging, t.Tile, col)
		if err != nil {
			return err
		}
		if err := stage.WriteStackItem(out); err != nil {
			return fmt.Errorf("tile %s: %w", t.Tile, err)
		}
	}
	desc := fmt.Sprintf("Analysis-ready Sentinel-2 stacks of %d tile(s) by lulc ingest: per-pixel median composites, reference labels and valid-observation counts.", len(names))
	return stage.WriteCollection(staging.Dir, col.ID, "lulc analysis-ready stacks", desc, stage.OutputItems(staging.Dir, names), base)
}

// Locate configures GDAL for the sources and finds the tiles to ingest,
// in order: the raster pairs, each checked, or the STAC items grouped by
// tile with the label items over the area (none with source.labels, whose
// layer is checked instead).
func Locate(ctx context.Context, cfg config.IngestConfig, opt stage.Options) ([]SourceTile, error) {
	if err := ConfigureGDAL(cfg); err != nil {
		return nil, err
	}
	var tiles []SourceTile
	if len(cfg.Source.Rasters) > 0 {
		// Every pair is checked before anything is written, so that a bad
		// input fails at once and leaves no output.
		var vecs []*rasterTile
		var hrefs, keys []string
		for i, p := range cfg.Source.Rasters {
			t, err := checkRasterPair(cfg, i, p)
			if err != nil {
				return nil, err
			}
			if err := t.decideOffset(cfg, opt.Log); err != nil {
				return nil, err
			}
			if p.Datetime == "" {
				opt.Log.Warn(fmt.Sprintf("source.rasters[%d].datetime: not given: tile %s's STAC item carries 1970-01-01T00:00:00Z, as STAC needs a time; set the acquisition time for a date readers can trust", i, t.Name()))
			}
			if t.vector {
				vecs, hrefs, keys = append(vecs, &t), append(hrefs, p.Labels), append(keys, fmt.Sprintf("source.rasters[%d].labels", i))
			}
			tiles = append(tiles, &t)
		}
		// The pairs' vector layers are read together, so that a text class
		// gets one code in all of them.
		labels, err := resolveVectorLabels(cfg, hrefs, keys, opt.Log)
		if err != nil {
			return nil, err
		}
		for i, t := range vecs {
			t.vec = labels[i]
		}
		opt.Log.Info("analysis-ready rasters", "pairs", len(tiles))
		if skip := cfg.SkippedLayers(); len(skip) > 0 {
			opt.Log.Info(fmt.Sprintf("source.bands: %s left out of the stack: not Sentinel-2 reflectance bands (the config's layers section stacks them as features: layers: [%s])", strings.Join(skip, ", "), strings.Join(skip, ", ")), "layers", len(skip))
		}
		return tiles, nil
	}
	vec, err := CheckVectorLabels(cfg, opt.Log)
	if err != nil {
		return nil, err
	}
	area, intersects, err := cfg.SearchArea()
	if err != nil {
		return nil, err
	}
	search := scenes.NewSearcher(cfg, opt)
	items, labelItems, err := search.Items(ctx, area, intersects)
	if err != nil {
		return nil, err
	}
	if err := scenes.SignItems(ctx, cfg, opt, items, labelItems); err != nil {
		return nil, err
	}
	layerItems, err := search.Layers(ctx, area, intersects)
	if err != nil {
		return nil, err
	}
	groups, err := scenes.GroupByTile(items)
	if err != nil {
		return nil, err
	}
	opt.Log.Info("scenes found", "items", len(items), "tiles", len(groups), "label_items", len(labelItems))
	if w := scenes.AreaCoverageWarning(cfg, area, groups); w != "" {
		opt.Log.Warn(w)
	}
	for _, g := range groups {
		if len(g.Items) > scenes.MaxDates {
			return nil, fmt.Errorf("tile %s: %d dates (%s to %s), more than the %d a composite takes (its valid count is a byte on both engines): narrow dates or lower max_cloud_cover",
				g.Tile, len(g.Items), g.Items[0].Datetime.Format(time.DateOnly), g.Items[len(g.Items)-1].Datetime.Format(time.DateOnly), scenes.MaxDates)
		}
		tiles = append(tiles, &StacTile{Items: g, LabelItems: labelItems, Area: area, Vec: vec, LayerItems: layerItems})
	}
	return tiles, nil
}

// tilePlan is what ingesting one STAC tile needs, resolved before any
// pixel is read: each date's assets, the label assets, the output grid and
// its windows.
type tilePlan struct {
	tile      string
	bandNames []string // the config's bands, in the order of planDate.bands
	dates     []planDate
	labels    []catalog.Asset
	// burned are vector labels (source.labels) burned onto grid, in place
	// of label assets; nil until the tile is composited.
	burned  []uint8
	grid    geo.Grid
	windows []geo.Grid
}

// remote says whether any of the plan's bands is read over a network.
func (p *tilePlan) remote() bool {
	for _, d := range p.dates {
		if raster.Remote(d.scl.Href) || slices.ContainsFunc(d.bands, func(a catalog.Asset) bool { return raster.Remote(a.Href) }) {
			return true
		}
	}
	return false
}

type planDate struct {
	item   catalog.Item
	bands  []catalog.Asset
	scale  []float64
	offset []float64
	scl    catalog.Asset
}

// planTile resolves a tile's assets and grid, so that a missing band or
// label rasters that miss the grid fail before any pixel is read. With
// source.labels there are no label items: the layer is burned onto the
// grid when the tile is composited.
func planTile(cfg config.IngestConfig, t scenes.TileItems, labelItems []catalog.Item, area [4]float64) (*tilePlan, error) {
	p := &tilePlan{tile: t.Tile, bandNames: cfg.Bands, dates: make([]planDate, len(t.Items))}
	for i, it := range t.Items {
		d := planDate{item: it}
		for _, b := range cfg.Bands {
			a, err := it.Asset(b, cfg.Source.Assets)
			if err != nil {
				return nil, err
			}
			s, o := it.ScaleOffset(a)
			d.bands, d.scale, d.offset = append(d.bands, a), append(d.scale, s), append(d.offset, o)
		}
		// With nothing to drop (mask: none) the scene classes are not
		// read: products without SCL (re-exports, harmonised series) are
		// then welcome. A mask band takes SCL's place.
		switch {
		case cfg.Mask.Band != "":
			m, err := maskAsset(it, cfg.Mask.Band, cfg.Source.Assets)
			if err != nil {
				return nil, err
			}
			d.scl = m
		case len(cfg.Mask.DropSCL) > 0:
			scl, err := it.Asset("SCL", cfg.Source.Assets)
			if err != nil {
				return nil, err
			}
			d.scl = scl
		}
		p.dates[i] = d
	}
	for _, li := range labelItems {
		a, err := li.Asset("labels", cfg.Source.Assets)
		if err != nil {
			return nil, err
		}
		p.labels = append(p.labels, a)
	}
	grid, tileGrid, err := scenes.OutputGrid(cfg, p.dates[0].bands, area)
	if err != nil {
		return nil, err
	}
	if cfg.Source.Labels == "" {
		if err := checkLabelsOverlap(p.labels, grid); err != nil {
			return nil, err
		}
	}
	p.grid, p.windows = grid, tileWindows(grid, tileGrid, cfg.Window)
	return p, nil
}

// SourceTile is one tile of an ingest, made from STAC items (stacTile) or
// from an analysis-ready raster pair (rasterTile).
type SourceTile interface {
	Name() string
	Dates() int
	// Plan resolves the tile's inputs and returns its grid, before any
	// pixel is read.
	Plan(cfg config.IngestConfig) (geo.Grid, error)
	// Composite makes every window of the tile and hands it to the sinks.
	Composite(ctx context.Context, cfg config.IngestConfig, opt stage.Options, sinks ...TileSink) (tileStats, error)
	// Manifest describes the tile's stack and its sources.
	Manifest(ctx context.Context, cfg config.IngestConfig, opt stage.Options, noValid float64) (stage.Manifest, error)
	// LabelScheme is the class scheme of the tile's labels, whose palette
	// and names the labels COG carries (after plan); nil when the labels'
	// codes are the user's own.
	LabelScheme(cfg config.IngestConfig) *landcover.Scheme
}

// tileStats is what compositing a tile measured.
type tileStats struct {
	Timings StageTimes
	decoded int64 // source bytes read
	Pixels  int
	NoValid float64 // share of pixels without a valid observation
}

// ingestOne writes one tile's stack COGs and manifest into the stage. It
// returns the bytes decoded.
func ingestOne(ctx context.Context, cfg config.IngestConfig, opt stage.Options, staging *atomicfs.Stage, st SourceTile, mark func(step, tile string)) (TileResult, int64, error) {
	name := st.Name()
	dir, err := stage.TileDir(staging, name)
	if err != nil {
		return TileResult{}, 0, err
	}
	tr := TileResult{Tile: name, Dir: filepath.Join(staging.Final, name), Dates: st.Dates()}
	if atomicfs.Exists(filepath.Join(dir, "manifest.json")) {
		tr.Skipped = true
		opt.Log.Info("tile already ingested", "tile", name)
		return tr, 0, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return tr, 0, err
	}
	grid, err := st.Plan(cfg)
	if err != nil {
		return tr, 0, err
	}
	sw, err := NewStackWriters(dir, grid, cfg, cfg.StackFormats(), st.LabelScheme(cfg), true, opt.Compare.GDALCOG)
	if err != nil {
		return tr, 0, err
	}
	mark("planned", name)
	hist := radiometry.NewHistogram(len(cfg.Bands), stage.StackScale, stage.StackOffset)
	sinks := append(sw.Sinks(), hist)
	var outside *outsideCounter
	if s := st.LabelScheme(cfg); s != nil {
		outside = newOutsideCounter(*s)
		sinks = append(sinks, outside)
	}
	stats, err := st.Composite(ctx, cfg, opt, sinks...)
	tr.Pixels, tr.Timings, tr.NoValidFrac = stats.Pixels, stats.Timings, stats.NoValid
	if err != nil {
		sw.Abort()
		return tr, stats.decoded, err
	}
	mark("composited", name)
	encodeStart := time.Now()
	if err := sw.CloseCOG(); err != nil {
		return tr, stats.decoded, err
	}
	tr.Timings.Encode = time.Since(encodeStart)
	mark("encoded", name)
	logTileStages(ctx, opt, name, tr)
	if outside != nil {
		tr.Outside = outside.counts()
		if w := outside.warning(name); w != "" {
			opt.Log.Warn(w)
		}
	}
	m, err := st.Manifest(ctx, cfg, opt, tr.NoValidFrac)
	if err == nil {
		m.LabelsOutsideScheme = tr.Outside
		m.SetDark(cfg.Bands, hist.Dark(), opt)
		m.LabelScheme = stage.RecordScheme(st.LabelScheme(cfg))
		var known map[string]stage.ManifestOutput
		if known, err = sw.Close(m); err == nil {
			err = WriteTileManifest(dir, m, known)
		}
	} else {
		sw.Abort()
	}
	mark("manifest", name)
	return tr, stats.decoded, err
}

// LabelScheme is the scheme of STAC labels: the label items'
// classification:classes when one declares them (the first by id), else
// the built-in Esri/IO scheme for Impact Observatory's io-lulc
// collections, else ESA WorldCover's. Vector labels (source.labels) have
// the scheme their text classes name, if any: numeric codes are the
// user's own, as raster pairs' are.
func (t *StacTile) LabelScheme(cfg config.IngestConfig) *landcover.Scheme {
	if cfg.Source.Labels != "" {
		return t.Vec.labelScheme()
	}
	items := slices.Clone(t.LabelItems)
	slices.SortFunc(items, func(a, b catalog.Item) int { return strings.Compare(a.ID, b.ID) })
	for _, li := range items {
		a, err := li.Asset("labels", cfg.Source.Assets)
		if err != nil || len(a.Classes) == 0 {
			continue
		}
		name := cmp.Or(li.Collection, cfg.Source.LabelCollection, "labels")
		s, err := landcover.FromSTAC(name, a.Classes)
		if err != nil {
			continue
		}
		// A built-in scheme read from its own items keeps its name.
		for _, b := range []landcover.Scheme{landcover.WorldCover, landcover.EsriIO} {
			if s.Equal(b) {
				s.Name = b.Name
			}
		}
		return &s
	}
	if strings.HasPrefix(cfg.Source.LabelCollection, "io-lulc") {
		return &landcover.EsriIO
	}
	return &landcover.WorldCover
}

// StacTile is a tile of STAC items with the label items over the area.
type StacTile struct {
	Items      scenes.TileItems
	LabelItems []catalog.Item
	Area       [4]float64
	p          *tilePlan
	Vec        *vectorLabels // source.labels, when set
	// LayerItems are the items of the layers from STAC collections, by
	// layer name; layers the tile's, once composited.
	LayerItems map[string][]catalog.Item
	layers     *tileLayers
}

// Name implements SourceTile.
func (t *StacTile) Name() string { return t.Items.Tile }

// Dates implements SourceTile.
func (t *StacTile) Dates() int { return len(t.Items.Items) }

// Plan implements SourceTile.
func (t *StacTile) Plan(cfg config.IngestConfig) (geo.Grid, error) {
	p, err := planTile(cfg, t.Items, t.LabelItems, t.Area)
	if err != nil {
		return geo.Grid{}, err
	}
	t.p = p
	return p.grid, nil
}

// Composite makes the tile's windows. With source.labels the layer is
// burned onto the tile's grid first, once, for every window to copy from.
func (t *StacTile) Composite(ctx context.Context, cfg config.IngestConfig, opt stage.Options, sinks ...TileSink) (tileStats, error) {
	var burned time.Duration
	if cfg.Source.Labels != "" {
		t0 := time.Now()
		labels, err := burnVectorLabels(cfg, t.Vec, t.p.grid, sinks)
		if err != nil {
			return tileStats{}, err
		}
		if !slices.ContainsFunc(labels, func(c uint8) bool { return c != 0 }) {
			// Not an error: a layer may label some tiles of an area only.
			opt.Log.Warn(fmt.Sprintf("tile %s: no feature of source.labels %s lies on the tile's grid: its labels are empty", t.Name(), cfg.Source.Labels))
		}
		t.p.burned, burned = labels, time.Since(t0)
	}
	var err error
	if t.layers, err = makeLayers(ctx, cfg, opt.Log, t.Name(), t.p.grid, layerInputs{items: t.LayerItems}); err != nil {
		return tileStats{}, err
	}
	job, err := compositeTile(ctx, cfg, opt, t.p, sinks...)
	if err == nil {
		err = t.layers.writeTo(sinks, len(cfg.StackPlanes())-len(cfg.Layers))
	}
	t.layers.release()
	if job == nil {
		return tileStats{}, err
	}
	timings := job.timings(opt.Workers)
	timings.Layers = t.layers.took()
	// Burning is reading labels, once for the tile.
	timings.Read, timings.Labels = timings.Read+burned, timings.Labels+burned
	return tileStats{Timings: timings, decoded: job.decoded.Load(), Pixels: job.pixels(), NoValid: job.noValidFrac()}, err
}

// Manifest implements SourceTile.
func (t *StacTile) Manifest(ctx context.Context, cfg config.IngestConfig, opt stage.Options, noValid float64) (stage.Manifest, error) {
	m := t.p.manifest(ctx, cfg, opt, noValid, t.LabelItems)
	m.Layers = t.layers.manifest()
	if cfg.Source.Labels != "" {
		if err := vectorManifest(ctx, &m, cfg, t.Vec, opt); err != nil {
			return m, err
		}
	}
	return m, nil
}

// warnEmptySeasons warns, once per tile, of each temporal season that no
// date of the tile lies in: its planes are nodata over the whole tile,
// which a map trained on them would take for a real value. The warning
// names the season, its days and the tile's dates.
func warnEmptySeasons(log *slog.Logger, tile string, tp *composite.Temporal, dates []windowDate) {
	if tp == nil {
		return
	}
	var mask uint32
	days := make([]string, len(dates))
	for i, d := range dates {
		mask |= tp.SeasonMask(d.time)
		days[i] = d.time.UTC().Format("2006-01-02")
	}
	for j, s := range tp.Seasons {
		if mask&(1<<j) == 0 {
			log.Warn(fmt.Sprintf("tile %s: temporal season %s (%s to %s) matches none of the tile's dates [%s]: its planes are nodata over the whole tile",
				tile, s.Name, s.From, s.To, strings.Join(days, ", ")), "tile", tile, "season", s.Name)
		}
	}
}

// compositeTile reads, masks and composites every window of a plan on
// opt.Workers workers and hands each finished window to the sinks.
func compositeTile(ctx context.Context, cfg config.IngestConfig, opt stage.Options, plan *tilePlan, sinks ...TileSink) (*windowJob, error) {
	opt.Log.Info("ingesting tile", "tile", plan.tile, "dates", len(plan.dates), "grid",
		fmt.Sprintf("%d×%d EPSG:%d", plan.grid.Width, plan.grid.Height, plan.grid.EPSG), "windows", len(plan.windows))
	if short, err := plan.shortBands(); err != nil {
		return nil, err
	} else if len(short) > 0 {
		opt.Log.Warn(fmt.Sprintf("tile %s: %d of %d band rasters do not cover the whole grid; outside them those dates are nodata for that band: %s",
			plan.tile, len(short), plan.rasters(), strings.Join(short[:min(len(short), 10)], "; ")))
	}
	drop := make([]uint8, len(cfg.Mask.DropSCL))
	if cfg.Mask.Band != "" {
		// A mask band is read where SCL would be: every nonzero value
		// drops the pixel.
		drop = drop[:0]
		for v := 1; v < 256; v++ {
			drop = append(drop, uint8(v))
		}
	}
	for i, v := range cfg.Mask.DropSCL {
		drop[i] = uint8(v)
	}
	tp, err := cfg.TemporalSpec()
	if err != nil {
		return nil, err
	}
	job := &windowJob{cfg: cfg, grid: plan.grid, dates: make([]windowDate, len(plan.dates)), drop: drop, temporal: tp,
		labels: plan.labels, burned: plan.burned, sinks: sinks, windows: len(plan.windows), engine: opt.Engine(), hooks: opt.Hooks, log: opt.Log,
		cache: raster.NewBlockCache(blockCacheBudget(plan))}
	for _, s := range sinks {
		if m, ok := s.(stage.MirrorSink); ok && job.engine.Mirrors() {
			// The device composites the windows: it places them in the
			// mirror from its own memory.
			job.mirror = m.Mirror
		}
	}
	for i, d := range plan.dates {
		job.dates[i] = windowDate{bands: d.bands, scale: d.scale, offset: d.offset, scl: d.scl, time: d.item.Datetime}
	}
	warnEmptySeasons(opt.Log, plan.tile, tp, job.dates)
	bar := opt.NewBar(int64(len(plan.windows)), "ingest "+plan.tile+" windows")
	defer bar.Finish()
	job.raw = job.engine.RawBands(plan.remote())
	if job.raw {
		job.ahead = newDecodeAhead(job, plan.windows)
		defer func() { job.readNs.Add(int64(job.ahead.close())) }()
	}
	tileStart := time.Now()
	var done atomic.Int64
	workers := opt.Workers
	// Decoded planes live on the host unless a device decodes the bands
	// (it mirrors its composites): the CPU decodes remote bands taken
	// compressed into host planes too.
	if (!job.raw || !job.engine.Mirrors()) && len(plan.windows) > 0 {
		w := plan.windows[0]
		workers = windowWorkers(opt.Workers, int64(w.Width)*int64(w.Height)*int64(len(plan.dates))*int64(2*len(cfg.Bands)+1), heapBudget(), opt.Log)
	}
	return job, eachWindow(ctx, plan.windows, workers, func() (func(geo.Grid) error, func(), error) {
		// Each worker keeps its own GDAL handles, opened on first use; the
		// CRS of each source is read by the first worker to open it.
		sources := map[string]*raster.Source{}
		open := func(href string) (*raster.Source, error) {
			if s, ok := sources[href]; ok {
				return s, nil
			}
			s, err := job.openSource(href)
			if err != nil {
				return nil, err
			}
			sources[href] = s
			return s, nil
		}
		closeAll := func() {
			for _, s := range sources {
				s.Close()
			}
		}
		return func(w geo.Grid) error { return job.window(w, open) }, closeAll, nil
	}, func() {
		n := done.Add(1)
		secs := time.Since(tileStart).Seconds()
		// The tile's pixels composited so far, by its share of windows
		// done (edge windows are smaller: a small overestimate early on).
		mpxs := float64(n) / float64(len(plan.windows)) * float64(job.pixels()) / 1e6 / secs
		mbps := float64(job.decoded.Load()) / 1e6 / secs
		bar.Describe(fmt.Sprintf("ingest %s: %d dates, %.1f Mpx/s, %.0f MB/s decoded, windows", plan.tile, len(plan.dates), mpxs, mbps))
		bar.Add(1)
		opt.Log.Debug("window composited", "tile", plan.tile, "done", n, "of", len(plan.windows))
	})
}

// WindowWorkers bounds the windows composited at once where each holds
// every date's bands on the host (the CPU engine, or a device fed decoded
// planes): a window holds perWindow bytes (its dates' bands and masks: a
// gigabyte at 48 dates of 10 bands in 1024² windows), so that with every
// worker busy the windows would outgrow the heap as dates are added (15.7
// GB of RSS at 48 dates on 16 cores, docs/benchmarks.md, "A year of
// dates"). They take at most half of budget, and the log says when that
// holds workers back.
func windowWorkers(workers int, perWindow, budget int64, log *slog.Logger) int {
	if perWindow <= 0 || budget <= 0 {
		return workers
	}
	n := int(max(1, budget/2/perWindow))
	if n >= workers {
		return workers
	}
	log.Info("windows composited at once held within memory: each holds every date's bands; raise memory_gb for more",
		"windows_at_once", n, "workers", workers, "window_mb", perWindow>>20, "budget_mb", budget>>20)
	return n
}

// heapBudget is the Go heap's limit, else the memory available, else 0
// (unknown).
func heapBudget() int64 {
	if limit := heapLimit(); limit > 0 {
		return limit
	}
	return int64(meminfo.Available())
}

// heapLimit is the Go heap's soft limit (lulc run sets it from
// memory_gb), 0 when none is set.
func heapLimit() int64 {
	// SetMemoryLimit with a negative value reads the limit; math.MaxInt64
	// means none.
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		return limit
	}
	return 0
}

// logTileStages logs where a tile's ingest time went and warns when many
// pixels have no valid observation.
func logTileStages(ctx context.Context, opt stage.Options, tile string, tr TileResult) {
	opt.Log.Info("tile stages", "tile", tile, "read_worker_s", tr.Timings.Read.Seconds(),
		"resample_worker_s", tr.Timings.Resample.Seconds(), "labels_worker_s", tr.Timings.Labels.Seconds(), "composite_worker_s", tr.Timings.Composite.Seconds(),
		"write_worker_s", tr.Timings.Write.Seconds(), "encode_s", tr.Timings.Encode.Seconds(), "workers", tr.Timings.Workers,
		"raw_rects", tr.Timings.RawRects, "layers_s", tr.Timings.Layers.Seconds())
	if tr.NoValidFrac > 0 {
		level := slog.LevelInfo
		if tr.NoValidFrac > 0.5 {
			level = slog.LevelWarn
		}
		opt.Log.Log(ctx, level, "pixels without a valid observation", "tile", tile, "percent", math.Round(tr.NoValidFrac*1000)/10)
	}
}

// manifest describes the tile's stack: grid, encoding, mask and every
// source asset.
func (p *tilePlan) manifest(ctx context.Context, cfg config.IngestConfig, opt stage.Options, noValid float64, labelItems []catalog.Item) stage.Manifest {
	grid := p.grid
	m := stage.Manifest{
		Version: opt.Version, ConfigHash: cfg.Hash(), Tile: p.tile,
		Grid:  stage.ManifestGrid{EPSG: grid.EPSG, Transform: grid.Transform, Width: grid.Width, Height: grid.Height},
		Bands: cfg.StackPlanes(), DataType: "uint16", Scale: stage.StackScale, Offset: stage.StackOffset, NoData: 0,
		Composite:  "per-pixel temporal median of valid observations (composite package rules)",
		Temporal:   cfg.Temporal,
		Mask:       stage.ManifestMask{DropSCL: cfg.Mask.DropSCL, Band: cfg.Mask.Band, NoData: "any band at its nodata value"},
		Resampling: cfg.Resampling.Reflectance, LabelResampling: cfg.Resampling.Labels,
		NoValidFraction: noValid,
	}
	// Every asset described at once (remote ones by HEAD requests in
	// flight together), then put in its place.
	var refs []stage.AssetRef
	for _, d := range p.dates {
		for bi, a := range d.bands {
			refs = append(refs, stage.AssetRef{Asset: a, Scale: d.scale[bi], Offset: d.offset[bi]})
		}
		if d.scl.Href != "" {
			refs = append(refs, stage.AssetRef{Asset: d.scl})
		}
	}
	for i := range labelItems {
		refs = append(refs, stage.AssetRef{Asset: p.labels[i]})
	}
	described := stage.DescribeAssets(ctx, opt.HTTP, refs)
	next := func() stage.ManifestAsset {
		a := described[0]
		described = described[1:]
		return a
	}
	for _, d := range p.dates {
		src := stage.ManifestItem{ID: d.item.ID, Collection: d.item.Collection, Datetime: d.item.Datetime.Format(time.RFC3339Nano), Assets: map[string]stage.ManifestAsset{}}
		// Items from static catalogs have their own document; API results
		// are located by the search that returned them.
		if strings.HasSuffix(d.item.Location, ".json") {
			src.Href = redact.URL(d.item.Location)
		}
		for bi := range d.bands {
			src.Assets[cfg.Bands[bi]] = next()
		}
		if d.scl.Href != "" {
			name := "SCL"
			if cfg.Mask.Band != "" {
				name = cfg.Mask.Band
			}
			src.Assets[name] = next()
		}
		m.Sources = append(m.Sources, src)
	}
	for _, li := range labelItems {
		m.Labels = append(m.Labels, stage.ManifestItem{ID: li.ID, Collection: li.Collection,
			Assets: map[string]stage.ManifestAsset{"labels": next()}})
	}
	return m
}

// TileSink receives a tile's finished windows: every stack band's DNs, the
// valid counts and the labels, w×h and row-major, at (x, y). The COG
// writers and an in-memory stack.Tile are sinks.
type TileSink interface {
	Write(x, y, w, h int, stack [][]uint16, count, labels []uint8) error
}

// outsideCounter is a tile sink that counts, by code, the labelled pixels
// whose code is not in a scheme (windows arrive from several workers).
type outsideCounter struct {
	scheme   landcover.Scheme
	in       [256]bool
	n        [256]atomic.Int64
	labelled atomic.Int64
}

func newOutsideCounter(s landcover.Scheme) *outsideCounter {
	c := &outsideCounter{scheme: s}
	for _, k := range s.Classes {
		c.in[k.Code] = true
	}
	c.in[0] = true // unlabelled
	return c
}

// Write implements tileSink.
func (c *outsideCounter) Write(_, _, _, _ int, _ [][]uint16, _, labels []uint8) error {
	var n [256]int64
	for _, code := range labels {
		n[code]++
	}
	for code, k := range n {
		if k == 0 {
			continue
		}
		if code != 0 {
			c.labelled.Add(k)
		}
		if !c.in[code] {
			c.n[code].Add(k)
		}
	}
	return nil
}

// counts returns the pixels outside the scheme by code, nil for none.
func (c *outsideCounter) counts() map[uint8]int64 {
	var m map[uint8]int64
	for code := range c.n {
		if k := c.n[code].Load(); k > 0 {
			if m == nil {
				m = map[uint8]int64{}
			}
			m[uint8(code)] = k
		}
	}
	return m
}

// warning says how many of the tile's labelled pixels have codes outside
// the scheme, by code; "" when none do.
func (c *outsideCounter) warning(tile string) string {
	m := c.counts()
	if len(m) == 0 {
		return ""
	}
	var total int64
	var codes []string
	for _, code := range slices.Sorted(maps.Keys(m)) {
		total += m[code]
		codes = append(codes, fmt.Sprintf("%d (%d)", code, m[code]))
	}
	return fmt.Sprintf("labels: tile %s: %.1f %% of the labelled pixels (%d of %d) have codes outside the scheme %s: %s",
		tile, 100*float64(total)/float64(c.labelled.Load()), total, c.labelled.Load(), c.scheme.Name, strings.Join(codes, ", "))
}

// groupSink is a tile sink that also takes the tile's group ids whole
// (the features of vector labels, raster.RasterizeGroups), which a split
// by features draws with.
type groupSink interface {
	WriteGroups(ids []uint32) error
}

// weightSink is a tile sink that also takes the tile's pixel weights
// whole (a vector label attribute, raster.RasterizeWeights), which the
// draw keys pixels by.
type weightSink interface {
	WriteWeights(w []uint8) error
}

// TileWriters are the three rasters of a tile: the stack (UInt16 in lulc's
// encoding, band descriptions from the config's bands), the labels (UInt8,
// with the scheme's palette and names when given) and the valid counts.
type TileWriters struct {
	stack, label, count *raster.Writer
	dir                 string
	grid                geo.Grid
	cog                 raster.COGOptions
}

// WriteGroups writes the tile's group ids as groups.tif.
func (w *TileWriters) WriteGroups(ids []uint32) error {
	return raster.WriteGroups(filepath.Join(w.dir, stage.GroupsFile), w.grid, ids, w.cog)
}

// WriteWeights writes the tile's pixel weights as weights.tif.
func (w *TileWriters) WriteWeights(weights []uint8) error {
	return raster.WriteWeights(filepath.Join(w.dir, stage.WeightsFile), w.grid, weights, w.cog)
}

// NewTileWriters starts a tile's three rasters in dir. With early, their
// full-resolution tiles are compressed as the windows complete them, and
// the files are hashed as they are written (raster.COGOptions.EncodeEarly):
// the compressed tiles are then held in memory until close.
func NewTileWriters(dir string, grid geo.Grid, cfg config.IngestConfig, classes *landcover.Scheme, early, gdalCOG bool) (*TileWriters, error) {
	cog := raster.COGOptions{BlockSize: cfg.Output.BlockSize, Compress: cfg.Output.Compress, NoData: stage.Ptr(0.0), EncodeEarly: early, GDALDriver: gdalCOG}
	planes := cfg.StackPlanes()
	bandInfo := make([]raster.BandInfo, len(planes))
	for i, b := range planes {
		bandInfo[i] = raster.BandInfo{Description: b, Scale: stage.StackScale, Offset: stage.StackOffset}
	}
	stackW, err := raster.NewWriter(filepath.Join(dir, "stack.tif"), grid, "uint16", bandInfo, cog)
	if err != nil {
		return nil, err
	}
	labelCOG := cog
	labelCOG.Classes = classes
	labelCOG.OverviewResampling = "MODE"
	labelW, err := raster.NewWriter(filepath.Join(dir, "labels.tif"), grid, "uint8", []raster.BandInfo{{Description: "labels"}}, labelCOG)
	if err != nil {
		stackW.Abort()
		return nil, err
	}
	countCOG := cog
	countCOG.NoData = nil
	countCOG.OverviewResampling = "NEAREST"
	countW, err := raster.NewWriter(filepath.Join(dir, "valid_count.tif"), grid, "uint8", []raster.BandInfo{{Description: "valid observations"}}, countCOG)
	if err != nil {
		stackW.Abort()
		labelW.Abort()
		return nil, err
	}
	// Groups and weights are written whole, once: nothing to gain early.
	cog.EncodeEarly = false
	return &TileWriters{stack: stackW, label: labelW, count: countW, dir: dir, grid: grid, cog: cog}, nil
}

// sums returns the checksums and sizes the writers took as they wrote,
// by file name, after close.
func (w *TileWriters) sums() map[string]stage.ManifestOutput {
	known := map[string]stage.ManifestOutput{}
	for name, r := range map[string]*raster.Writer{"stack.tif": w.stack, "labels.tif": w.label, "valid_count.tif": w.count} {
		if sum, size, ok := r.Sum(); ok {
			known[name] = stage.ManifestOutput{File: name, BLAKE3: sum, Size: size}
		}
	}
	return known
}

// Write stores a window of every stack band, the count and the labels.
func (w *TileWriters) Write(x, y, width, height int, stack [][]uint16, count, labels []uint8) error {
	for bi, b := range stack {
		if err := w.stack.Write(bi, x, y, width, height, b); err != nil {
			return err
		}
	}
	if err := w.count.Write(0, x, y, width, height, count); err != nil {
		return err
	}
	return w.label.Write(0, x, y, width, height, labels)
}

// WriteLayers writes the stack's layer planes, whole, from band first on.
func (w *TileWriters) WriteLayers(first int, planes [][]uint16) error {
	for k, p := range planes {
		if err := w.stack.Write(first+k, 0, 0, w.grid.Width, w.grid.Height, p); err != nil {
			return err
		}
	}
	return nil
}

// Abort removes the writers' staged files.
func (w *TileWriters) Abort() {
	w.stack.Abort()
	w.label.Abort()
	w.count.Abort()
	os.Remove(filepath.Join(w.dir, stage.GroupsFile))
	os.Remove(filepath.Join(w.dir, stage.WeightsFile))
}

// Close encodes the three COGs at once (the labels and counts beside the
// stack, which takes longest); on failure it discards them all.
func (w *TileWriters) Close() error {
	writers := []*raster.Writer{w.stack, w.label, w.count}
	errs := make([]error, len(writers))
	var wg sync.WaitGroup
	for i, r := range writers {
		wg.Go(func() { errs[i] = r.Close() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		w.Abort()
		return err
	}
	return nil
}

// WriteTileManifest adds the outputs' checksums to m and writes the
// tile's manifest.json, which marks the tile finished. Files in known were
// hashed as they were written; the others are read back.
func WriteTileManifest(dir string, m stage.Manifest, known map[string]stage.ManifestOutput) error {
	// The files are hashed at once: the COGs, when the stack has them,
	// and the Zarr store's files, which its writer hashed.
	var files []string
	if atomicfs.Exists(filepath.Join(dir, "stack.tif")) {
		files = []string{"stack.tif", "labels.tif", "valid_count.tif"}
	}
	for _, f := range slices.Sorted(maps.Keys(known)) {
		if strings.HasPrefix(f, ZarrStackDir+"/") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("tile %s: no stack was written (stack.tif or %s)", m.Tile, ZarrStackDir)
	}
	for _, f := range []string{stage.GroupsFile, stage.WeightsFile} {
		if atomicfs.Exists(filepath.Join(dir, f)) {
			files = append(files, f)
		}
	}
	outs, errs := make([]stage.ManifestOutput, len(files)), make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		if k, ok := known[f]; ok {
			outs[i] = k
			continue
		}
		wg.Go(func() {
			sum, size, err := digest.File(filepath.Join(dir, f))
			outs[i], errs[i] = stage.ManifestOutput{File: f, BLAKE3: sum, Size: size}, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.Outputs = append(m.Outputs, outs...)
	body, _ := json.MarshalIndent(m, "", "  ")
	return atomicfs.WriteFile(filepath.Join(dir, "manifest.json"), append(body, '\n'))
}

// sourceZoom is how many output pixels one source pixel covers (1 for
// 10 m bands on a 10 m grid, 4 for 20 m ones); it turns window pixels into
// decoded source bytes.
func sourceZoom(s *raster.Source, w geo.Grid) int {
	k := s.Transform[1] / w.Transform[1]
	return max(1, int(math.Round(k*k)))
}

// blockCacheBudget bounds the decoded source blocks a tile's workers
// share (see raster.BlockCache): the windows in flight, with their halos,
// touch about four block rows of each upsampled file. That is 4 × 512 rows
// of a 20 m band, width/2 pixels of 2 bytes, for each band of each date (an
// upper bound: 10 m bands never enter the cache), and at most 1 GiB.
func blockCacheBudget(p *tilePlan) int64 {
	bands := 0
	for _, d := range p.dates {
		bands += len(d.bands)
	}
	perBand := int64(4 * 512 * p.grid.Width)
	return max(64<<20, min(1<<30, int64(bands)*perBand))
}

// windowJob is the per-window work of one tile, shared by its workers.
type windowJob struct {
	cfg    config.IngestConfig
	grid   geo.Grid
	dates  []windowDate
	drop   []uint8
	labels []catalog.Asset
	// burned are the tile's vector labels, read in place of labels' assets
	// (nil: none).
	burned  []uint8
	sinks   []TileSink
	windows int
	engine  stage.Engine
	// raw says the engine takes the tile's bands compressed
	// (Engine.RawBands): read ahead by rows of windows.
	raw     bool
	hooks   stage.Hooks
	cache   *raster.BlockCache
	crs     sync.Map // href → *knownCRS, read by the first worker to open it
	layouts sync.Map // href → *raster.TileLayout of bands the engine decodes (nil: it does not)
	// layoutMu serialises reading layouts (see layout).
	layoutMu sync.Mutex
	log      *slog.Logger
	// temporal describes the stack's temporal planes, after the bands'
	// medians (nil: none).
	temporal *composite.Temporal
	ahead    *DecodeAhead // with raw: the compressed tiles, read (and on a device decoded) ahead
	// mirror is the tile's composite in device memory, which the device
	// composite fills (nil: none, or filled through its sink).
	mirror *cuda.Mirror
	// out recycles the composite's output planes between windows: the
	// sinks copy what they keep.
	out      bufpool.Pool[uint16]
	outCount bufpool.Pool[uint8]

	decoded, empty               atomic.Int64 // source bytes read; pixels with no valid observation
	rawRects                     atomic.Int64 // band rectangles that went to the composite compressed
	readNs, compositeNs, writeNs atomic.Int64 // summed over workers
	labelNs, resampleNs          atomic.Int64 // parts of readNs
}

type windowDate struct {
	bands         []catalog.Asset
	scale, offset []float64
	scl           catalog.Asset
	time          time.Time // acquisition, for the seasons of temporal planes
}

// maskAsset is an item's mask band: the asset the config's assets map
// name to, else the asset keyed name.
func maskAsset(it catalog.Item, name string, overrides map[string]string) (catalog.Asset, error) {
	key := name
	if k, ok := overrides[name]; ok {
		key = k
	}
	a, ok := it.Assets[key]
	if !ok || a.Href == "" {
		return catalog.Asset{}, fmt.Errorf("item %s has no mask asset %s (mask: %s)", it.ID, key, name)
	}
	return a, nil
}

// window reads every date's bands and SCL over w, masks, composites, and
// writes the stack, count and labels windows.
func (j *windowJob) window(w geo.Grid, open func(string) (*raster.Source, error)) error {
	if j.ahead != nil {
		defer j.ahead.done(w)
	}
	n := w.Width * w.Height
	t0 := time.Now()
	r := &windowReader{job: j, w: w, n: n, open: open}
	cdates, err := r.dates()
	if err != nil {
		return err
	}
	labels, err := r.labels()
	if err != nil {
		return err
	}
	j.readNs.Add(r.readNs)
	j.labelNs.Add(r.labelNs)

	t1 := time.Now()
	// The composite writes every pixel of its outputs.
	meds := make([][]uint16, len(j.cfg.Bands)+len(j.temporal.Planes()))
	for bi := range meds {
		meds[bi] = j.out.Get(n)
		defer j.out.Put(meds[bi])
	}
	count := j.outCount.Get(n)
	defer j.outCount.Put(count)
	x := int(math.Round((w.Transform[0] - j.grid.Transform[0]) / j.grid.Transform[1]))
	y := int(math.Round((w.Transform[3] - j.grid.Transform[3]) / j.grid.Transform[5]))
	var into *cuda.MirrorWindow
	if j.mirror != nil {
		into = &cuda.MirrorWindow{Mirror: j.mirror, X: x, Y: y, Width: w.Width, Labels: labels}
	}
	spec := composite.Spec{Drop: j.drop, Temporal: j.temporal, Scale: stage.StackScale, Offset: stage.StackOffset}
	resampled, err := j.engine.Composite(cdates, spec, meds, count, into)
	if err != nil {
		return err
	}
	var zeros int64
	for _, c := range count {
		if c == 0 {
			zeros++
		}
	}
	j.empty.Add(zeros)
	t2 := time.Now()
	j.compositeNs.Add(int64(t2.Sub(t1)) + int64(t1.Sub(t0)) - r.readNs - int64(resampled))
	j.resampleNs.Add(int64(resampled))

	for _, sink := range j.sinks {
		if m, ok := sink.(stage.MirrorSink); ok && m.Mirror == j.mirror {
			continue // the device composite placed the window itself
		}
		if err := sink.Write(x, y, w.Width, w.Height, meds, count, labels); err != nil {
			return err
		}
	}
	j.writeNs.Add(int64(time.Since(t2)))
	return nil
}

// openSource opens a new handle on href; the job's first handle on it
// reads its CRS, and the others take it from there.
func (j *windowJob) openSource(href string) (*raster.Source, error) {
	v, opened := j.crs.LoadOrStore(href, &knownCRS{read: make(chan struct{})})
	k := v.(*knownCRS)
	if opened {
		// Every worker opens every source at the start: they wait for the
		// first to read its CRS rather than all reading it at once.
		<-k.read
		return raster.OpenKnownCRS(href, k.epsg)
	}
	defer close(k.read)
	s, err := raster.OpenKnownCRS(href, 0)
	if err != nil {
		return nil, err // the others read the CRS themselves, and fail as this did
	}
	k.epsg = s.EPSG
	return s, nil
}

// knownCRS is a source's EPSG code, set before read is closed (0 when the
// first open failed).
type knownCRS struct {
	read chan struct{}
	epsg int
}

// windowReader reads one window's sources with a worker's own handles,
// adding up where the time goes.
type windowReader struct {
	job             *windowJob
	w               geo.Grid
	n               int
	open            func(string) (*raster.Source, error)
	readNs, labelNs int64
}

// dates reads every date's SCL and bands over the window.
func (r *windowReader) dates() ([]composite.Date, error) {
	cdates := make([]composite.Date, len(r.job.dates))
	for di, d := range r.job.dates {
		cd := composite.Date{SCL: make([]uint8, r.n), Scale: d.scale, Offset: d.offset, Coarse: make([]*resample.Coarse, len(d.bands)),
			Raw: make([]*decode.Rect, len(d.bands)), Time: d.time}
		if d.scl.Href != "" {
			if _, err := r.read(d.scl.Href, "nearest", cd.SCL, 1); err != nil {
				return nil, err
			}
		}
		for b, a := range d.bands {
			src, dn, c, raw, err := r.band(a.Href)
			if err != nil {
				return nil, err
			}
			cd.Raw[b] = raw
			// The file's nodata is the truth; catalogs may omit it.
			nodata := uint16(0)
			if src.NoData != nil {
				nodata = uint16(*src.NoData)
			}
			cd.DN, cd.NoData, cd.Coarse[b] = append(cd.DN, dn), append(cd.NoData, nodata), c
		}
		cdates[di] = cd
	}
	return cdates, nil
}

// labels reads the label rasters over the window; where several cover a
// pixel the first (by item id, then by where the item was read from)
// wins. Burned vector labels are copied.
func (r *windowReader) labels() ([]uint8, error) {
	labels := make([]uint8, r.n)
	if b := r.job.burned; b != nil {
		g := r.job.grid
		x := int(math.Round((r.w.Transform[0] - g.Transform[0]) / g.Transform[1]))
		y := int(math.Round((r.w.Transform[3] - g.Transform[3]) / g.Transform[5]))
		for row := range r.w.Height {
			copy(labels[row*r.w.Width:(row+1)*r.w.Width], b[(y+row)*g.Width+x:])
		}
		return labels, nil
	}
	// The first raster is read straight into labels (most tiles have
	// one); later ones fill only what is still unlabelled.
	var buf []uint8
	for k, a := range r.job.labels {
		s, cw, err := r.labelWindow(a.Href)
		if err != nil {
			return nil, err
		}
		into := labels
		if k > 0 {
			// A later raster beside the window would fill it with zeros,
			// which change nothing: skip it.
			if cw != nil && cw.Beside && cw.NoData == 0 {
				continue
			}
			if buf == nil {
				buf = make([]uint8, r.n)
			}
			into = buf
		}
		if err := r.mapLabels(s, cw, into); err != nil {
			return nil, err
		}
		if k == 0 {
			continue
		}
		for i, v := range buf {
			if labels[i] == 0 {
				labels[i] = v
			}
		}
	}
	return labels, nil
}

// labelWindow opens label raster href and reads what lulc's class rule
// needs over the window; cw is nil where the rule does not apply (a grid
// nested in the source's, or a resampling other than mode and nearest).
func (r *windowReader) labelWindow(href string) (s *raster.Source, cw *classrule.Window, err error) {
	defer r.labelTime(time.Now())
	if s, err = r.open(href); err != nil {
		return nil, nil, err
	}
	cw, rule, err := s.ClassWindow(r.w, r.job.cfg.Resampling.Labels)
	if !rule {
		cw = nil
	}
	return s, cw, err
}

// mapLabels fills buf with a label raster over the window: by the class
// rule on the engine when cw is not nil, else by GDAL's resampling.
func (r *windowReader) mapLabels(s *raster.Source, cw *classrule.Window, buf []uint8) error {
	defer r.labelTime(time.Now())
	if cw != nil {
		return r.job.engine.Classes(cw, buf)
	}
	return s.Read(r.w, r.job.cfg.Resampling.Labels, buf)
}

// labelTime adds the time since t to the window's reads and labels.
func (r *windowReader) labelTime(t time.Time) {
	took := int64(time.Since(t))
	r.readNs += took
	r.labelNs += took
}

// read fills buf from href over the window with Upsample.
func (r *windowReader) read(href, alg string, buf any, bytesPerPixel int) (*raster.Source, error) {
	t := time.Now()
	defer func() { r.readNs += int64(time.Since(t)) }()
	s, err := r.open(href)
	if err != nil {
		return nil, err
	}
	if err := s.Upsample(r.w, alg, buf, nil); err != nil {
		return nil, err
	}
	r.job.decoded.Add(int64(bytesPerPixel * r.n / sourceZoom(s, r.w)))
	return s, nil
}

// band reads one reflectance band: still compressed when the engine
// decodes its tiles (rawBand); else a bilinear band that nests at a
// coarser resolution as its plane, resampled by the composite (on the
// engine); any other at the window's resolution.
func (r *windowReader) band(href string) (*raster.Source, []uint16, *resample.Coarse, *decode.Rect, error) {
	if s, c, raw, err := r.rawBand(href); err != nil || raw != nil {
		return s, nil, c, raw, err
	}
	if r.job.cfg.Resampling.Reflectance == "bilinear" {
		t := time.Now()
		s, err := r.open(href)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		// Bilinear windows overlap by a halo: the shared cache decodes each
		// source block once for all of them.
		c, err := s.Coarse(r.w, r.job.cache)
		r.readNs += int64(time.Since(t))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if c != nil {
			r.job.decoded.Add(int64(2 * len(c.Plane.Pix)))
			return s, nil, c, nil, nil
		}
	}
	dn := make([]uint16, r.n)
	s, err := r.read(href, r.job.cfg.Resampling.Reflectance, dn, 2)
	return s, dn, nil, nil, err
}

// rawBand reads the compressed tiles a window needs from a band whose
// tiles the engine decodes (with the plane's geometry for a coarse band);
// nil for any other band.
func (r *windowReader) rawBand(href string) (*raster.Source, *resample.Coarse, *decode.Rect, error) {
	if !r.job.raw {
		return nil, nil, nil, nil
	}
	if a := r.job.ahead; a != nil {
		if s, raw, c, ok := a.take(r.w, href); ok {
			r.job.decoded.Add(int64(2 * raw.W * raw.H))
			r.job.rawRects.Add(1)
			return s, c, raw, nil
		}
	}
	t := time.Now()
	defer func() { r.readNs += int64(time.Since(t)) }()
	s, err := r.open(href)
	if err != nil {
		return nil, nil, nil, err
	}
	l := r.job.layout(s)
	if l == nil {
		return s, nil, nil, nil
	}
	raw, c, err := s.RawWindow(r.w, l, r.job.cfg.Resampling.Reflectance == "bilinear")
	if err != nil || raw == nil {
		return s, nil, nil, err
	}
	r.job.decoded.Add(int64(2 * raw.W * raw.H))
	r.job.rawRects.Add(1)
	return s, c, raw, nil
}

// layout returns the tile layout of a band the engine decodes, read once
// per tile job, or nil (with a debug line saying why, once) when GDAL
// decodes it.
func (j *windowJob) layout(s *raster.Source) *raster.TileLayout {
	if v, ok := j.layouts.Load(s.Href); ok {
		return v.(*raster.TileLayout)
	}
	// One reader at a time: the read-ahead's goroutines share a band's
	// handle, and GDAL handles are not safe for concurrent use. Two calls
	// reading BLOCK_OFFSET/BLOCK_SIZE through one handle at once once gave
	// a tile a size larger than its file.
	j.layoutMu.Lock()
	defer j.layoutMu.Unlock()
	if v, ok := j.layouts.Load(s.Href); ok {
		return v.(*raster.TileLayout)
	}
	var l *raster.TileLayout
	why := ""
	if got, err := s.Layout(); err != nil {
		why = err.Error()
	} else if ok, w := stage.Decodes(j.raw, got.Format()); !ok {
		why = w
	} else {
		l = &got
	}
	j.layouts.Store(s.Href, l)
	if why != "" {
		j.log.Debug("band decoded by GDAL", "href", redact.String(s.Href), "why", why)
	}
	return l
}

// pixels is the tile's pixel count.
func (j *windowJob) pixels() int { return j.grid.Width * j.grid.Height }

// noValidFrac is the share of the tile's pixels without a valid
// observation.
func (j *windowJob) noValidFrac() float64 { return float64(j.empty.Load()) / float64(j.pixels()) }

// timings are the job's stage times so far (Encode is the caller's).
func (j *windowJob) timings(workers int) StageTimes {
	return StageTimes{Read: time.Duration(j.readNs.Load()), Composite: time.Duration(j.compositeNs.Load()),
		Write: time.Duration(j.writeNs.Load()), Resample: time.Duration(j.resampleNs.Load()),
		Labels: time.Duration(j.labelNs.Load()), Workers: min(workers, j.windows), RawRects: j.rawRects.Load()}
}

// tileWindows cuts grid into windows aligned to the tile's window lattice
// (so they follow the COGs' internal tiles), row by row.
func tileWindows(grid, tile geo.Grid, size int) []geo.Grid {
	res := grid.Transform[1]
	col0 := int(math.Round((grid.Transform[0] - tile.Transform[0]) / res))
	row0 := int(math.Round((tile.Transform[3] - grid.Transform[3]) / res))
	var out []geo.Grid
	for r := row0 - ((row0%size)+size)%size; r < row0+grid.Height; r += size {
		rs, re := max(r, row0), min(r+size, row0+grid.Height)
		for c := col0 - ((col0%size)+size)%size; c < col0+grid.Width; c += size {
			cs, ce := max(c, col0), min(c+size, col0+grid.Width)
			out = append(out, geo.Grid{EPSG: grid.EPSG,
				Transform: [6]float64{tile.Transform[0] + float64(cs)*res, res, 0, tile.Transform[3] - float64(rs)*res, 0, -res},
				Width:     ce - cs, Height: re - rs})
		}
	}
	return out
}

// shortBands names the band and SCL rasters of the plan's dates that cover
// less than the whole grid (a raster smaller than the others, or on
// another CRS whose footprint misses part of the tile), with the share
// they cover: outside them, the composite has no observation of that date.
func (p *tilePlan) shortBands() ([]string, error) {
	gb := p.grid.Bounds()
	area := (gb[2] - gb[0]) * (gb[3] - gb[1])
	var short []string
	for _, d := range p.dates {
		assets := append([]catalog.Asset{}, d.bands...)
		if d.scl.Href != "" {
			assets = append(assets, d.scl)
		}
		for i, a := range assets {
			s, err := raster.Open(a.Href)
			if err != nil {
				return nil, err
			}
			b, epsg := s.Bounds(), s.EPSG
			s.Close()
			if epsg != p.grid.EPSG {
				if b, err = reproject(b, epsg, p.grid.EPSG); err != nil {
					return nil, err
				}
			}
			w := max(0, min(b[2], gb[2])-max(b[0], gb[0]))
			h := max(0, min(b[3], gb[3])-max(b[1], gb[1]))
			if share := w * h / area; share < 0.9999 {
				name := "SCL"
				if i < len(d.bands) {
					name = p.bandName(i)
				}
				short = append(short, fmt.Sprintf("%s %s covers %.1f %%", d.item.ID, name, 100*share))
			}
		}
	}
	return short, nil
}

// rasters counts the plan's band and SCL rasters.
func (p *tilePlan) rasters() int {
	n := 0
	for _, d := range p.dates {
		n += len(d.bands)
		if d.scl.Href != "" {
			n++
		}
	}
	return n
}

// bandName is the config's name of band i (the asset's key otherwise).
func (p *tilePlan) bandName(i int) string {
	if i < len(p.bandNames) {
		return p.bandNames[i]
	}
	return fmt.Sprint("band ", i+1)
}

// reproject returns the bounding box, in EPSG:dst, of bounds in EPSG:src
// (corners and edge midpoints transformed).
func reproject(b [4]float64, src, dst int) ([4]float64, error) {
	tr, err := raster.NewTransformer(src, dst)
	if err != nil {
		return b, err
	}
	defer tr.Close()
	mx, my := (b[0]+b[2])/2, (b[1]+b[3])/2
	xs := []float64{b[0], b[2], b[0], b[2], mx, mx, b[0], b[2]}
	ys := []float64{b[1], b[1], b[3], b[3], b[1], b[3], my, my}
	if err := tr.Transform(xs, ys); err != nil {
		return b, err
	}
	return [4]float64{slices.Min(xs), slices.Min(ys), slices.Max(xs), slices.Max(ys)}, nil
}

// checkLabelsOverlap fails when no label raster covers any of the grid.
func checkLabelsOverlap(assets []catalog.Asset, grid geo.Grid) error {
	gb, err := reproject(grid.Bounds(), grid.EPSG, 4326)
	if err != nil {
		return err
	}
	var hrefs []string
	for _, a := range assets {
		s, err := raster.Open(a.Href)
		if err != nil {
			return fmt.Errorf("labels: %w", err)
		}
		lb := s.Bounds()
		epsg := s.EPSG
		s.Close()
		if epsg != 4326 {
			return nil // projected labels: let the warp decide
		}
		if lb[0] < gb[2] && gb[0] < lb[2] && lb[1] < gb[3] && gb[1] < lb[3] {
			return nil
		}
		hrefs = append(hrefs, a.Href)
	}
	return fmt.Errorf("labels do not overlap the output grid (%v in lon/lat): %s", gb, strings.Join(hrefs, ", "))
}

// eachWindow runs do over windows on up to workers goroutines, each with
// its own state from start (GDAL handles are not shared between threads;
// stop releases them), calling progress after each window. The first
// error stops the feeding and is returned, as is ctx's.
func eachWindow(ctx context.Context, windows []geo.Grid, workers int, start func() (do func(geo.Grid) error, stop func(), err error), progress func()) error {
	work := make(chan geo.Grid)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range min(workers, len(windows)) {
		wg.Go(func() {
			do, stop, err := start()
			if err == nil {
				defer stop()
				for w := range work {
					if err = do(w); err != nil {
						break
					}
					progress()
				}
			}
			if err != nil {
				errs <- err
				for range work { // drain so the feeder stops
				}
			}
		})
	}
	var firstErr error
feed:
	for _, w := range windows {
		select {
		case <-ctx.Done():
			firstErr = ctx.Err()
			break feed
		case err := <-errs:
			firstErr = err
			break feed
		case work <- w:
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// ConfigureGDAL sets GDAL's options for reading the sources: lulc's
// defaults, then the config's source.gdal.
func ConfigureGDAL(cfg config.IngestConfig) error {
	gdalOpts := map[string]string{
		"GDAL_DISABLE_READDIR_ON_OPEN":     "EMPTY_DIR",
		"GDAL_HTTP_MAX_RETRY":              "4",
		"GDAL_HTTP_RETRY_DELAY":            "1",
		"GDAL_HTTP_TIMEOUT":                "60",
		"CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif,.tiff,.TIF,.TIFF",
		// GDAL's block cache defaults to 5 % of RAM (6.4 GB on a 128 GB
		// host). Windows follow the tile's block lattice and the halos of
		// upsampled bands come from lulc's own BlockCache, so GDAL's
		// serves little more than the label rasters' neighbouring blocks.
		"GDAL_CACHEMAX": "256",
	}
	// GDAL reads only the listed extensions over HTTP: a remote vector
	// layer's own must be among them.
	if ext := vectorExtension(cfg.Source.Labels); ext != "" {
		gdalOpts["CPL_VSIL_CURL_ALLOWED_EXTENSIONS"] += "," + ext
	}
	for k, v := range cfg.Source.GDAL {
		gdalOpts[k] = v
	}
	if err := raster.SetConfig(gdalOpts); err != nil {
		return fmt.Errorf("source.gdal: %w", err)
	}
	return nil
}
