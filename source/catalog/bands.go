package catalog

import (
	"fmt"
	"strings"
)

// DefaultAssetKeys lists, for each lulc band name, the asset keys catalogs
// use for it, in order of preference: Earth Search v1's common names first,
// then the B0x keys of Earth Search v0 and Planetary Computer. "labels" is
// the ESA WorldCover map asset.
var DefaultAssetKeys = map[string][]string{
	"B01": {"coastal", "B01"}, "B02": {"blue", "B02"}, "B03": {"green", "B03"}, "B04": {"red", "B04"},
	"B05": {"rededge1", "B05"}, "B06": {"rededge2", "B06"}, "B07": {"rededge3", "B07"},
	"B08": {"nir", "B08"}, "B8A": {"nir08", "B8A"}, "B09": {"nir09", "B09"},
	"B11": {"swir16", "B11"}, "B12": {"swir22", "B12"},
	"SCL": {"scl", "SCL"}, "labels": {"map"},
}

// Asset returns the item's asset for a lulc band name. overrides, from the
// config, maps band names to the asset key to use instead of the defaults.
func (it Item) Asset(band string, overrides map[string]string) (Asset, error) {
	keys := DefaultAssetKeys[band]
	if k, ok := overrides[band]; ok {
		keys = []string{k}
	}
	if len(keys) == 0 {
		return Asset{}, fmt.Errorf("unknown band %q", band)
	}
	for _, k := range keys {
		if a, ok := it.Assets[k]; ok && a.Href != "" {
			return a, nil
		}
	}
	return Asset{}, fmt.Errorf("item %s has no asset for band %s (looked for key %s)", it.ID, band, strings.Join(keys, ", "))
}

// ScaleOffset returns how an asset's digital numbers become reflectance:
// from raster:bands when the catalog declares it, else from the processing
// baseline (04.00 and later add an offset of −0.1; older ones none, nor
// files whose offset the catalog says it removed).
func (it Item) ScaleOffset(a Asset) (scale, offset float64) {
	scale, offset = 0.0001, 0
	if a.Scale != nil {
		scale = *a.Scale
	}
	if a.Offset != nil {
		return scale, *a.Offset
	}
	if a.Scale == nil && it.Baseline >= "04.00" && !it.OffsetApplied {
		offset = -0.1
	}
	return scale, offset
}
