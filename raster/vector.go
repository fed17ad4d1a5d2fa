package raster

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/internal/atomicfs"
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
	if v.Field == "" {
		return nil, fmt.Errorf("rasterize %s: no class field given", path)
	}
	buf, err := rasterize(path, v, g, func(string) []string { return []string{"-a", v.Field} })
	if err != nil {
		return nil, err
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

// RasterizeGroups burns the same features as RasterizeLabels, by the same
// rule, with their group ids instead of their classes: the integer
// attribute field when given, else the feature's FID + 1, so that 0 stays
// "no feature" (GeoJSON numbers features from 0). A split that keeps each
// group on one side (leave-location-out) reads them; where features
// overlap, the feature that wins the label wins the group.
func RasterizeGroups(path string, v VectorLabels, field string, g Grid) ([]uint32, error) {
	return rasterize(path, v, g, func(layer string) []string {
		if field != "" {
			return []string{"-a", field}
		}
		// OGR's own SQL, whatever the format, for its FID special field.
		return []string{"-a", "lulc_group", "-dialect", "OGRSQL",
			"-sql", `SELECT FID + 1 AS lulc_group FROM "` + strings.ReplaceAll(layer, `"`, `""`) + `"`}
	})
}

// rasterize burns the layer v names onto g with the value switches (given
// the layer's name) choose, as 32-bit unsigned integers.
func rasterize(path string, v VectorLabels, g Grid, value func(layer string) []string) ([]uint32, error) {
	register()
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
	// 32 bits so that a value out of its range shows instead of wrapping.
	mem, err := godal.Create(godal.Memory, "", 1, godal.UInt32, g.Width, g.Height)
	if err != nil {
		return nil, fmt.Errorf("rasterize %s: %w", path, err)
	}
	defer mem.Close()
	if err := describe(mem, g, COGOptions{}); err != nil {
		return nil, fmt.Errorf("rasterize %s: %w", path, err)
	}
	switches := value(layer)
	if !slices.Contains(switches, "-sql") {
		switches = append(switches, "-l", layer)
	}
	if v.AllTouched {
		switches = append(switches, "-at")
	}
	if err := mem.RasterizeInto(vec, switches); err != nil {
		return nil, fmt.Errorf("rasterize %s (layer %s, %s): %w", path, layer, strings.Join(switches[:2], " "), err)
	}
	buf := make([]uint32, g.Width*g.Height)
	if err := mem.Bands()[0].Read(0, 0, buf, g.Width, g.Height); err != nil {
		return nil, fmt.Errorf("rasterize %s: read back: %w", path, err)
	}
	return buf, nil
}

// LabelPoint is a labelled point: its position in a layer's CRS and its
// class code.
type LabelPoint struct {
	X, Y  float64
	Class uint8
}

// WritePoints writes points as a GeoPackage of one point layer, layer,
// in EPSG:epsg, each feature carrying its class code in an integer field
// named field and numbered from 1 in the order given. The file is
// assembled beside path and renamed into place; its bytes depend only on
// the arguments (GeoPackage's last-change timestamp is pinned to the
// epoch).
func WritePoints(path, layer, field string, epsg int, pts []LabelPoint) error {
	register()
	if layer == "" || field == "" {
		return fmt.Errorf("points %s: a layer and a field name are required", path)
	}
	// Features go in as GeoJSON text, which GDAL opens in place, and are
	// translated to a GeoPackage, with the option that pins the timestamp
	// set on this thread until the file is closed.
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"FeatureCollection","features":[`)
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"Feature","id":%d,"properties":{%q:%d},"geometry":{"type":"Point","coordinates":[%s,%s]}}`,
			i+1, field, p.Class, strconv.FormatFloat(p.X, 'g', -1, 64), strconv.FormatFloat(p.Y, 'g', -1, 64))
	}
	b.WriteString("]}")
	// GDAL wants the extension .gpkg even on the temporary file.
	tmp := atomicfs.TempName(path) + ".gpkg"
	os.Remove(tmp)
	err := withThreadConfig("OGR_CURRENT_DATE", "1970-01-01T00:00:00.000Z", func() error {
		src, err := godal.Open(b.String(), godal.VectorOnly())
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := src.VectorTranslate(tmp, []string{"-f", "GPKG", "-nln", layer, "-a_srs", fmt.Sprintf("EPSG:%d", epsg), "-preserve_fid"})
		if err != nil {
			return err
		}
		return out.Close()
	})
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("points %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("points %s: %w", path, err)
	}
	return nil
}

// WriteGroups writes a plane of group ids (RasterizeGroups) as a UInt32
// COG through GDAL's COG driver (lulc's own encoder takes 8 and 16 bits),
// 0 as nodata, overviews by nearest neighbour; staged and renamed like
// WriteCOG.
func WriteGroups(path string, g Grid, ids []uint32, opt COGOptions) error {
	register()
	if len(ids) != g.Width*g.Height {
		return fmt.Errorf("write %s: %d group ids for a %d×%d grid", path, len(ids), g.Width, g.Height)
	}
	mem, err := godal.Create(godal.Memory, "", 1, godal.UInt32, g.Width, g.Height)
	if err != nil {
		return fmt.Errorf("write %s: create in-memory dataset: %w", path, err)
	}
	defer mem.Close()
	opt.NoData, opt.OverviewResampling, opt.Classes = new(float64), "NEAREST", nil
	if opt.Description == "" {
		opt.Description = "feature groups"
	}
	if err := describe(mem, g, opt); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := mem.Bands()[0].Write(0, 0, ids, g.Width, g.Height); err != nil {
		return fmt.Errorf("write %s: fill in-memory dataset: %w", path, err)
	}
	return translateCOG(mem, path, opt)
}
