package raster

import (
	"fmt"
	"math"
	"strings"

	"github.com/airbusgeo/godal"
)

// VectorLabels says how a vector layer of labelled features becomes a
// label raster: the field holding each feature's class code, the layer
// (empty: the first), and whether polygons and lines burn every pixel they
// touch rather than those whose centre they contain.
type VectorLabels struct {
	Field      string
	Layer      string
	AllTouched bool
}

// IsVector reports whether GDAL opens path as a vector dataset (a
// GeoPackage, GeoJSON, FlatGeobuf, Shapefile, …) and not as a raster.
func IsVector(path string) bool {
	register()
	ds, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return false
	}
	defer ds.Close()
	return len(ds.Layers()) > 0
}

// RasterizeLabels burns a vector layer's features onto grid g with GDAL's
// rasterizer (gdal_rasterize): each feature's class code (its Field, an
// integer 1–255) into the pixels whose centre it contains (every pixel it
// touches with AllTouched); a point burns the pixel it falls in. The
// layer is reprojected to the grid's CRS. Pixels no feature burns are 0
// (unlabelled); where features overlap, the last one wins, as in
// gdal_rasterize. A code outside 1–255 is an error naming it.
func RasterizeLabels(path string, v VectorLabels, g Grid) ([]uint8, error) {
	register()
	if v.Field == "" {
		return nil, fmt.Errorf("rasterize %s: no class field given", path)
	}
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return nil, fmt.Errorf("rasterize %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layers := vec.Layers()
	if len(layers) == 0 {
		return nil, fmt.Errorf("rasterize %s: no vector layer", path)
	}
	layer := layers[0].Name()
	if v.Layer != "" {
		layer = v.Layer
		found := false
		var names []string
		for _, l := range layers {
			names = append(names, l.Name())
			found = found || l.Name() == v.Layer
		}
		if !found {
			return nil, fmt.Errorf("rasterize %s: no layer %q (layers: %s)", path, v.Layer, strings.Join(names, ", "))
		}
	}
	// UInt16 so that a code above 255 shows instead of wrapping.
	mem, err := godal.Create(godal.Memory, "", 1, godal.UInt16, g.Width, g.Height)
	if err != nil {
		return nil, fmt.Errorf("rasterize %s: %w", path, err)
	}
	defer mem.Close()
	if err := describe(mem, g, COGOptions{}); err != nil {
		return nil, fmt.Errorf("rasterize %s: %w", path, err)
	}
	switches := []string{"-a", v.Field, "-l", layer}
	if v.AllTouched {
		switches = append(switches, "-at")
	}
	if err := mem.RasterizeInto(vec, switches); err != nil {
		return nil, fmt.Errorf("rasterize %s (layer %s, field %s): %w", path, layer, v.Field, err)
	}
	buf := make([]uint16, g.Width*g.Height)
	if err := mem.Bands()[0].Read(0, 0, buf, g.Width, g.Height); err != nil {
		return nil, fmt.Errorf("rasterize %s: read back: %w", path, err)
	}
	out := make([]uint8, len(buf))
	for i, c := range buf {
		if c > math.MaxUint8 {
			return nil, fmt.Errorf("rasterize %s: field %s holds class code %d; label codes are 1–255", path, v.Field, c)
		}
		out[i] = uint8(c)
	}
	return out, nil
}
