package ingest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/geo/zarr"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// ZarrStackDir is a tile's stack as a Zarr v3 store (output.stack: zarr).
const ZarrStackDir = "stack.zarr"

// ZarrStack writes a tile's stack as a Zarr v3 store, stack.zarr: an
// array per plane (named by config.ZarrName), labels and valid_count, in
// the stack's UInt16 and UInt8 encodings, with the coordinates and
// attributes xarray decodes into a georeferenced cube (docs/ingest.md,
// Zarr). It is a tile sink (the windows, from any worker) and a layer
// sink; Close records what the manifest knows (the layers' maps, the
// label scheme) and renames the store into place.
type ZarrStack struct {
	w      *zarr.Writer
	planes []string
	grid   geo.Grid
}

// NewZarrStack starts the store of a tile in dir, on grid, for the
// config's planes. With background, its chunks are compressed by
// goroutines of its own rather than in Write (zarr.Options.Background).
func NewZarrStack(dir string, grid geo.Grid, cfg config.IngestConfig, background bool) (*ZarrStack, error) {
	planes := cfg.StackPlanes()
	if err := config.CheckZarrNames(planes); err != nil {
		return nil, fmt.Errorf("zarr stack: %w", err)
	}
	wkt, err := raster.CRSWKT(grid.EPSG)
	if err != nil {
		return nil, fmt.Errorf("zarr stack: %w", err)
	}
	arrays := make([]string, len(planes))
	for i, p := range planes {
		arrays[i] = config.ZarrName(p)
	}
	t := grid.Transform
	attrs := map[string]any{
		"title":       "lulc analysis-ready stack",
		"Conventions": "CF-1.8",
		"proj:code":   fmt.Sprintf("EPSG:%d", grid.EPSG),
		// The affine transform as rasterio and GeoZarr's spatial
		// convention write it: x = a·col + b·row + c, y = d·col + e·row + f.
		"spatial:transform":  []float64{t[1], t[2], t[0], t[4], t[5], t[3]},
		"spatial:dimensions": []string{"y", "x"},
		"spatial:shape":      []int{grid.Height, grid.Width},
		"lulc:planes":        planes,
		"lulc:arrays":        arrays,
	}
	// A store already in a tile's directory is an interrupted run's whose
	// manifest was never written (callers redo only such tiles): its
	// files are not the ones the manifest will list, so it goes.
	path := filepath.Join(dir, ZarrStackDir)
	if err := os.RemoveAll(path); err != nil {
		return nil, fmt.Errorf("zarr stack: %w", err)
	}
	opt := zarr.Options{}
	if background {
		// Up to 1.5 GiB of raw chunks wait for the compressors (768 of
		// 1024² UInt16): a full tile's composite (2 s on a GPU) then runs
		// at its own pace and the compression overlaps what follows it
		// (the prediction stream), where a queue of a few chunks a
		// compressor held the composite back to the compressors' pace
		// (4.5 s, measured on the H200 host).
		opt.Background, opt.Queue = runtime.GOMAXPROCS(0), 768
	}
	w, err := zarr.Create(path, grid.Width, grid.Height, attrs, opt)
	if err != nil {
		return nil, err
	}
	z := &ZarrStack{w: w, planes: planes, grid: grid}
	if err := z.start(wkt); err != nil {
		w.Abort()
		return nil, err
	}
	return z, nil
}

// start adds the arrays: the planes, labels, counts, the pixel centres'
// coordinates and the grid mapping.
func (z *ZarrStack) start(wkt string) error {
	for _, p := range z.planes {
		if err := z.w.Grid(config.ZarrName(p), zarr.Uint16, 0, nil); err != nil {
			return err
		}
	}
	if err := z.w.Grid("labels", zarr.Uint8, 0, nil); err != nil {
		return err
	}
	if err := z.w.Grid("valid_count", zarr.Uint8, 0, nil); err != nil {
		return err
	}
	t := z.grid.Transform
	xs, ys := make([]float64, z.grid.Width), make([]float64, z.grid.Height)
	for i := range xs {
		xs[i] = t[0] + (float64(i)+0.5)*t[1]
	}
	for i := range ys {
		ys[i] = t[3] + (float64(i)+0.5)*t[5]
	}
	if err := z.w.Whole("x", []int{len(xs)}, []string{"x"}, xs, 0, map[string]any{
		"standard_name": "projection_x_coordinate", "long_name": "x coordinate of the pixel centre", "units": "m", "axis": "X",
	}); err != nil {
		return err
	}
	if err := z.w.Whole("y", []int{len(ys)}, []string{"y"}, ys, 0, map[string]any{
		"standard_name": "projection_y_coordinate", "long_name": "y coordinate of the pixel centre", "units": "m", "axis": "Y",
	}); err != nil {
		return err
	}
	// The CF grid mapping, as rioxarray and odc-geo read it: crs_wkt
	// (CF), spatial_ref (GDAL's name) and GDAL's GeoTransform.
	return z.w.Whole("spatial_ref", nil, nil, []int32{}, 0, map[string]any{
		"crs_wkt":     wkt,
		"spatial_ref": wkt,
		"GeoTransform": strings.Join([]string{fmt.Sprint(t[0]), fmt.Sprint(t[1]), fmt.Sprint(t[2]),
			fmt.Sprint(t[3]), fmt.Sprint(t[4]), fmt.Sprint(t[5])}, " "),
	})
}

// Write stores a window of every stack plane, the counts and the labels.
func (z *ZarrStack) Write(x, y, w, h int, stack [][]uint16, count, labels []uint8) error {
	for i, b := range stack {
		if err := z.w.Write(config.ZarrName(z.planes[i]), x, y, w, h, b); err != nil {
			return err
		}
	}
	if err := z.w.Write("valid_count", x, y, w, h, count); err != nil {
		return err
	}
	return z.w.Write("labels", x, y, w, h, labels)
}

// WriteLayers stores the layer planes, whole, from plane first on.
func (z *ZarrStack) WriteLayers(first int, planes [][]uint16) error {
	for k, p := range planes {
		if err := z.w.Write(config.ZarrName(z.planes[first+k]), 0, 0, z.grid.Width, z.grid.Height, p); err != nil {
			return err
		}
	}
	return nil
}

// Abort removes the staged store.
func (z *ZarrStack) Abort() { z.w.Abort() }

// Close gives each array the attributes the tile's manifest decides (how
// its values decode, the labels' classes), renames the store into place
// and returns its files' checksums, by path in the tile's directory, for
// the manifest.
func (z *ZarrStack) Close(m stage.Manifest) (map[string]stage.ManifestOutput, error) {
	for _, p := range z.planes {
		if err := z.w.SetAttributes(config.ZarrName(p), planeAttrs(p, m)); err != nil {
			z.w.Abort()
			return nil, err
		}
	}
	labels := map[string]any{"long_name": "reference labels", "_FillValue": 0, "grid_mapping": "spatial_ref", "coordinates": "spatial_ref"}
	if s, err := m.LabelScheme.Scheme(); err == nil && s != nil {
		var values []int
		var meanings []string
		var classes []map[string]any
		for _, c := range s.Classes {
			values = append(values, int(c.Code))
			// CF's flag_meanings are blank-separated words.
			meanings = append(meanings, strings.Join(strings.Fields(c.Name), "_"))
			classes = append(classes, map[string]any{"value": int(c.Code), "name": c.Name,
				"color_hint": fmt.Sprintf("%02x%02x%02x", c.Color.R, c.Color.G, c.Color.B)})
		}
		labels["flag_values"], labels["flag_meanings"], labels["classification:classes"] = values, strings.Join(meanings, " "), classes
		labels["lulc:scheme"] = s.Name
	}
	if err := z.w.SetAttributes("labels", labels); err != nil {
		z.w.Abort()
		return nil, err
	}
	if err := z.w.SetAttributes("valid_count", map[string]any{"long_name": "valid observations per pixel", "grid_mapping": "spatial_ref", "coordinates": "spatial_ref"}); err != nil {
		z.w.Abort()
		return nil, err
	}
	files, err := z.w.Close()
	if err != nil {
		return nil, err
	}
	out := map[string]stage.ManifestOutput{}
	for _, f := range files {
		p := ZarrStackDir + "/" + f.Path
		out[p] = stage.ManifestOutput{File: p, BLAKE3: f.BLAKE3, Size: f.Size}
	}
	return out, nil
}

// planeAttrs are a plane's CF attributes: its DN decodes to reflectance
// (bands and temporal planes) or to the layer's units through
// scale_factor and add_offset, 0 marking no value.
func planeAttrs(plane string, m stage.Manifest) map[string]any {
	a := map[string]any{"long_name": plane, "_FillValue": 0, "grid_mapping": "spatial_ref", "coordinates": "spatial_ref",
		"scale_factor": m.Scale, "add_offset": m.Offset, "units": "1"}
	if i := slices.IndexFunc(m.Layers, func(l stage.ManifestLayer) bool { return l.Name == plane }); i >= 0 {
		l := m.Layers[i]
		// value = plane × A + B with plane = DN × scale + offset: lulc
		// rounds each step to float32, which the CF pair, in float64,
		// matches to within float32's precision.
		as, ao := float64(l.Map.Scale), float64(l.Map.Offset)
		a["scale_factor"], a["add_offset"] = m.Scale*as, m.Offset*as+ao
		a["units"] = l.Units
		a["lulc:layer"] = l.Kind
		if l.Units == "" {
			delete(a, "units")
		}
	} else if _, err := features.LookupBand(plane); err == nil {
		// A spectral band's median; temporal planes may be of indices.
		a["standard_name"] = "surface_bidirectional_reflectance"
	}
	return a
}

// StackWriters write a tile's stack in the formats asked for: the COGs
// (TileWriters) and the Zarr store (ZarrStack), either or both.
type StackWriters struct {
	cog  *TileWriters
	zarr *ZarrStack
}

// NewStackWriters starts a tile's stack writers in dir; early and gdalCOG
// are the COGs' (NewTileWriters). Without early (lulc run, where the
// windows are the critical path and the COGs are encoded after them), the
// Zarr store's chunks are compressed in the background too.
func NewStackWriters(dir string, grid geo.Grid, cfg config.IngestConfig, formats config.StackFormats, classes *landcover.Scheme, early, gdalCOG bool) (*StackWriters, error) {
	s := &StackWriters{}
	var err error
	if formats.COG() {
		if s.cog, err = NewTileWriters(dir, grid, cfg, classes, early, gdalCOG); err != nil {
			return nil, err
		}
	}
	if formats.Zarr() {
		if s.zarr, err = NewZarrStack(dir, grid, cfg, !early); err != nil {
			s.Abort()
			return nil, err
		}
	}
	return s, nil
}

// Sinks are the writers as tile sinks.
func (s *StackWriters) Sinks() []TileSink {
	var out []TileSink
	if s.cog != nil {
		out = append(out, s.cog)
	}
	if s.zarr != nil {
		out = append(out, s.zarr)
	}
	return out
}

// Abort removes what the writers staged.
func (s *StackWriters) Abort() {
	if s.cog != nil {
		s.cog.Abort()
	}
	if s.zarr != nil {
		s.zarr.Abort()
	}
}

// CloseCOG encodes the COGs (the Zarr store's chunks were compressed as
// the windows came); on failure everything staged is removed.
func (s *StackWriters) CloseCOG() error {
	if s.cog == nil {
		return nil
	}
	if err := s.cog.Close(); err != nil {
		s.Abort()
		return err
	}
	return nil
}

// Close finishes the Zarr store with the manifest's attributes and
// returns the checksums of every file the writers hashed as they wrote,
// for WriteTileManifest. CloseCOG comes first.
func (s *StackWriters) Close(m stage.Manifest) (map[string]stage.ManifestOutput, error) {
	known := map[string]stage.ManifestOutput{}
	if s.cog != nil {
		maps.Copy(known, s.cog.sums())
	}
	if s.zarr != nil {
		files, err := s.zarr.Close(m)
		if err != nil {
			return nil, err
		}
		maps.Copy(known, files)
	}
	return known, nil
}
