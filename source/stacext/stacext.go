// Package stacext adds to github.com/planetlabs/go-stac the STAC extensions
// lulc writes and go-stac has no types for (projection, classification,
// file, SAR, satellite), and the extension URIs lulc declares. The view
// extension is go-stac's own (extensions/view/v1). It also carries the
// official JSON schemas of STAC and of those extensions, embedded, and
// Validate, which checks documents against them and their assets against
// their checksums, without a network.
package stacext

import (
	"github.com/planetlabs/go-stac"
)

// Extension schema URIs, the versions Earth Search and the WorldCover items
// declare.
const (
	ProjectionURI     = "https://stac-extensions.github.io/projection/v1.1.0/schema.json"
	ClassificationURI = "https://stac-extensions.github.io/classification/v1.0.0/schema.json"
)

// ProjectionItem holds the item-level projection fields.
type ProjectionItem struct {
	EPSG int `json:"proj:epsg"`
}

// URI implements stac.Extension.
func (*ProjectionItem) URI() string { return ProjectionURI }

// Encode implements stac.Extension.
func (e *ProjectionItem) Encode(itemMap map[string]any) error {
	return stac.EncodeExtendedItemProperties(e, itemMap)
}

// Decode implements stac.Extension.
func (e *ProjectionItem) Decode(itemMap map[string]any) error {
	return stac.DecodeExtendedItemProperties(e, itemMap)
}

// ProjectionAsset holds an asset's grid: shape is [rows, cols], transform the
// first six affine coefficients (a, b, c, d, e, f) as in rasterio.
type ProjectionAsset struct {
	Shape     []int     `json:"proj:shape"`
	Transform []float64 `json:"proj:transform"`
}

// URI implements stac.Extension.
func (*ProjectionAsset) URI() string { return ProjectionURI }

// Encode implements stac.Extension.
func (e *ProjectionAsset) Encode(assetMap map[string]any) error {
	return stac.EncodeExtendedMap(e, assetMap)
}

// Decode implements stac.Extension.
func (e *ProjectionAsset) Decode(assetMap map[string]any) error {
	return stac.DecodeExtendedMap(e, assetMap, "proj")
}

// Class is one entry of classification:classes.
type Class struct {
	Value       int    `json:"value"`
	Description string `json:"description"`
	ColorHint   string `json:"color-hint,omitempty"`
	Name        string `json:"name,omitempty"`
}

// ClassificationAsset lists the classes an asset's pixel values stand for.
type ClassificationAsset struct {
	Classes []Class `json:"classification:classes"`
}

// URI implements stac.Extension.
func (*ClassificationAsset) URI() string { return ClassificationURI }

// Encode implements stac.Extension.
func (e *ClassificationAsset) Encode(assetMap map[string]any) error {
	return stac.EncodeExtendedMap(e, assetMap)
}

// Decode implements stac.Extension.
func (e *ClassificationAsset) Decode(assetMap map[string]any) error {
	return stac.DecodeExtendedMap(e, assetMap, "classification")
}

// FileURI is the file extension's schema.
const FileURI = "https://stac-extensions.github.io/file/v2.1.0/schema.json"

// File holds an asset's checksum (a multihash: "1e20" + hex BLAKE3-256, as
// lulc writes it, or "1220" + hex SHA-256) and size.
type File struct {
	Checksum string `json:"file:checksum"`
	Size     int64  `json:"file:size"`
}

// URI implements stac.Extension.
func (*File) URI() string { return FileURI }

// Encode implements stac.Extension.
func (e *File) Encode(assetMap map[string]any) error { return stac.EncodeExtendedMap(e, assetMap) }

// Decode implements stac.Extension.
func (e *File) Decode(assetMap map[string]any) error {
	return stac.DecodeExtendedMap(e, assetMap, "file")
}

// SAR and satellite extensions, at the versions Planetary Computer's
// sentinel-1-rtc items declare.
const (
	SARURI = "https://stac-extensions.github.io/sar/v1.0.0/schema.json"
	SatURI = "https://stac-extensions.github.io/sat/v1.0.0/schema.json"
)

// SARItem holds the item-level fields of a radar acquisition that the SAR
// extension requires, and the product type.
type SARItem struct {
	InstrumentMode  string   `json:"sar:instrument_mode"`
	FrequencyBand   string   `json:"sar:frequency_band"`
	CenterFrequency float64  `json:"sar:center_frequency,omitempty"`
	Polarizations   []string `json:"sar:polarizations"`
	ProductType     string   `json:"sar:product_type"`
}

// URI implements stac.Extension.
func (*SARItem) URI() string { return SARURI }

// Encode implements stac.Extension.
func (e *SARItem) Encode(itemMap map[string]any) error {
	return stac.EncodeExtendedItemProperties(e, itemMap)
}

// Decode implements stac.Extension.
func (e *SARItem) Decode(itemMap map[string]any) error {
	return stac.DecodeExtendedItemProperties(e, itemMap)
}

// SatItem holds a satellite acquisition's orbit state (ascending or
// descending) and relative orbit.
type SatItem struct {
	OrbitState    string `json:"sat:orbit_state"`
	RelativeOrbit int    `json:"sat:relative_orbit,omitempty"`
}

// URI implements stac.Extension.
func (*SatItem) URI() string { return SatURI }

// Encode implements stac.Extension.
func (e *SatItem) Encode(itemMap map[string]any) error {
	return stac.EncodeExtendedItemProperties(e, itemMap)
}

// Decode implements stac.Extension.
func (e *SatItem) Decode(itemMap map[string]any) error {
	return stac.DecodeExtendedItemProperties(e, itemMap)
}
