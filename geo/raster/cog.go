package raster

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"sync"
	"sync/atomic"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog"
)

// goPlan lays out a COG of len(bands) bands of bytesPer-byte pixels on g
// for lulc's encoder (package cog), with the CRS's GeoKeys from GDAL, or
// says why the encoder cannot write it: GDAL's COG driver then does.
func goPlan(g geo.Grid, bytesPer int, bands []BandInfo, opt COGOptions) (*cog.Plan, error) {
	if opt.GDALDriver {
		return nil, errors.New("GDALDriver asked for")
	}
	keys, err := geoKeysFor(g.EPSG)
	if err != nil {
		return nil, err
	}
	cb := make([]cog.Band, len(bands))
	for i, b := range bands {
		cb[i] = cog.Band{Description: b.Description, Scale: b.Scale, Offset: b.Offset}
	}
	var palette []color.RGBA
	if opt.Classes != nil {
		// The colour table GDAL's driver gets (colorTable), as the TIFF
		// ColorMap keeps it: without alpha.
		for _, e := range colorTable(*opt.Classes).Entries {
			palette = append(palette, color.RGBA{R: uint8(e[0]), G: uint8(e[1]), B: uint8(e[2]), A: uint8(e[3])})
		}
	}
	return cog.NewPlan(g, keys, bytesPer, cb, cog.Options{
		BlockSize:          opt.BlockSize,
		Compress:           opt.Compress,
		Predictor:          opt.Predictor,
		OverviewResampling: opt.OverviewResampling,
		OverviewCount:      opt.OverviewCount,
		Threads:            opt.Threads,
		NoData:             opt.NoData,
		Metadata:           opt.Metadata,
		Palette:            palette,
		EncodeEarly:        opt.EncodeEarly,
		EarlyThreads:       opt.EarlyThreads,
	})
}

var (
	geoKeyCache sync.Map // EPSG code → cog.GeoKeys
	geoKeySeq   atomic.Int64
)

// geoKeysFor returns the GeoKeys GDAL writes for EPSG:epsg. Rather than
// re-implement GDAL's CRS-to-GeoKey mapping (citations, units, the
// ellipsoid parameters it adds for geographic CRSs), GDAL writes a 1×1
// GeoTIFF in memory and its tags are copied: GDAL then reads the COG's
// CRS back exactly as it reads its own. Results are cached per code.
func geoKeysFor(epsg int) (cog.GeoKeys, error) {
	if k, ok := geoKeyCache.Load(epsg); ok {
		return k.(cog.GeoKeys), nil
	}
	register()
	sr, err := godal.NewSpatialRefFromEPSG(epsg)
	if err != nil {
		return cog.GeoKeys{}, fmt.Errorf("crs EPSG:%d: %w", epsg, err)
	}
	defer sr.Close()
	name := fmt.Sprintf("/vsimem/lulc-geokeys-%d-%d.tif", epsg, geoKeySeq.Add(1))
	ds, err := godal.Create(godal.GTiff, name, 1, godal.Byte, 1, 1)
	if err != nil {
		return cog.GeoKeys{}, fmt.Errorf("geokeys for EPSG:%d: %w", epsg, err)
	}
	defer godal.VSIUnlink(name)
	serr := ds.SetSpatialRef(sr)
	gerr := ds.SetGeoTransform([6]float64{0, 1, 0, 0, 0, -1})
	if err := ds.Close(); err != nil || serr != nil || gerr != nil {
		return cog.GeoKeys{}, fmt.Errorf("geokeys for EPSG:%d: %v %v %v", epsg, err, serr, gerr)
	}
	f, err := godal.VSIOpen(name)
	if err != nil {
		return cog.GeoKeys{}, fmt.Errorf("geokeys for EPSG:%d: %w", epsg, err)
	}
	body, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return cog.GeoKeys{}, fmt.Errorf("geokeys for EPSG:%d: %w", epsg, err)
	}
	k, err := cog.ParseGeoKeys(body)
	if err != nil {
		return cog.GeoKeys{}, fmt.Errorf("geokeys for EPSG:%d: %w", epsg, err)
	}
	geoKeyCache.Store(epsg, k)
	return k, nil
}

// CRSWKT is EPSG:epsg as OGC WKT (GDAL's export), for formats that carry
// the CRS as text (the Zarr stack's grid mapping).
func CRSWKT(epsg int) (string, error) {
	register()
	sr, err := godal.NewSpatialRefFromEPSG(epsg)
	if err != nil {
		return "", fmt.Errorf("crs EPSG:%d: %w", epsg, err)
	}
	defer sr.Close()
	wkt, err := sr.WKT()
	if err != nil {
		return "", fmt.Errorf("crs EPSG:%d as wkt: %w", epsg, err)
	}
	return wkt, nil
}
