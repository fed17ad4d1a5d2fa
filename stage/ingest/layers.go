package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// tileLayers are a tile's layer planes (ingest's layers section), made
// whole before the composite of its windows: each resampled onto the
// tile's grid, scaled to its units, derived (slope, aspect) or reduced
// over dates (a median of backscatter, then decibels) on the host, once,
// so that both engines see the same planes; then encoded in the stack's
// UInt16 encoding through the layer's map (features.Layer). The sinks
// that hold a stack get them whole (LayerSink), after the bands and
// temporal planes the windows bring.
type tileLayers struct {
	planes  [][]uint16 // per layer, the tile's grid, row-major
	records []stage.ManifestLayer
	width   int
	time    time.Duration // the making's, wall
}

// layerInputs are where a tile's layers come from: the STAC items of
// collection layers, or a raster pair's image.
type layerInputs struct {
	items map[string][]catalog.Item // by layer name
	image string                    // a raster pair's image
}

// makeLayers makes the tile's layer planes on grid g, before its windows
// are composited; nil without layers. They are not made beside the
// composite: GDAL 3.6 crashed (SIGSEGV in a window's RasterIO) when the
// layers' warps ran beside the windows' reads, on the GPU host, once in
// eight full-tile runs (docs/benchmarks.md, "Extra layers").
func makeLayers(ctx context.Context, cfg config.IngestConfig, log *slog.Logger, tile string, g geo.Grid, in layerInputs) (*tileLayers, error) {
	if len(cfg.Layers) == 0 {
		return nil, nil
	}
	tl := &tileLayers{width: g.Width}
	t0 := time.Now()
	if err := tl.build(ctx, cfg, log, tile, g, in); err != nil {
		return nil, err
	}
	tl.time = time.Since(t0)
	return tl, nil
}

// took is how long the planes took to make (0 without layers).
func (tl *tileLayers) took() time.Duration {
	if tl == nil {
		return 0
	}
	return tl.time
}

// build makes the tile's layer planes on grid g.
func (tl *tileLayers) build(ctx context.Context, cfg config.IngestConfig, log *slog.Logger, tile string, g geo.Grid, in layerInputs) error {
	values := map[string][]float32{} // the layers' values in their units, for those derived from them
	for i, l := range cfg.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		rec := stage.ManifestLayer{Name: l.Name, Kind: l.Kind(), Resampling: l.Resampling, Scale: l.Scale, Offset: l.Offset, Units: l.Units}
		v, err := layerValues(cfg, l, g, in, values, &rec)
		if err != nil {
			return fmt.Errorf("layers[%d] (%s): %w", i, l.Name, err)
		}
		values[l.Name] = v
		lo, hi, ok := l.LayerRange()
		if !ok {
			if lo, hi, err = userRange(cfg, l, in); err != nil {
				return fmt.Errorf("layers[%d] (%s): %w", i, l.Name, err)
			}
		}
		rec.Range = [2]float64{lo, hi}
		rec.Map = config.LayerMap(lo, hi)
		plane, valid, clamped := encodeLayer(v, lo, hi)
		n := float64(len(v))
		rec.Valid, rec.Clamped = float64(valid)/n, float64(clamped)/n
		if valid == 0 {
			return fmt.Errorf("layers[%d] (%s): no pixel of the tile has a value (the rasters hold only nodata there)", i, l.Name)
		}
		// A derived layer is missing where its source is, and aspect where
		// the ground is flat: only the sources' gaps are news.
		if rec.Valid < 0.99 && l.Derive == "" {
			log.Warn(fmt.Sprintf("tile %s: layer %s has values on %.1f %% of the tile; the rest is missing (NaN) in its features", tile, l.Name, 100*rec.Valid))
		}
		if rec.Clamped > 0.001 {
			log.Warn(fmt.Sprintf("tile %s: layer %s: %.2f %% of the values lie beyond its range [%g, %g] and were clamped to it: widen layers[%d].range", tile, l.Name, 100*rec.Clamped, lo, hi, i))
		}
		tl.planes = append(tl.planes, plane)
		tl.records = append(tl.records, rec)
		log.Debug("layer made", "tile", tile, "layer", l.Name, "s", time.Since(t0).Seconds())
	}
	return nil
}

// layerValues reads or derives one layer's values on grid g, in its units
// (NaN: missing), and records its source in rec.
func layerValues(cfg config.IngestConfig, l config.LayerConfig, g geo.Grid, in layerInputs, done map[string][]float32, rec *stage.ManifestLayer) ([]float32, error) {
	n := g.Width * g.Height
	switch {
	case l.Derive != "":
		rec.Derived = l.Of
		rec.Scale, rec.Offset = 1, 0
		return derive(l.Derive, done[l.Of], g), nil
	case l.Collection != "":
		items, err := tileItems(in.items[l.Name], g)
		if err != nil {
			return nil, err
		}
		if l.Temporal == "" {
			src := raster.LayerSource{Band: 1, NoData: l.NoData}
			for _, it := range items {
				src.Hrefs = append(src.Hrefs, it.Assets[l.Asset].Href)
				rec.Items = append(rec.Items, it.ID)
			}
			rec.Rasters = src.Hrefs
			return readLayer(src, l, g)
		}
		// A layer over time: each date's values, then their median.
		dates := make([][]float32, len(items))
		for k, it := range items {
			src := raster.LayerSource{Hrefs: []string{it.Assets[l.Asset].Href}, Band: 1, NoData: l.NoData}
			if dates[k], err = readLayer(src, l, g); err != nil {
				return nil, err
			}
			rec.Items, rec.Rasters = append(rec.Items, it.ID), append(rec.Rasters, src.Hrefs[0])
		}
		return medianDates(dates, n, l.Units == "db"), nil
	case l.Raster != "":
		rec.Rasters, rec.Band = []string{l.Raster}, l.Band
		return readLayer(raster.LayerSource{Hrefs: []string{l.Raster}, Band: l.Band, NoData: l.NoData}, l, g)
	default:
		// A band of a raster pair's image, on the image's own grid.
		band := slices.Index(cfg.Source.Bands, l.Name) + 1
		nd := l.NoData
		if nd == nil {
			nd = cfg.Source.NoData
		}
		rec.Rasters, rec.Band = []string{in.image}, band
		return readLayer(raster.LayerSource{Hrefs: []string{in.image}, Band: band, NoData: nd}, l, g)
	}
}

// layerStrip is the rows of a layer read at once: strips go to the
// cores, each through its own handle on the rasters. It does not depend
// on the machine, so neither do the values (GDAL's warper approximates
// coordinates along each strip's rows, whole rows of the tile).
const layerStrip = 256

// readLayer reads a layer's rasters onto g, strip by strip on every core,
// and scales them to its units. Rasters that do not overlap the grid are
// an error naming both extents.
func readLayer(src raster.LayerSource, l config.LayerConfig, g geo.Grid) ([]float32, error) {
	v := make([]float32, g.Width*g.Height)
	strips := (g.Height + layerStrip - 1) / layerStrip
	next := make(chan int, strips)
	for k := range strips {
		next <- k
	}
	close(next)
	workers := min(strips, runtime.GOMAXPROCS(0))
	errs := make([]error, workers)
	infos := make([]raster.LayerInfo, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// A handle per worker, for all its strips.
			lr, err := raster.OpenLayer(src)
			if err != nil {
				errs[w] = err
				return
			}
			defer lr.Close()
			infos[w] = lr.Info()
			for k := range next {
				y0 := k * layerStrip
				h := min(layerStrip, g.Height-y0)
				sg := g
				sg.Height = h
				sg.Transform[3] = g.Transform[3] + float64(y0)*g.Transform[5]
				if err := lr.Read(sg, l.Resampling, v[y0*g.Width:(y0+h)*g.Width]); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	info := infos[0]
	if !slices.ContainsFunc(v, func(x float32) bool { return x == x }) {
		b := g.Bounds()
		return nil, fmt.Errorf("%s (EPSG:%d, %.6g, %.6g – %.6g, %.6g) has no value on the tile's grid (EPSG:%d, %.6g, %.6g – %.6g, %.6g): it does not overlap the tile, or holds only nodata there",
			src.Hrefs[0], info.EPSG, info.Bounds[0], info.Bounds[1], info.Bounds[2], info.Bounds[3], g.EPSG, b[0], b[1], b[2], b[3])
	}
	if l.Scale != 1 || l.Offset != 0 {
		parallel(len(v), 4096, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				v[i] = float32(float64(v[i])*l.Scale + l.Offset)
			}
		})
	}
	return v, nil
}

// userRange is the range of a layer of the user's own given without one:
// a raster's minimum and maximum, or an image band's type's span.
func userRange(cfg config.IngestConfig, l config.LayerConfig, in layerInputs) (lo, hi float64, err error) {
	if l.Raster == "" {
		// A band of the pairs' images: one map must serve every pair (the
		// draw's values are plane values), so the range is the band's
		// type's, not one image's statistics.
		info, err := raster.DescribeLayer(raster.LayerSource{Hrefs: []string{in.image}, Band: slices.Index(cfg.Source.Bands, l.Name) + 1})
		if err != nil {
			return 0, 0, err
		}
		r, ok := typeRanges[info.DataType]
		if !ok {
			return 0, 0, fmt.Errorf("a %s band needs range: [min, max] in its units (one map serves every image)", info.DataType)
		}
		lo, hi = r[0], r[1]
	} else if lo, hi, err = raster.LayerStats(raster.LayerSource{Hrefs: []string{l.Raster}, Band: l.Band, NoData: l.NoData}); err != nil {
		return 0, 0, err
	}
	lo, hi = lo*l.Scale+l.Offset, hi*l.Scale+l.Offset
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi-lo < 1e-6 {
		hi = lo + 1
	}
	return lo, hi, nil
}

// typeRanges are the ranges of the integer types a band of an image may
// have.
var typeRanges = map[string][2]float64{"Byte": {0, 255}, "Int8": {-128, 127}, "UInt16": {0, 65535}, "Int16": {-32768, 32767}}

// tileItems are the items whose bounding box meets the tile's.
func tileItems(items []catalog.Item, g geo.Grid) ([]catalog.Item, error) {
	b, err := reproject(g.Bounds(), g.EPSG, 4326)
	if err != nil {
		return nil, err
	}
	var out []catalog.Item
	for _, it := range items {
		if it.BBox[0] <= b[2] && it.BBox[2] >= b[0] && it.BBox[1] <= b[3] && it.BBox[3] >= b[1] {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of its %d items overlaps the tile (lon/lat %.4f, %.4f – %.4f, %.4f)", len(items), b[0], b[1], b[2], b[3])
	}
	return out, nil
}

// medianDates is each pixel's median over the dates' values (NaN: not
// counted; an even count takes the mean of the middle two), in decibels
// (10·log10, NaN for a power ≤ 0) when db is set.
func medianDates(dates [][]float32, n int, db bool) []float32 {
	out := make([]float32, n)
	parallel(n, 4096, func(lo, hi int) {
		vals := make([]float64, 0, len(dates))
		for i := lo; i < hi; i++ {
			vals = vals[:0]
			for _, d := range dates {
				if v := d[i]; v == v {
					// Insertion: a handful of dates.
					k := len(vals)
					vals = append(vals, float64(v))
					for ; k > 0 && vals[k-1] > float64(v); k-- {
						vals[k] = vals[k-1]
					}
					vals[k] = float64(v)
				}
			}
			if len(vals) == 0 {
				out[i] = float32(math.NaN())
				continue
			}
			m := vals[len(vals)/2]
			if len(vals)%2 == 0 {
				m = (vals[len(vals)/2-1] + m) / 2
			}
			if db {
				if m <= 0 {
					out[i] = float32(math.NaN())
					continue
				}
				m = 10 * math.Log10(m)
			}
			out[i] = float32(m)
		}
	})
	return out
}

// derive computes slope or aspect, in degrees, of the elevation z on grid
// g by Horn's 3×3 finite differences (edges repeat their outer pixels; a
// missing neighbour leaves the pixel missing). Aspect is the compass
// direction the slope faces (0 north, 90 east), missing where the ground
// is flat.
func derive(kind string, z []float32, g geo.Grid) []float32 {
	w, h := g.Width, g.Height
	dx, dy := math.Abs(g.Transform[1]), math.Abs(g.Transform[5])
	out := make([]float32, w*h)
	parallel(h, 1, func(lo, hi int) {
		for y := lo; y < hi; y++ {
			up, mid, down := z[max(0, y-1)*w:][:w], z[y*w:][:w], z[min(h-1, y+1)*w:][:w]
			for x := range w {
				xl, xr := max(0, x-1), min(w-1, x+1)
				a, b, c := float64(up[xl]), float64(up[x]), float64(up[xr])
				d, f := float64(mid[xl]), float64(mid[xr])
				gg, hh, ii := float64(down[xl]), float64(down[x]), float64(down[xr])
				// East and north gradients (rows run south).
				ex := ((c + 2*f + ii) - (a + 2*d + gg)) / (8 * dx)
				ny := ((a + 2*b + c) - (gg + 2*hh + ii)) / (8 * dy)
				var v float64
				switch {
				case kind == "slope":
					v = math.Atan(math.Sqrt(ex*ex+ny*ny)) * (180 / math.Pi)
				case ex == 0 && ny == 0:
					v = math.NaN()
				default:
					// Downhill is −gradient; its compass bearing.
					v = math.Atan2(-ex, -ny) * (180 / math.Pi)
					if v < 0 {
						v += 360
					}
				}
				out[y*w+x] = float32(v) // NaN when a neighbour is
			}
		}
	})
	return out
}

// encodeLayer puts a layer's values into the stack's encoding through its
// map for the range [lo, hi]: plane p = (v − lo) / ((hi − lo) / 4),
// clamped to [0, 4], DN = round((p − StackOffset) / StackScale); DN 0
// where the value is missing. It counts the values and those clamped.
func encodeLayer(v []float32, lo, hi float64) (plane []uint16, valid, clamped int64) {
	plane = make([]uint16, len(v))
	span := (hi - lo) / 4
	var mu sync.Mutex
	parallel(len(v), 4096, func(a, b int) {
		var nv, nc int64
		for i := a; i < b; i++ {
			x := float64(v[i])
			if x != x {
				continue
			}
			nv++
			p := (x - lo) / span
			if p < 0 || p > 4 {
				nc++
				p = min(4, max(0, p))
			}
			plane[i] = uint16(math.Round((p - stage.StackOffset) / stage.StackScale))
		}
		mu.Lock()
		valid, clamped = valid+nv, clamped+nc
		mu.Unlock()
	})
	return plane, valid, clamped
}

// parallel runs f over [0, n) split into a range per core, each of at
// least least items (rows: 1; pixels: a few thousand, not worth a
// goroutine below).
func parallel(n, least int, f func(lo, hi int)) {
	parts := max(1, min(runtime.GOMAXPROCS(0), n/least))
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { f(k*n/parts, (k+1)*n/parts) })
	}
	wg.Wait()
}

// release drops the planes once the windows have them.
func (tl *tileLayers) release() {
	if tl != nil {
		tl.planes = nil
	}
}

// manifest is the layers' record for the tile's manifest.
func (tl *tileLayers) manifest() []stage.ManifestLayer {
	if tl == nil {
		return nil
	}
	return tl.records
}

// LayerSink is a tile sink that takes the stack's layer planes whole,
// apart from the windows (which carry the planes before them): the stack
// in memory, its COG writers, the device's mirror.
type LayerSink interface {
	WriteLayers(first int, planes [][]uint16) error
}

// writeTo hands the planes to the sinks that take them, as the stack's
// planes from first on.
func (tl *tileLayers) writeTo(sinks []TileSink, first int) error {
	if tl == nil {
		return nil
	}
	for _, s := range sinks {
		if ls, ok := s.(LayerSink); ok {
			if err := ls.WriteLayers(first, tl.planes); err != nil {
				return err
			}
		}
	}
	return nil
}
