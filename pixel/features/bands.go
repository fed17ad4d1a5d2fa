// Package features computes features from an analysis-ready Sentinel-2
// stack: per-pixel features (raw bands and spectral indices), temporal
// features read from the stack's temporal planes (temporal.go), the
// stack's layers in their units (elevation, backscatter: layers.go), and
// context features, statistics of a per-pixel feature over the window
// around each pixel (context.go), computed for a block of pixels from its
// halo or for chosen pixels of a tile.
//
// It is pure Go with no cgo so that its tests run on GPU hosts without GDAL,
// and its CPU implementations are the specification the CUDA twins in
// package cuda must match bit for bit.
//
// This file holds the Sentinel-2 MSI band table: the names every other stage
// uses to refer to bands.
package features

import "fmt"

// Band describes one Sentinel-2 MSI band as Earth Search names it.
type Band struct {
	Name       string  // ESA band id: "B04"
	Key        string  // Earth Search v1 asset key: "red", "rededge1"
	CommonName string  // STAC eo common name: "red", "rededge"
	Wavelength float64 // centre wavelength in micrometres
	FWHM       float64 // full width at half maximum in micrometres
	Resolution int     // ground sampling distance in metres (10, 20 or 60)
	Title      string  // Earth Search asset title stem: "Red (band 4)"
}

// Sentinel2 lists the 12 L2A reflectance bands in ESA order (B10, cirrus, is
// not delivered at L2A). Values follow Earth Search v1 items.
var Sentinel2 = []Band{
	{"B01", "coastal", "coastal", 0.443, 0.027, 60, "Coastal aerosol (band 1)"},
	{"B02", "blue", "blue", 0.490, 0.098, 10, "Blue (band 2)"},
	{"B03", "green", "green", 0.560, 0.045, 10, "Green (band 3)"},
	{"B04", "red", "red", 0.665, 0.038, 10, "Red (band 4)"},
	{"B05", "rededge1", "rededge", 0.704, 0.019, 20, "Red edge 1 (band 5)"},
	{"B06", "rededge2", "rededge", 0.740, 0.018, 20, "Red edge 2 (band 6)"},
	{"B07", "rededge3", "rededge", 0.783, 0.028, 20, "Red edge 3 (band 7)"},
	{"B08", "nir", "nir", 0.842, 0.145, 10, "NIR 1 (band 8)"},
	{"B8A", "nir08", "nir08", 0.865, 0.033, 20, "NIR 2 (band 8A)"},
	{"B09", "nir09", "nir09", 0.945, 0.026, 60, "NIR 3 (band 9)"},
	{"B11", "swir16", "swir16", 1.610, 0.143, 20, "SWIR 1 (band 11)"},
	{"B12", "swir22", "swir22", 2.190, 0.242, 20, "SWIR 2 (band 12)"},
}

// LookupBand finds a band by ESA name ("B8A") or Earth Search asset key
// ("nir08", "rededge1").
func LookupBand(name string) (Band, error) {
	for _, b := range Sentinel2 {
		if b.Name == name || b.Key == name {
			return b, nil
		}
	}
	return Band{}, fmt.Errorf("unknown Sentinel-2 band %q (want B01…B12, B8A or an asset key such as red, nir, rededge1, swir16)", name)
}
