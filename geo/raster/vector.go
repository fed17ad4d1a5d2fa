package raster

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/atomicfs"

	"github.com/lulc/lulc/internal/netwait"
)

// VectorLabels says how a vector layer of labelled features becomes a
// label raster: the field holding each feature's class, the layer (empty:
// the first), whether polygons and lines burn every pixel they touch
// rather than those whose centre they contain, and the codes of text
// classes.
type VectorLabels struct {
	Field      string
	Layer      string
	AllTouched bool
	// Codes maps the field's text values, keyed by TextKey, to class
	// codes; numbers (also written as text) are codes themselves.
	Codes map[string]uint8
}

// IsVector reports whether GDAL opens path as a vector dataset (a
// GeoPackage, GeoJSON, FlatGeobuf, Shapefile, …) and not as a raster.
func IsVector(path string) bool {
	register()
	defer netwait.Track(path)()
	ds, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return false
	}
	defer ds.Close()
	return len(ds.Layers()) > 0
}

// RasterizeLabels burns a vector layer's features onto grid g with GDAL's
// rasterizer (gdal_rasterize): each feature's class code (its Field: a
// whole number 1–255, or text v.Codes maps) into the pixels whose centre
// it contains (every pixel it touches with AllTouched); a point burns the
// pixel it falls in. The layer is reprojected to the grid's CRS. Pixels
// no feature burns are 0 (unlabelled), and so are those of a feature
// whose value is no usable code (CensusLabels counts them); where
// features overlap, the last one wins, as in gdal_rasterize.
func RasterizeLabels(path string, v VectorLabels, g geo.Grid) ([]uint8, error) {
	if v.Field == "" {
		return nil, fmt.Errorf("rasterize %s: no class field given", path)
	}
	// Each pixel gets its feature's FID + 1 from the rasterizer, then
	// the code that lulc's own reading of the field gave that feature:
	// any field type burns, by the same rule as the census counts it.
	codes, _, err := featureCodes(path, v)
	if err != nil {
		return nil, err
	}
	fids := make([]uint32, g.Width*g.Height)
	if err := rasterize(path, v, g, byFID, godal.UInt32, fids); err != nil {
		return nil, err
	}
	return lookupCodes(fids, codes), nil
}

// lookupCodes maps burned FIDs + 1 (0: no feature) to class codes,
// through a table when the FIDs are dense enough for one.
func lookupCodes(fids []uint32, codes map[int64]uint8) []uint8 {
	out := make([]uint8, len(fids))
	top := int64(-1)
	for fid := range codes {
		top = max(top, fid)
	}
	if top >= 1<<24 {
		for i, f := range fids {
			if f != 0 {
				out[i] = codes[int64(f)-1]
			}
		}
		return out
	}
	table := make([]uint8, top+2)
	for fid, c := range codes {
		table[fid+1] = c
	}
	for i, f := range fids {
		if int64(f) < int64(len(table)) {
			out[i] = table[f]
		}
	}
	return out
}

// byFID are the rasterizer's switches that burn each feature of layer
// with its FID + 1, so that 0 stays "no feature" (GeoJSON numbers
// features from 0): OGR's own SQL, whatever the format, for its FID
// special field.
func byFID(layer string) []string {
	return []string{"-a", "lulc_fid", "-dialect", "OGRSQL",
		"-sql", `SELECT FID + 1 AS lulc_fid FROM "` + strings.ReplaceAll(layer, `"`, `""`) + `"`}
}

// RasterizeGroups burns the same features as RasterizeLabels, by the same
// rule, with their group ids instead of their classes: the integer
// attribute field when given, else the feature's FID + 1, so that 0 stays
// "no feature" (GeoJSON numbers features from 0). A split that keeps each
// group on one side (leave-location-out) reads them; where features
// overlap, the feature that wins the label wins the group.
func RasterizeGroups(path string, v VectorLabels, field string, g geo.Grid) ([]uint32, error) {
	buf := make([]uint32, g.Width*g.Height)
	err := rasterize(path, v, g, func(layer string) []string {
		if field != "" {
			return []string{"-a", field}
		}
		return byFID(layer)
	}, godal.UInt32, buf)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// MaxWeight is the largest pixel weight (RasterizeWeights).
const MaxWeight = 255

// RasterizeWeights burns the same features as RasterizeLabels, by the same
// rule, with their weights instead of their classes: the numeric attribute
// field, rounded to the nearest integer (halves away from zero), which
// must lie in 0–MaxWeight. A feature without a value, with a value out of
// range, or a field that is not numeric is an error naming the feature
// (its FID) and the value. Pixels no feature burns are 0; where features
// overlap, the feature that wins the label wins the weight.
func RasterizeWeights(path string, v VectorLabels, field string, g geo.Grid) ([]uint8, error) {
	if field == "" {
		return nil, fmt.Errorf("rasterize %s: no weight field given", path)
	}
	if err := checkWeights(path, v, field); err != nil {
		return nil, err
	}
	buf := make([]float64, g.Width*g.Height)
	if err := rasterize(path, v, g, func(string) []string { return []string{"-a", field} }, godal.Float64, buf); err != nil {
		return nil, err
	}
	out := make([]uint8, len(buf))
	for i, x := range buf {
		r := math.Round(x)
		if !(r >= 0 && r <= MaxWeight) {
			return nil, fmt.Errorf("rasterize %s: field %s burns weight %g; weights are 0–%d", path, field, x, MaxWeight)
		}
		out[i] = uint8(r)
	}
	return out, nil
}

// checkWeights reads every feature's weight (RasterizeWeights) and refuses
// the first that is missing, not a number, or out of range once rounded.
func checkWeights(path string, v VectorLabels, field string) error {
	register()
	defer netwait.Track(path)()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return fmt.Errorf("rasterize %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return err
	}
	var names []string
	for _, l := range vec.Layers() {
		if l.Name() == layer {
			names = slices.Sorted(maps.Keys(layerFields(l)))
		}
	}
	if names == nil {
		return nil // no feature: nothing burns
	}
	if !slices.Contains(names, field) {
		return fmt.Errorf("rasterize %s: layer %s has no weight field %q (fields: %s)", path, layer, field, strings.Join(names, ", "))
	}
	// OGR's own SQL, whatever the format, for each feature's FID beside
	// its weight; first those whose weight is null (godal reads a null
	// field as set).
	quoted, from := `"`+strings.ReplaceAll(field, `"`, `""`)+`"`, ` FROM "`+strings.ReplaceAll(layer, `"`, `""`)+`"`
	for _, where := range []string{" WHERE " + quoted + " IS NULL", ""} {
		rs, err := vec.ExecuteSQL("SELECT FID AS lulc_fid, "+quoted+from+where, godal.OGRSQLDialect())
		if err != nil {
			return fmt.Errorf("rasterize %s: read weights from field %s: %w", path, field, err)
		}
		err = checkWeightRows(path, field, rs, where != "")
		rs.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkWeightRows refuses the first feature of rs (FID as lulc_fid, and
// field) whose weight is missing (every one, when null), not a number, or
// out of range once rounded.
func checkWeightRows(path, field string, rs *godal.ResultSet, null bool) error {
	for f := rs.NextFeature(); f != nil; f = rs.NextFeature() {
		fields := f.Fields()
		fid, w := fields["lulc_fid"].Int(), fields[field]
		f.Close()
		switch {
		case null || !w.IsSet():
			return fmt.Errorf("rasterize %s: feature FID %d has no weight in field %s", path, fid, field)
		case w.Type() != godal.FTInt && w.Type() != godal.FTInt64 && w.Type() != godal.FTReal:
			return fmt.Errorf("rasterize %s: feature FID %d: weight field %s holds %q, not a number", path, fid, field, w.String())
		}
		if x := w.Float(); !(math.Round(x) >= 0 && math.Round(x) <= MaxWeight) {
			return fmt.Errorf("rasterize %s: feature FID %d: weight field %s holds %g; weights are integers 0–%d (rounded)", path, fid, field, x, MaxWeight)
		}
	}
	return nil
}

// layerFields returns a layer's attribute fields by name, from its first
// feature (godal exposes no layer definition); nil for an empty layer.
func layerFields(l godal.Layer) map[string]godal.Field {
	l.ResetReading()
	defer l.ResetReading()
	f := l.NextFeature()
	if f == nil {
		return nil
	}
	defer f.Close()
	return f.Fields()
}

// findLayer returns the name of the layer v names (the first when none).
func findLayer(path string, vec *godal.Dataset, v VectorLabels) (string, error) {
	layers := vec.Layers()
	if len(layers) == 0 {
		return "", fmt.Errorf("rasterize %s: no vector layer", path)
	}
	if v.Layer == "" {
		return layers[0].Name(), nil
	}
	var names []string
	for _, l := range layers {
		if l.Name() == v.Layer {
			return v.Layer, nil
		}
		names = append(names, l.Name())
	}
	return "", fmt.Errorf("rasterize %s: no layer %q (layers: %s)", path, v.Layer, strings.Join(names, ", "))
}

// rasterize burns the layer v names onto g with the value switches (given
// the layer's name) choose, into buf (a []uint32 for dt UInt32, a
// []float64 for Float64).
func rasterize(path string, v VectorLabels, g geo.Grid, value func(layer string) []string, dt godal.DataType, buf any) error {
	register()
	defer netwait.Track(path)()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return fmt.Errorf("rasterize %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return err
	}
	mem, err := godal.Create(godal.Memory, "", 1, dt, g.Width, g.Height)
	if err != nil {
		return fmt.Errorf("rasterize %s: %w", path, err)
	}
	defer mem.Close()
	if err := describe(mem, g, COGOptions{}); err != nil {
		return fmt.Errorf("rasterize %s: %w", path, err)
	}
	switches := value(layer)
	if !slices.Contains(switches, "-sql") {
		switches = append(switches, "-l", layer)
	}
	if v.AllTouched {
		switches = append(switches, "-at")
	}
	if err := mem.RasterizeInto(vec, switches); err != nil {
		return fmt.Errorf("rasterize %s (layer %s, %s): %w", path, layer, strings.Join(switches[:2], " "), err)
	}
	if err := mem.Bands()[0].Read(0, 0, buf, g.Width, g.Height); err != nil {
		return fmt.Errorf("rasterize %s: read back: %w", path, err)
	}
	return nil
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
	feats := make([]string, len(pts))
	for i, p := range pts {
		feats[i] = fmt.Sprintf(`{"type":"Feature","id":%d,"properties":{%q:%d},"geometry":{"type":"Point","coordinates":[%s,%s]}}`,
			i+1, field, p.Class, strconv.FormatFloat(p.X, 'g', -1, 64), strconv.FormatFloat(p.Y, 'g', -1, 64))
	}
	return writeLayer(path, layer, field, epsg, feats)
}

// LabelPolygon is a labelled polygon: its outer ring in a layer's CRS
// (closed: the last vertex repeats the first) and its class as text, ""
// for none (NULL).
type LabelPolygon struct {
	Ring  [][2]float64
	Class string
}

// WritePolygons writes polygons as a GeoPackage of one polygon layer,
// like WritePoints, each feature's class in a text field named field.
func WritePolygons(path, layer, field string, epsg int, polys []LabelPolygon) error {
	feats := make([]string, len(polys))
	for i, p := range polys {
		class := "null"
		if p.Class != "" {
			class = strconv.Quote(p.Class)
		}
		var ring []string
		for _, v := range p.Ring {
			ring = append(ring, "["+strconv.FormatFloat(v[0], 'g', -1, 64)+","+strconv.FormatFloat(v[1], 'g', -1, 64)+"]")
		}
		feats[i] = fmt.Sprintf(`{"type":"Feature","id":%d,"properties":{%q:%s},"geometry":{"type":"Polygon","coordinates":[[%s]]}}`,
			i+1, field, class, strings.Join(ring, ","))
	}
	return writeLayer(path, layer, field, epsg, feats)
}

// writeLayer writes GeoJSON features as a GeoPackage of one layer in
// EPSG:epsg, assembled beside path and renamed into place, with bytes
// that depend only on the arguments.
func writeLayer(path, layer, field string, epsg int, feats []string) error {
	register()
	if layer == "" || field == "" {
		return fmt.Errorf("layer %s: a layer and a field name are required", path)
	}
	// Features go in as GeoJSON text, which GDAL opens in place, and are
	// translated to a GeoPackage, with the option that pins the timestamp
	// set on this thread until the file is closed.
	body := `{"type":"FeatureCollection","features":[` + strings.Join(feats, ",") + "]}"
	// GDAL wants the extension .gpkg even on the temporary file.
	tmp := atomicfs.TempName(path) + ".gpkg"
	os.Remove(tmp)
	err := withThreadConfig("OGR_CURRENT_DATE", "1970-01-01T00:00:00.000Z", func() error {
		src, err := godal.Open(body, godal.VectorOnly())
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
		return fmt.Errorf("layer %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("layer %s: %w", path, err)
	}
	return nil
}

// WriteGroups writes a plane of group ids (RasterizeGroups) as a UInt32
// COG through GDAL's COG driver (lulc's own encoder takes 8 and 16 bits),
// 0 as nodata, overviews by nearest neighbour; staged and renamed like
// WriteCOG.
func WriteGroups(path string, g geo.Grid, ids []uint32, opt COGOptions) error {
	opt.NoData = new(float64)
	if opt.Description == "" {
		opt.Description = "feature groups"
	}
	return writePlane(path, g, godal.UInt32, ids, len(ids), opt)
}

// WriteWeights writes a plane of pixel weights (RasterizeWeights) as a
// UInt8 COG, like WriteGroups but with no nodata: 0 is a weight (never
// drawn).
func WriteWeights(path string, g geo.Grid, weights []uint8, opt COGOptions) error {
	opt.NoData = nil
	if opt.Description == "" {
		opt.Description = "pixel weights"
	}
	return writePlane(path, g, godal.Byte, weights, len(weights), opt)
}

// writePlane writes one band of n values of type dt (buf) on grid g as a
// COG through GDAL's COG driver, overviews by nearest neighbour.
func writePlane(path string, g geo.Grid, dt godal.DataType, buf any, n int, opt COGOptions) error {
	register()
	if n != g.Width*g.Height {
		return fmt.Errorf("write %s: %d values for a %d×%d grid", path, n, g.Width, g.Height)
	}
	mem, err := godal.Create(godal.Memory, "", 1, dt, g.Width, g.Height)
	if err != nil {
		return fmt.Errorf("write %s: create in-memory dataset: %w", path, err)
	}
	defer mem.Close()
	opt.OverviewResampling, opt.Classes = "NEAREST", nil
	if err := describe(mem, g, opt); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := mem.Bands()[0].Write(0, 0, buf, g.Width, g.Height); err != nil {
		return fmt.Errorf("write %s: fill in-memory dataset: %w", path, err)
	}
	return translateCOG(mem, path, opt)
}

// ClassNames reads the names a vector layer's features give their class
// codes: code (v.Field) → name (nameField), from the first feature of
// each code in reading order. Features without a code are skipped; a
// missing field is an error naming the layer's fields.
func ClassNames(path string, v VectorLabels, nameField string) (map[int]string, error) {
	register()
	defer netwait.Track(path)()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return nil, fmt.Errorf("class names %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range vec.Layers() {
		if l.Name() != layer {
			continue
		}
		fields := layerFields(l)
		for _, want := range []string{v.Field, nameField} {
			if _, ok := fields[want]; !ok && fields != nil {
				return nil, fmt.Errorf("class names %s: layer %s has no field %q (fields: %s)", path, layer, want, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
		}
		l.ResetReading()
		for f := l.NextFeature(); f != nil; f = l.NextFeature() {
			fs := f.Fields()
			code, name := fs[v.Field], fs[nameField]
			f.Close()
			if !code.IsSet() {
				continue
			}
			if _, seen := names[int(code.Int())]; !seen {
				names[int(code.Int())] = name.String()
			}
		}
		l.ResetReading()
	}
	return names, nil
}
