package raster

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"
	"github.com/lulc/lulc/geo"
)

const sloveniaDir = "../../../shared/data/eolearn-slovenia-testpatch"

// TestRasterizeLabelsMatchesReference burns the real Slovenian land-use
// polygons (LULC.gpkg, field LULC_ID) onto the grid of their reference
// rasterisation (LULC.tif, eo-learn's, equal to gdal_rasterize's centre
// rule): every pixel equal. With all-touched, at least as many pixels
// are labelled.
func TestRasterizeLabelsMatchesReference(t *testing.T) {
	gpkg := filepath.Join(sloveniaDir, "LULC.gpkg")
	if _, err := os.Stat(gpkg); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	if !IsVector(gpkg) || IsVector(filepath.Join(sloveniaDir, "LULC.tif")) {
		t.Fatal("IsVector does not tell the GeoPackage from the GeoTIFF")
	}
	ref, g, err := ReadBand[uint16](filepath.Join(sloveniaDir, "LULC.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The reference's CRS carries no EPSG code; the patch is in UTM 33N
	// (../shared/data/README.md), as is the GeoPackage.
	if g.EPSG == 0 {
		g.EPSG = 32633
	}
	got, err := RasterizeLabels(gpkg, VectorLabels{Field: "LULC_ID"}, g)
	if err != nil {
		t.Fatal(err)
	}
	diff, labelled := 0, 0
	for i, v := range ref {
		if uint16(got[i]) != v {
			diff++
		}
		if got[i] != 0 {
			labelled++
		}
	}
	if diff != 0 || labelled == 0 {
		t.Errorf("%d of %d pixels differ from LULC.tif (%d labelled)", diff, len(ref), labelled)
	}
	touched, err := RasterizeLabels(gpkg, VectorLabels{Field: "LULC_ID", AllTouched: true}, g)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range touched {
		if v != 0 {
			n++
		}
	}
	if n < labelled {
		t.Errorf("all-touched labels %d pixels, the centre rule %d", n, labelled)
	}
	if _, err := RasterizeLabels(gpkg, VectorLabels{Field: "LULC_ID", Layer: "nope"}, g); err == nil || !strings.Contains(err.Error(), "no layer") {
		t.Errorf("a missing layer: %v", err)
	}
	if _, err := RasterizeLabels(gpkg, VectorLabels{Field: "NOPE"}, g); err == nil {
		t.Error("a missing field was accepted")
	}
}

// TestRasterizeLabelsReprojects burns the same polygons from a GeoJSON in
// longitude and latitude: the layer is reprojected onto the UTM grid, and
// all but a sliver of edge pixels agree with the reference.
func TestRasterizeLabelsReprojects(t *testing.T) {
	gpkg := filepath.Join(sloveniaDir, "LULC.gpkg")
	if _, err := os.Stat(gpkg); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	register()
	src, err := godal.Open(gpkg, godal.VectorOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	geo := filepath.Join(t.TempDir(), "lulc.geojson")
	out, err := src.VectorTranslate(geo, []string{"-f", "GeoJSON", "-t_srs", "EPSG:4326"})
	if err != nil {
		t.Fatal(err)
	}
	out.Close()
	ref, g, err := ReadBand[uint16](filepath.Join(sloveniaDir, "LULC.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	g.EPSG = 32633
	got, err := RasterizeLabels(geo, VectorLabels{Field: "LULC_ID"}, g)
	if err != nil {
		t.Fatal(err)
	}
	diff := 0
	for i, v := range ref {
		if uint16(got[i]) != v {
			diff++
		}
	}
	if diff > len(ref)/1000 {
		t.Errorf("%d of %d pixels differ from LULC.tif after reprojection", diff, len(ref))
	}
}

// TestRasterizePoints burns a point layer written by WritePoints: a point
// labels the one pixel that contains it, wherever in the pixel it lies;
// of two points in a pixel the later wins; points off the grid label
// nothing; a point on pixel edges goes to the pixel right of and below
// the edges (GDAL's rasterizer floors the pixel coordinates); points in
// longitude and latitude are reprojected onto the grid. The file's bytes
// depend only on the points.
func TestRasterizePoints(t *testing.T) {
	g := geo.Grid{EPSG: 32631, Width: 20, Height: 10, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	at := func(col, row, dx, dy float64) (float64, float64) { return 500000 + 10*col + dx, 4000000 - 10*row - dy }
	var pts []LabelPoint
	add := func(col, row, dx, dy float64, class uint8) {
		x, y := at(col, row, dx, dy)
		pts = append(pts, LabelPoint{X: x, Y: y, Class: class})
	}
	add(3, 2, 5, 5, 10)        // a pixel's centre
	add(5, 5, 9.9, 9.9, 20)    // near its lower right corner
	add(7, 1, 0.1, 0.1, 30)    // near its upper left corner…
	add(7, 1, 5, 5, 40)        // …then another point in the same pixel
	add(-1, 4, 5, 5, 50)       // left of the grid
	add(3, 10, 5, 5, 60)       // below it
	add(10, 4, 0, 0, 70)       // the corner of pixels (9–10, 3–4)
	add(19, 9, 9.99, 9.99, 80) // the grid's last pixel
	dir := t.TempDir()
	path := filepath.Join(dir, "points.gpkg")
	if err := WritePoints(path, "points", "class", g.EPSG, pts); err != nil {
		t.Fatal(err)
	}
	want := make([]uint8, g.Width*g.Height)
	want[2*20+3], want[5*20+5], want[1*20+7], want[4*20+10], want[9*20+19] = 10, 20, 40, 70, 80
	got, err := RasterizeLabels(path, VectorLabels{Field: "class"}, g)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pixel (%d, %d): label %d, want %d", i%g.Width, i/g.Width, got[i], want[i])
		}
	}
	// All-touched changes nothing for points.
	if touched, err := RasterizeLabels(path, VectorLabels{Field: "class", AllTouched: true}, g); err != nil || string(touched) != string(got) {
		t.Errorf("all-touched points differ (%v)", err)
	}

	// The same points in longitude and latitude (centres only, off the
	// edges): the same pixels.
	tr, err := NewTransformer(g.EPSG, 4326)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var centres []LabelPoint
	wantGeo := make([]uint8, len(want))
	for _, p := range [][3]int{{3, 2, 10}, {5, 5, 20}, {12, 7, 30}, {0, 0, 40}} {
		x, y := at(float64(p[0]), float64(p[1]), 5, 5)
		xs, ys := []float64{x}, []float64{y}
		if err := tr.Transform(xs, ys); err != nil {
			t.Fatal(err)
		}
		// EPSG:4326 in GDAL's traditional GIS order: longitude first.
		centres = append(centres, LabelPoint{X: xs[0], Y: ys[0], Class: uint8(p[2])})
		wantGeo[p[1]*g.Width+p[0]] = uint8(p[2])
	}
	geo := filepath.Join(dir, "lonlat.gpkg")
	if err := WritePoints(geo, "field survey", "code", 4326, centres); err != nil {
		t.Fatal(err)
	}
	if got, err := RasterizeLabels(geo, VectorLabels{Field: "code", Layer: "field survey"}, g); err != nil || string(got) != string(wantGeo) {
		t.Errorf("points in lon/lat: %v (%v)", got, err)
	}

	// Written again: the same bytes.
	again := filepath.Join(dir, "again.gpkg")
	if err := WritePoints(again, "points", "class", g.EPSG, pts); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(again)
	if len(a) == 0 || string(a) != string(b) {
		t.Error("WritePoints gave other bytes for the same points")
	}
	if err := WritePoints(filepath.Join(dir, "x.gpkg"), "", "class", g.EPSG, pts); err == nil {
		t.Error("a layer without a name was accepted")
	}
}

// TestRasterizeGroups burns the Slovenian polygons' group ids: every
// labelled pixel has one, a group holds one class (a polygon has one),
// the FID groups and those of the unique attribute "index" are the same
// partition of the pixels, and the points of a layer numbered from FID 0
// get groups from 1.
func TestRasterizeGroups(t *testing.T) {
	gpkg := filepath.Join(sloveniaDir, "LULC.gpkg")
	if _, err := os.Stat(gpkg); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	_, g, err := ReadBand[uint16](filepath.Join(sloveniaDir, "LULC.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	g.EPSG = 32633
	v := VectorLabels{Field: "LULC_ID"}
	labels, err := RasterizeLabels(gpkg, v, g)
	if err != nil {
		t.Fatal(err)
	}
	byFID, err := RasterizeGroups(gpkg, v, "", g)
	if err != nil {
		t.Fatal(err)
	}
	byIndex, err := RasterizeGroups(gpkg, v, "index", g)
	if err != nil {
		t.Fatal(err)
	}
	class := map[uint32]uint8{}
	pair := map[uint32]uint32{}
	back := map[uint32]uint32{}
	for i, gid := range byFID {
		if gid == 0 {
			t.Fatalf("pixel %d (label %d) has no group", i, labels[i])
		}
		if c, ok := class[gid]; ok && c != labels[i] {
			t.Fatalf("group %d holds classes %d and %d", gid, c, labels[i])
		}
		class[gid] = labels[i]
		if p, ok := pair[gid]; ok && p != byIndex[i] || back[byIndex[i]] != 0 && back[byIndex[i]] != gid {
			t.Fatalf("pixel %d: FID group %d, index group %d: not the same partition", i, gid, byIndex[i])
		}
		pair[gid], back[byIndex[i]] = byIndex[i], gid
	}
	if len(class) < 20 {
		t.Errorf("%d groups", len(class))
	}

	pts := filepath.Join(t.TempDir(), "points.geojson")
	body := `{"type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32631"}}, "features": [
 {"type": "Feature", "properties": {"c": 3}, "geometry": {"type": "Point", "coordinates": [500005, 3999995]}},
 {"type": "Feature", "properties": {"c": 4}, "geometry": {"type": "Point", "coordinates": [500015, 3999995]}}]}`
	if err := os.WriteFile(pts, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	small := geo.Grid{EPSG: 32631, Width: 3, Height: 1, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	got, err := RasterizeGroups(pts, VectorLabels{Field: "c"}, "", small)
	if err != nil || !slices.Equal(got, []uint32{1, 2, 0}) {
		t.Errorf("groups of points from FID 0: %v (%v)", got, err)
	}
}

// TestRasterizeWeights burns points' weights (rounded, halves away from
// zero), onto the pixels their labels burn, and refuses weights that are
// missing, not numbers, or outside 0–255 once rounded, naming the feature
// and the value.
func TestRasterizeWeights(t *testing.T) {
	dir := t.TempDir()
	layer := func(name string, weights ...string) string {
		var feats []string
		for i, w := range weights {
			feats = append(feats, fmt.Sprintf(`{"type": "Feature", "properties": {"c": 3, "w": %s}, "geometry": {"type": "Point", "coordinates": [%d, 3999995]}}`, w, 500005+10*i))
		}
		path := filepath.Join(dir, name+".geojson")
		body := `{"type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32631"}}, "features": [` + strings.Join(feats, ",\n") + `]}`
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	g := geo.Grid{EPSG: 32631, Width: 7, Height: 1, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	v := VectorLabels{Field: "c"}
	good := layer("good", "1", "2.5", "0", "255", "254.6", "0.4")
	got, err := RasterizeWeights(good, v, "w", g)
	if err != nil || !slices.Equal(got, []uint8{1, 3, 0, 255, 255, 0, 0}) {
		t.Errorf("weights %v (%v)", got, err)
	}
	// A layer whose weights are integers burns them as they are.
	ints := layer("ints", "7", "1")
	if got, err := RasterizeWeights(ints, v, "w", g); err != nil || !slices.Equal(got, []uint8{7, 1, 0, 0, 0, 0, 0}) {
		t.Errorf("integer weights %v (%v)", got, err)
	}
	for _, c := range []struct {
		weights []string
		want    string
	}{
		{[]string{"1", "-1"}, "feature FID 1: weight field w holds -1;"},
		{[]string{"256", "1"}, "feature FID 0: weight field w holds 256;"},
		{[]string{"3", "2", "255.5"}, "feature FID 2: weight field w holds 255.5;"},
		{[]string{"3", "null"}, "feature FID 1 has no weight in field w"},
		{[]string{`"heavy"`}, `feature FID 0: weight field w holds "heavy", not a number`},
	} {
		path := layer("bad", c.weights...)
		if _, err := RasterizeWeights(path, v, "w", g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("weights %v: %v, want an error with %q", c.weights, err, c.want)
		}
	}
	if _, err := RasterizeWeights(good, v, "weight", g); err == nil || !strings.Contains(err.Error(), `no weight field "weight" (fields: c, w)`) {
		t.Errorf("a missing field: %v", err)
	}

	// Written and read back: the same bytes, no nodata.
	out := filepath.Join(dir, "weights.tif")
	if err := WriteWeights(out, g, got, COGOptions{Compress: "DEFLATE", BlockSize: 256}); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadBand[uint8](out, 1)
	if err != nil || !slices.Equal(back, got) {
		t.Errorf("weights.tif reads back %v (%v)", back, err)
	}
}

// TestClassNames reads the Slovenian polygons' class names (LULC_NAME)
// per code (LULC_ID), as the fixture's README lists them.
func TestClassNames(t *testing.T) {
	gpkg := filepath.Join(sloveniaDir, "LULC.gpkg")
	if _, err := os.Stat(gpkg); err != nil {
		t.Skipf("no Slovenian test patch: %v", err)
	}
	names, err := ClassNames(gpkg, VectorLabels{Field: "LULC_ID"}, "LULC_NAME")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{0: "", 1: "cultivated land", 2: "forest", 3: "grassland", 4: "schrubland", 8: "artificial surface"}
	if !maps.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	if _, err := ClassNames(gpkg, VectorLabels{Field: "LULC_ID"}, "NAME"); err == nil || !strings.Contains(err.Error(), `no field "NAME"`) {
		t.Errorf("a missing name field: %v", err)
	}
}
