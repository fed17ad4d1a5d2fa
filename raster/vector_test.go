package raster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"
)

const sloveniaDir = "../../shared/data/eolearn-slovenia-testpatch"

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
