//go:build cgo

package cog_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lulc/lulc/geo/cog"
	"github.com/lulc/lulc/geo/cog/cogtest"
	"github.com/lulc/lulc/geo/raster"
)

// TestBigTIFFReadByGDAL: GDAL reads a BigTIFF the encoder wrote as a COG,
// with its overviews and pixels, the CRS's GeoKeys taken from a COG GDAL
// wrote (geo/raster's tests compare the classic TIFFs with GDAL's). It
// needs GDAL, hence cgo; the rest of the package's tests do not.
func TestBigTIFFReadByGDAL(t *testing.T) {
	dir := t.TempDir()
	c := cogtest.Cases[4]
	c.Bands, c.Infos = 1, nil
	px := c.Pixels(0)
	ref := filepath.Join(dir, "gdal.tif")
	if err := raster.WriteCOG(ref, c.Grid(), px, raster.COGOptions{GDALDriver: true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := cog.ParseGeoKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cog.NewPlan(c.Grid(), keys, 2, []cog.Band{{}}, cog.Options{Predictor: true, NoData: c.NoData})
	if err != nil {
		t.Fatal(err)
	}
	cog.ForceBigTIFF(p)
	path := filepath.Join(dir, "big.tif")
	if err := cog.Write(path, p, px); err != nil {
		t.Fatal(err)
	}
	tf := cogtest.CheckLayout(t, path)
	info, err := raster.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if !tf.Big || info.Layout != "COG" || info.Overviews != len(tf.IFDs)-1 || info.Overviews == 0 || info.EPSG != c.Grid().EPSG {
		t.Errorf("BigTIFF %v: %+v", tf.Big, info)
	}
	back, _, err := raster.ReadBand[uint16](path, 1)
	if err != nil || !slices.Equal(back, px) {
		t.Errorf("BigTIFF pixels differ (%v)", err)
	}
}
