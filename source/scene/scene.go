// Package scene reads one acquisition found through a STAC catalog onto a
// grid of the caller's choosing: a Sentinel-2 item's bands as reflectance,
// its scene classification (SCL) and a label item's classes. It is for
// looking at a scene before stacking it (the notebooks use it); ingest
// (package stage/ingest) reads the same way, window by window, over every date
// of a tile.
//
// Reflectance follows ingest's rules: digital numbers become DN × scale +
// offset from the item's raster:bands (else its processing baseline),
// computed by composite.Reflectance, and the file's nodata becomes NaN.
package scene

import (
	"fmt"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/source/catalog"
)

// Grid returns the native grid of an item's band: Sentinel-2's 10 m grid
// for B02, B03, B04 and B08, its 20 m grid for SCL, the label raster's own
// grid for "labels".
func Grid(it catalog.Item, band string) (geo.Grid, error) {
	src, _, err := open(it, band)
	if err != nil {
		return geo.Grid{}, err
	}
	defer src.Close()
	return src.Grid, nil
}

// Reflectance reads band of it onto g, resampled with alg (nearest,
// bilinear, cubic), as reflectance with NaN where the file holds nodata.
// Bands that nest in g are upsampled by lulc's own rule, as ingest does
// (raster.Source.Upsample).
func Reflectance(it catalog.Item, band string, g geo.Grid, alg string) ([]float32, error) {
	src, a, err := open(it, band)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dn := make([]uint16, g.Width*g.Height)
	if err := src.Upsample(g, alg, dn, nil); err != nil {
		return nil, fmt.Errorf("%s of %s: %w", band, it.ID, err)
	}
	// The file's nodata is the truth; catalogs may omit it.
	nodata := uint16(0)
	if src.NoData != nil {
		nodata = uint16(*src.NoData)
	}
	scale, offset := it.ScaleOffset(a)
	return composite.Reflectance(dn, nodata, float32(scale), float32(offset)), nil
}

// Codes reads a class raster of it (band "SCL", or "labels" for a label
// item) onto g, resampled with alg: nearest, or mode when g is coarser
// than the raster.
func Codes(it catalog.Item, band string, g geo.Grid, alg string) ([]uint8, error) {
	src, _, err := open(it, band)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	codes := make([]uint8, g.Width*g.Height)
	if err := src.Read(g, alg, codes); err != nil {
		return nil, fmt.Errorf("%s of %s: %w", band, it.ID, err)
	}
	return codes, nil
}

// open opens the asset holding band (see catalog.DefaultAssetKeys).
func open(it catalog.Item, band string) (*raster.Source, catalog.Asset, error) {
	a, err := it.Asset(band, nil)
	if err != nil {
		return nil, a, err
	}
	src, err := raster.Open(a.Href)
	if err != nil {
		return nil, a, fmt.Errorf("%s of %s: %w", band, it.ID, err)
	}
	return src, a, nil
}
