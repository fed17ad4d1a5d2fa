package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/pixel/features"
)

// LayerConfig is one extra layer of the stack (ingest's layers: list): a
// raster that is not Sentinel-2 reflectance, resampled onto each tile's
// grid and kept as a plane that features name by Name (docs/ingest.md,
// Layers). Its source is one of:
//
//   - Raster: a GDAL-readable file or URL (a DEM GeoTIFF, an embedding
//     COG), band Band;
//   - Collection: a STAC collection of the ingest's catalog or API, its
//     items' Asset: a static layer (Copernicus DEM GLO-30) mosaics the
//     items over the tile whatever their dates; with Temporal "median" a
//     layer over time (Sentinel-1 RTC) takes the median of the items in
//     the ingest's dates;
//   - Derive ("slope" or "aspect", in degrees) of the layer Of, computed
//     on the tile's grid;
//   - with raster pairs, none of these: the band of the pairs' images
//     that source.bands calls Name.
type LayerConfig struct {
	Name       string `yaml:"name" json:"name"`
	Raster     string `yaml:"raster" json:"raster,omitempty"`
	Band       int    `yaml:"band,omitempty" json:"band,omitempty"`
	Collection string `yaml:"collection" json:"collection,omitempty"`
	Asset      string `yaml:"asset" json:"asset,omitempty"`
	Temporal   string `yaml:"temporal" json:"temporal,omitempty"`
	Derive     string `yaml:"derive" json:"derive,omitempty"`
	Of         string `yaml:"of" json:"of,omitempty"`
	// Scale and Offset take the raster's values to the layer's units
	// (value × scale + offset: 0.3048 for a DEM in feet); NoData is the
	// raster's missing value when its file has none.
	Scale  float64  `yaml:"scale" json:"scale,omitempty"`
	Offset float64  `yaml:"offset" json:"offset,omitempty"`
	NoData *float64 `yaml:"nodata" json:"nodata,omitempty"`
	// Units of backscatter: db (default) or linear power.
	Units string `yaml:"units" json:"units,omitempty"`
	// Resampling onto the tile's grid: bilinear (default), cubic, or
	// nearest (categorical layers).
	Resampling string `yaml:"resampling" json:"resampling,omitempty"`
	// Range is the layer's span in its units, [min, max]: the plane
	// resolves (max − min) / 40000 and clamps values beyond it. Defaults:
	// LayerRange.
	Range []float64 `yaml:"range" json:"range,omitempty"`
}

// Known collections: their asset keys and whether they are layers over
// time.
var layerCollections = map[string]struct {
	asset, temporal string
}{
	"cop-dem-glo-30": {"data", ""}, "cop-dem-glo-90": {"data", ""},
	"sentinel-1-rtc": {"", "median"},
}

// Kind says what the layer holds, for its defaults: "slope", "aspect",
// "backscatter" (a layer over time in Units), "elevation" (a DEM
// collection) or "raster".
func (l LayerConfig) Kind() string {
	switch {
	case l.Derive != "":
		return l.Derive
	case l.Temporal != "":
		return "backscatter"
	case strings.HasPrefix(l.Collection, "cop-dem"):
		return "elevation"
	}
	return "raster"
}

// LayerRange is the layer's range: Range when given, else its kind's
// (elevation −500 … 9000 m, slope 0 … 90°, aspect 0 … 360°, backscatter
// −50 … 30 dB or 0 … 4 in linear power); ok is false for a raster of the
// user's own without a range, which ingest takes from the raster's
// statistics.
func (l LayerConfig) LayerRange() (lo, hi float64, ok bool) {
	if len(l.Range) == 2 {
		return l.Range[0], l.Range[1], true
	}
	switch l.Kind() {
	case "elevation":
		return -500, 9000, true
	case "slope":
		return 0, 90, true
	case "aspect":
		return 0, 360, true
	case "backscatter":
		if l.Units == "linear" {
			return 0, 4, true
		}
		return -50, 30, true
	}
	return 0, 0, false
}

// LayerMap is the map from a layer's plane values to its units for a
// range [lo, hi]: the range's span over the plane's [0, 4]
// (features.Layer).
func LayerMap(lo, hi float64) features.Affine {
	return features.Affine{Scale: float32((hi - lo) / 4), Offset: float32(lo)}
}

// LayerNames lists the layers' names in order: the stack's last planes.
func (c IngestConfig) LayerNames() []string {
	out := make([]string, len(c.Layers))
	for i, l := range c.Layers {
		out[i] = l.Name
	}
	return out
}

// defaults fills a layer's unset keys.
func (l *LayerConfig) defaults() {
	if k, ok := layerCollections[l.Collection]; ok {
		if l.Asset == "" {
			l.Asset = k.asset
		}
		if l.Temporal == "" {
			l.Temporal = k.temporal
		}
	}
	if l.Raster != "" && l.Band == 0 {
		l.Band = 1
	}
	if l.Scale == 0 {
		l.Scale = 1
	}
	if l.Resampling == "" {
		l.Resampling = "bilinear"
	}
	if l.Temporal != "" && l.Units == "" {
		l.Units = "db"
	}
}

// validateLayers checks the layers section: names, one source each, and
// keys that fit the source.
func (c IngestConfig) validateLayers() error {
	seen := map[string]int{}
	for i, l := range c.Layers {
		key := fmt.Sprintf("layers[%d]", i)
		if err := features.CheckLayerName(l.Name); err != nil {
			return fmt.Errorf("%s.name: %w", key, err)
		}
		if j, ok := seen[l.Name]; ok {
			return fmt.Errorf("%s.name: %s is also layers[%d]'s", key, l.Name, j)
		}
		seen[l.Name] = i
		key = fmt.Sprintf("layers[%d] (%s)", i, l.Name)
		image := len(c.Source.Rasters) > 0 && slices.Contains(c.Source.Bands, l.Name)
		sources := 0
		for _, on := range []bool{l.Raster != "", l.Collection != "", l.Derive != "", image} {
			if on {
				sources++
			}
		}
		switch {
		case sources == 0 && len(c.Source.Rasters) > 0:
			return fmt.Errorf("%s: no source: give raster, collection or derive, or name a band of source.bands [%s]", key, strings.Join(c.Source.Bands, ", "))
		case sources == 0:
			return fmt.Errorf("%s: no source: give raster (a file), collection (a STAC collection, such as cop-dem-glo-30 or sentinel-1-rtc) or derive (slope or aspect of another layer)", key)
		case sources > 1 && image:
			return fmt.Errorf("%s: a band of source.bands is read from the images: raster, collection and derive would be a second source", key)
		case sources > 1:
			return fmt.Errorf("%s: raster, collection and derive exclude each other", key)
		}
		if l.Collection != "" && len(c.Source.Rasters) > 0 {
			return fmt.Errorf("%s.collection: raster pairs have no STAC catalog to search; give the layer as raster: a file", key)
		}
		if l.Collection != "" && l.Asset == "" {
			return fmt.Errorf("%s.asset: which asset of %s's items to read (for example data, vv or vh)", key, l.Collection)
		}
		if l.Temporal != "" && l.Temporal != "median" {
			return fmt.Errorf("%s.temporal: %q is not median", key, l.Temporal)
		}
		if l.Temporal != "" && l.Collection == "" {
			return fmt.Errorf("%s.temporal: only a collection's layer has dates", key)
		}
		if l.Units != "" && l.Units != "db" && l.Units != "linear" {
			return fmt.Errorf("%s.units: %q is not db or linear", key, l.Units)
		}
		if l.Units != "" && l.Temporal == "" {
			return fmt.Errorf("%s.units: db or linear are backscatter's (a layer with temporal: median); use scale and offset for other units", key)
		}
		if l.Derive != "" {
			if l.Derive != "slope" && l.Derive != "aspect" {
				return fmt.Errorf("%s.derive: %q is not slope or aspect", key, l.Derive)
			}
			j, ok := seen[l.Of]
			if !ok || j == i {
				return fmt.Errorf("%s.of: %s derives from an elevation layer listed before it (layers: %s)", key, l.Derive, strings.Join(c.LayerNames()[:i], ", "))
			}
			if c.Layers[j].Derive != "" {
				return fmt.Errorf("%s.of: %s is itself derived", key, l.Of)
			}
		} else if l.Of != "" {
			return fmt.Errorf("%s.of: only a derived layer (derive: slope or aspect) names another layer", key)
		}
		if l.Band < 0 || l.Band > 0 && l.Raster == "" {
			return fmt.Errorf("%s.band: a 1-based band of raster", key)
		}
		if math.IsNaN(l.Scale) || math.IsInf(l.Scale, 0) || l.Scale == 0 || math.IsNaN(l.Offset) || math.IsInf(l.Offset, 0) {
			return fmt.Errorf("%s: scale and offset must be finite, scale non-zero (value × scale + offset: 0.3048 for a DEM in feet)", key)
		}
		if !slices.Contains([]string{"bilinear", "cubic", "nearest"}, l.Resampling) {
			return fmt.Errorf("%s.resampling: %q is not bilinear, cubic or nearest (categorical layers)", key, l.Resampling)
		}
		if len(l.Range) > 0 && (len(l.Range) != 2 || !(l.Range[0] < l.Range[1]) || math.IsInf(l.Range[0], 0) || math.IsInf(l.Range[1], 0)) {
			return fmt.Errorf("%s.range: %v is not [min, max] with min < max", key, l.Range)
		}
	}
	if len(c.Layers) > 0 && len(c.StackPlanes()) > 64 {
		return errors.New("layers: the stack would hold more than 64 planes")
	}
	return nil
}

// UnmarshalYAML reads a layer's mapping, or its name alone (a band of the
// raster pairs' images: layers: [elevation]).
func (l *LayerConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = LayerConfig{Name: n.Value}
		return nil
	}
	// The mapping's keys are checked here: a custom decoder's own Decode
	// does not know the config's strictness.
	type plain LayerConfig
	known := map[string]bool{}
	t := reflect.TypeFor[plain]()
	for i := range t.NumField() {
		known[strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]] = true
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; !known[k] {
				return fmt.Errorf("line %d: layers: unknown key %q", n.Content[i].Line, k)
			}
		}
	}
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*l = LayerConfig(p)
	return nil
}
