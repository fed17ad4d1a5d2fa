package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/source/catalog"
	"go.yaml.in/yaml/v3"
)

// IngestConfig describes an ingest: where to find scenes, which area and
// dates, and how to build the analysis-ready stack.
type IngestConfig struct {
	Source struct {
		// Catalog is a static STAC catalog (path or URL of catalog.json);
		// API a STAC API root; Rasters analysis-ready image/label pairs.
		// Exactly one is set.
		Catalog string `yaml:"catalog"`
		API     string `yaml:"api"`
		// Rasters are local (or GDAL-readable) images with their labels on
		// the same grid, each stacked as one tile on its own grid, with no
		// search, resampling or SCL mask. Bands, Scale, Offset and NoData
		// describe the images. The JSON names keep the hash of STAC configs
		// as it was before these fields existed.
		Rasters []RasterPair `yaml:"rasters" json:"Rasters,omitempty"`
		// Bands names each image band in file order (B01…B12, B8A); the
		// top-level bands pick the stack's bands from them.
		Bands []string `yaml:"bands" json:"Bands,omitempty"`
		// Scale and Offset give reflectance = value × scale + offset;
		// Offset may be auto, its default for rasters.
		Scale  float64 `yaml:"scale" json:"Scale,omitempty"`
		Offset Offset  `yaml:"offset" json:"Offset,omitzero"`
		// NoData is the image value marking missing pixels (default: the
		// file's nodata, if it has one).
		NoData *float64 `yaml:"nodata" json:"NoData,omitempty"`
		// Labels is a vector layer (a path, or a GDAL URL such as
		// /vsicurl/… or /vsis3/…) labelling a STAC source's tiles in place
		// of a label collection: its features are burned onto each tile's
		// grid as the vector labels of raster pairs are. Omitted from the
		// hash when empty, so that configs written before it keep theirs.
		Labels string `yaml:"labels" json:",omitempty"`
		// Labels given as vector layers (points or polygons in any format
		// GDAL reads: source.labels, or a pair's labels) are rasterised
		// onto the tile's grid: LabelField is the features' class-code
		// attribute, LabelLayer the layer (default: the first),
		// LabelsAllTouched burns every pixel a polygon touches instead of
		// those whose centre it contains.
		LabelField       string `yaml:"label_field" json:",omitempty"`
		LabelLayer       string `yaml:"label_layer" json:",omitempty"`
		LabelsAllTouched bool   `yaml:"labels_all_touched" json:",omitempty"`
		// LabelCodes maps the class field's text values to class codes
		// (compared case-insensitively). Without it, text values that are
		// all class names of a built-in scheme take its codes, and others
		// are numbered 1, 2, … in sorted order (docs/ingest.md, Text
		// classes).
		LabelCodes map[string]int `yaml:"label_codes" json:",omitempty"`
		// LabelGroupField is the integer attribute that groups vector
		// labels' features for a split by features (sampling.split:
		// features): default, each feature is its own group (FID + 1).
		// The groups are written as groups.tif beside labels.tif.
		LabelGroupField string `yaml:"label_group_field" json:",omitempty"`
		// LabelWeightField is the numeric attribute that weights vector
		// labels' features in the draw (rounded to an integer 0–255; 0:
		// never drawn; default: every feature weighs 1): burned like the
		// labels and written as weights.tif beside labels.tif.
		LabelWeightField string `yaml:"label_weight_field" json:",omitempty"`
		// Collection holds the Sentinel-2 L2A items, LabelCollection the
		// ESA WorldCover ones (default, unless source.labels is set).
		Collection      string `yaml:"collection"`
		LabelCollection string `yaml:"label_collection"`
		// CloudFilter: query (Earth Search), cql2 or none.
		CloudFilter string `yaml:"cloud_filter"`
		Limit       int    `yaml:"limit"`
		// Assets maps lulc band names (B04, SCL, labels) to asset keys,
		// overriding the defaults (red/B04, scl/SCL, map).
		Assets map[string]string `yaml:"assets"`
		// Planetary Computer signing: a SAS token, or the token endpoint
		// with "{collection}".
		SASToken    string `yaml:"sas_token"`
		SASTokenURL string `yaml:"sas_token_url"`
		// GDAL configuration options for reading (GDAL_HTTP_MAX_RETRY,
		// AWS_NO_SIGN_REQUEST, AWS_REQUEST_PAYER, …).
		GDAL map[string]string `yaml:"gdal"`
		// AllowHrefs widens which hrefs may be read. By default local
		// hrefs must lie under a static catalog's directory (an API's
		// items may have none) and remote ones use http, https, s3, gs or
		// az. Each entry is a local directory, or a prefix such as
		// "ftp://host/" or "/vsis3/bucket/".
		AllowHrefs []string `yaml:"allow_hrefs" json:"AllowHrefs,omitempty"`
		// Limits on a STAC API search: pages and items (defaults 1000 and
		// 100000), each request's time (default 60 s) and the whole
		// search's, retries included (default 5 min).
		MaxPages       int           `yaml:"max_pages" json:"MaxPages,omitempty"`
		MaxItems       int           `yaml:"max_items" json:"MaxItems,omitempty"`
		RequestTimeout time.Duration `yaml:"request_timeout" json:"RequestTimeout,omitempty"`
		SearchTimeout  time.Duration `yaml:"search_timeout" json:"SearchTimeout,omitempty"`
	} `yaml:"source"`
	Area struct {
		BBox    []float64 `yaml:"bbox"`    // lon/lat: west, south, east, north
		GeoJSON string    `yaml:"geojson"` // a file with a Feature, FeatureCollection or geometry
	} `yaml:"area"`
	Dates struct {
		Start string `yaml:"start"` // YYYY-MM-DD, inclusive
		End   string `yaml:"end"`   // YYYY-MM-DD, inclusive
	} `yaml:"dates"`
	MaxCloudCover float64  `yaml:"max_cloud_cover"` // percent; items at or above are skipped (100: no limit)
	Bands         []string `yaml:"bands"`           // lulc band names, in stack order
	// Grid: by default the tile's own UTM grid at Resolution, clipped to
	// the area. Setting EPSG and Bounds gives a user grid instead.
	Grid struct {
		Resolution float64   `yaml:"resolution"`
		EPSG       int       `yaml:"epsg"`
		Bounds     []float64 `yaml:"bounds"` // minx, miny, maxx, maxy in EPSG units
	} `yaml:"grid"`
	Resampling struct {
		Reflectance string `yaml:"reflectance"` // bilinear or cubic (nearest allowed)
		Labels      string `yaml:"labels"`      // mode or nearest; unset with source.labels (burned, not resampled)
	} `yaml:"resampling"`
	Mask MaskConfig `yaml:"mask,omitempty"`
	// Temporal adds planes to the stack after the bands' medians:
	// percentiles and seasonal medians of bands and indices over the
	// tile's dates (composite.Temporal), which models read as features
	// named like the planes: p10(ndvi), season(ndvi,summer).
	Temporal *TemporalConfig `yaml:"temporal" json:",omitempty"`
	// Layers add planes after the temporal ones: elevation, backscatter
	// or rasters of the user's own, which models read as features by
	// name (layers_config.go). Left out of the hash when empty, so that
	// configs written before them keep theirs.
	Layers []LayerConfig `yaml:"layers" json:",omitempty"`
	Window int           `yaml:"window"` // window side in output pixels, a multiple of 512
	Output struct {
		Compress  string `yaml:"compress"`
		BlockSize int    `yaml:"blocksize"`
		// Stack: cog (default), zarr, or [cog, zarr] (StackFormats).
		// Left out of the hash when it is the default, so that configs
		// written before it keep theirs.
		Stack StackFormats `yaml:"stack,omitempty" json:",omitempty"`
	} `yaml:"output"`
}

// TemporalConfig lists the temporal planes of a stack: the percentiles and
// the seasons' medians of each feature in Of.
type TemporalConfig struct {
	Of          []string       `yaml:"of"`          // bands or indices: B08, ndvi, nd(B08,B11)
	Percentiles []int          `yaml:"percentiles"` // 1–99, nearest rank
	Seasons     []SeasonConfig `yaml:"seasons"`
}

// SeasonConfig is a named part of the year, From to To inclusive as MM-DD
// (From after To wraps over new year).
type SeasonConfig struct {
	Name string `yaml:"name"`
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// TemporalSpec is the stack's temporal description; nil without one.
func (c IngestConfig) TemporalSpec() (*composite.Temporal, error) {
	t := c.Temporal
	if t == nil {
		return nil, nil
	}
	var seasons []composite.Season
	for i, s := range t.Seasons {
		from, err := composite.ParseMonthDay(s.From)
		if err != nil {
			return nil, fmt.Errorf("temporal.seasons[%d].from: %w", i, err)
		}
		to, err := composite.ParseMonthDay(s.To)
		if err != nil {
			return nil, fmt.Errorf("temporal.seasons[%d].to: %w", i, err)
		}
		seasons = append(seasons, composite.Season{Name: s.Name, From: from, To: to})
	}
	return composite.NewTemporal(t.Of, c.Bands, t.Percentiles, seasons)
}

// StackPlanes names the stack's planes in order: the bands' medians, then
// the temporal planes.
func (c IngestConfig) StackPlanes() []string {
	tp, err := c.TemporalSpec()
	if err != nil {
		return append(slices.Clone(c.Bands), c.LayerNames()...)
	}
	return slices.Concat(c.Bands, tp.Planes(), c.LayerNames())
}

// Offset is source.offset: a number (reflectance = value × scale +
// offset), or auto: ingest decides each raster pair's offset from its
// darkest pixels, applying Sentinel-2's baseline-04 correction (−0.1, the
// +1000 DN offset removed) when they show it left in (docs/ingest.md,
// Radiometry). Raster sources default to auto.
type Offset struct {
	Value float64
	Auto  bool
	Set   bool // the config gave it
}

// IsZero reports an offset of 0 that is not auto.
func (o Offset) IsZero() bool { return !o.Auto && o.Value == 0 }

// String is the offset as a config writes it.
func (o Offset) String() string {
	if o.Auto {
		return "auto"
	}
	return fmt.Sprint(o.Value)
}

// UnmarshalYAML reads a number or auto.
func (o *Offset) UnmarshalYAML(n *yaml.Node) error {
	o.Set = true
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		o.Auto = true
		return nil
	}
	if err := n.Decode(&o.Value); err != nil || math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
		return fmt.Errorf("source.offset: %q is not a finite number or auto", n.Value)
	}
	return nil
}

// MarshalYAML writes a number or auto.
func (o Offset) MarshalYAML() (any, error) {
	if o.Auto {
		return "auto", nil
	}
	return o.Value, nil
}

// MarshalJSON writes a number or "auto", so that a config's hash is the
// same as when the offset was a plain number.
func (o Offset) MarshalJSON() ([]byte, error) {
	if o.Auto {
		return []byte(`"auto"`), nil
	}
	return json.Marshal(o.Value)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *Offset) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == `"auto"` {
		o.Auto = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// RasterPair is one analysis-ready image and its labels (Byte class codes,
// 0 for none) on exactly the image's grid.
type RasterPair struct {
	Image  string `yaml:"image"`
	Labels string `yaml:"labels"`
	// Tile names the output tile directory (default: the image's file
	// name without its extension).
	Tile string `yaml:"tile"`
	// Datetime is the acquisition time recorded in the manifest
	// (optional; RFC 3339 or YYYY-MM-DD). Without it the stack's STAC
	// item, which must carry a time, carries the epoch.
	Datetime string `yaml:"datetime"`
}

// Inputs lists the local files and directories the ingest reads, which its
// output must not touch: a static catalog's directory (its items and COGs
// lie under it), the area's GeoJSON, the vector labels and the raster
// pairs. GDAL URLs among them are skipped by atomicfs.CheckInputs.
func (c IngestConfig) Inputs() []string {
	var in []string
	switch {
	case c.Source.Catalog == "":
	case atomicfs.Exists(c.Source.Catalog):
		in = append(in, filepath.Dir(c.Source.Catalog))
	default:
		// Nothing is read from a directory without its catalog.
		in = append(in, c.Source.Catalog)
	}
	in = append(in, c.Area.GeoJSON, c.Source.Labels)
	// Directories the href policy was widened to are read too.
	in = append(in, c.Source.AllowHrefs...)
	for _, p := range c.Source.Rasters {
		in = append(in, p.Image, p.Labels)
	}
	return in
}

// TileName is the pair's output tile name.
func (p RasterPair) TileName() string {
	if p.Tile != "" {
		return p.Tile
	}
	base := path.Base(filepath.ToSlash(p.Image))
	return strings.TrimSuffix(base, path.Ext(base))
}

// IngestConfigFile is the resolved config an ingest writes beside its
// tiles: the config's own keys, defaults filled in, credentials redacted.
const IngestConfigFile = "ingest.yaml"

// ParseIngestConfig decodes YAML strictly, fills defaults and validates.
// It registers the config's credentials (the SAS token, secret GDAL
// options) with package redact, so that they never reach logs or outputs.
func ParseIngestConfig(raw []byte) (IngestConfig, error) {
	var c IngestConfig
	if err := configs.DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	redact.Add(c.Source.SASToken)
	redact.Options(c.Source.GDAL)
	// An empty mapping or list means the same as an absent key; the
	// resolved config that ingest writes beside its outputs spells absent
	// ones so (assets: {}, bounds: []), and must hash as it was read.
	if len(c.Source.Assets) == 0 {
		c.Source.Assets = nil
	}
	if len(c.Source.GDAL) == 0 {
		c.Source.GDAL = nil
	}
	if len(c.Source.AllowHrefs) == 0 {
		c.Source.AllowHrefs = nil
	}
	if len(c.Area.BBox) == 0 {
		c.Area.BBox = nil
	}
	if len(c.Grid.Bounds) == 0 {
		c.Grid.Bounds = nil
	}
	c.defaults()
	return c, c.Validate()
}

func (c *IngestConfig) defaults() {
	if len(c.Source.Rasters) > 0 {
		// Analysis-ready rasters: no search, mask or resampling defaults;
		// their offset is decided from their pixels unless given.
		if !c.Source.Offset.Set {
			c.Source.Offset = Offset{Auto: true, Set: true}
		}
		c.sharedDefaults()
		return
	}
	if c.Source.Collection == "" {
		c.Source.Collection = "sentinel-2-l2a"
	}
	// A vector layer labels the tiles in place of a label collection, and
	// is burned rather than resampled: neither default applies to it, or
	// Validate would take the defaults for keys set beside it.
	vector := c.Source.Labels != ""
	if c.Source.LabelCollection == "" && !vector {
		c.Source.LabelCollection = "esa-worldcover"
	}
	if c.Source.CloudFilter == "" {
		c.Source.CloudFilter = "query"
	}
	if c.Source.Limit == 0 {
		c.Source.Limit = 100
	}
	if c.MaxCloudCover == 0 {
		c.MaxCloudCover = 100
	}
	c.sharedDefaults()
	if c.Grid.Resolution == 0 {
		c.Grid.Resolution = 10
	}
	if c.Resampling.Reflectance == "" {
		c.Resampling.Reflectance = "bilinear"
	}
	if c.Resampling.Labels == "" && !vector {
		c.Resampling.Labels = "mode"
	}
	if c.Mask.DropSCL == nil && c.Mask.Band == "" {
		for _, v := range composite.DefaultDropSCL {
			c.Mask.DropSCL = append(c.Mask.DropSCL, int(v))
		}
	}
}

// sharedDefaults fills the keys every source uses: stack bands, layers,
// window and output encoding.
func (c *IngestConfig) sharedDefaults() {
	for i := range c.Layers {
		c.Layers[i].defaults()
	}
	if len(c.Bands) == 0 {
		c.Bands = []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
		if len(c.Source.Rasters) > 0 && len(c.Source.Bands) > 0 {
			// Images hold the bands their maker kept: stack those of the
			// default set they have.
			c.Bands = slices.DeleteFunc(c.Bands, func(b string) bool { return !slices.Contains(c.Source.Bands, b) })
		}
	}
	if c.Window == 0 {
		c.Window = 1024
	}
	if c.Output.Compress == "" {
		c.Output.Compress = "DEFLATE"
	}
	if slices.Equal(c.Output.Stack, StackFormats{StackCOG}) {
		c.Output.Stack = nil
	}
	if c.Output.BlockSize == 0 {
		c.Output.BlockSize = 512
	}
}

// Validate names the first key at fault.
func (c IngestConfig) Validate() error {
	s := c.Source
	set := 0
	for _, on := range []bool{s.Catalog != "", s.API != "", len(s.Rasters) > 0} {
		if on {
			set++
		}
	}
	if set != 1 {
		return errors.New("source: set exactly one of catalog (a static STAC catalog), api (a STAC API root) and rasters (analysis-ready image/label pairs)")
	}
	if err := c.validateLayers(); err != nil {
		return err
	}
	if len(s.Rasters) > 0 {
		return c.validateRasters()
	}
	if len(s.Bands) > 0 || s.Scale != 0 || !s.Offset.IsZero() || s.NoData != nil {
		return errors.New("source: bands, scale, offset and nodata describe rasters; STAC assets carry their own")
	}
	if err := c.validateVectorLabels(); err != nil {
		return err
	}
	switch {
	case !slices.Contains([]string{"query", "cql2", "none"}, s.CloudFilter):
		return fmt.Errorf("source.cloud_filter: %q is not query, cql2 or none", s.CloudFilter)
	case s.Limit < 1 || s.Limit > 10000:
		return fmt.Errorf("source.limit: %d is outside 1–10000", s.Limit)
	}
	for band := range s.Assets {
		if _, ok := catalog.DefaultAssetKeys[band]; !ok {
			return fmt.Errorf("source.assets: unknown band %q", band)
		}
	}
	for _, l := range []struct {
		key string
		neg bool
	}{{"source.max_pages", s.MaxPages < 0}, {"source.max_items", s.MaxItems < 0},
		{"source.request_timeout", s.RequestTimeout < 0}, {"source.search_timeout", s.SearchTimeout < 0}} {
		if l.neg {
			return fmt.Errorf("%s: negative (leave it out for the default)", l.key)
		}
	}
	for _, a := range s.AllowHrefs {
		if a == "" {
			return errors.New("source.allow_hrefs: an empty entry would allow nothing; remove it")
		}
	}
	if (len(c.Area.BBox) == 0) == (c.Area.GeoJSON == "") {
		return errors.New("area: set exactly one of bbox and geojson")
	}
	if len(c.Area.BBox) > 0 {
		b := c.Area.BBox
		if len(b) != 4 || b[0] >= b[2] || b[1] >= b[3] || b[0] < -180 || b[2] > 180 || b[1] < -90 || b[3] > 90 {
			return fmt.Errorf("area.bbox: %v is not [west, south, east, north] in degrees", b)
		}
	}
	if _, _, err := c.DateRange(); err != nil {
		return err
	}
	if c.MaxCloudCover <= 0 || c.MaxCloudCover > 100 {
		return fmt.Errorf("max_cloud_cover: %g is outside (0, 100]", c.MaxCloudCover)
	}
	if err := checkBandNames("bands", c.Bands); err != nil {
		return err
	}
	if c.Grid.Resolution <= 0 {
		return fmt.Errorf("grid.resolution: %g is not positive", c.Grid.Resolution)
	}
	if (c.Grid.EPSG == 0) != (len(c.Grid.Bounds) == 0) {
		return errors.New("grid: a user grid needs both epsg and bounds")
	}
	if len(c.Grid.Bounds) > 0 && (len(c.Grid.Bounds) != 4 || c.Grid.Bounds[0] >= c.Grid.Bounds[2] || c.Grid.Bounds[1] >= c.Grid.Bounds[3]) {
		return fmt.Errorf("grid.bounds: %v is not [minx, miny, maxx, maxy]", c.Grid.Bounds)
	}
	if !slices.Contains([]string{"bilinear", "cubic", "nearest"}, c.Resampling.Reflectance) {
		return fmt.Errorf("resampling.reflectance: %q is not bilinear, cubic or nearest", c.Resampling.Reflectance)
	}
	if s.Labels == "" && !slices.Contains([]string{"mode", "nearest"}, c.Resampling.Labels) {
		return fmt.Errorf("resampling.labels: %q is not mode or nearest", c.Resampling.Labels)
	}
	for _, v := range c.Mask.DropSCL {
		if v < 0 || v > 11 {
			return fmt.Errorf("mask.drop_scl: %d is not an SCL class (0–11)", v)
		}
	}
	if c.Mask.Band != "" && len(c.Mask.DropSCL) > 0 {
		return errors.New("mask: a mask band and drop_scl exclude each other (the band's nonzero pixels are dropped)")
	}
	if slices.Contains(c.Bands, c.Mask.Band) {
		return fmt.Errorf("mask.band: %s is one of the stacked bands, not a mask", c.Mask.Band)
	}
	if _, err := c.TemporalSpec(); err != nil {
		return err
	}
	return c.validateOutput()
}

// validateVectorLabels checks a STAC source's label keys: source.labels
// replaces the label collection and needs its class field; the other
// label_* keys describe a vector layer, so they need one. Existence is not
// checked here: the layer may be a GDAL URL, read only when ingesting.
func (c IngestConfig) validateVectorLabels() error {
	s := c.Source
	if s.Labels == "" {
		if s.LabelField != "" || s.LabelLayer != "" || s.LabelsAllTouched || s.LabelGroupField != "" || s.LabelWeightField != "" || len(s.LabelCodes) > 0 {
			return errors.New("source: label_field, label_layer, labels_all_touched, label_group_field, label_weight_field and label_codes describe vector labels: set source.labels to a vector layer (or use them with source.rasters)")
		}
		return nil
	}
	if err := c.validateLabelCodes(); err != nil {
		return err
	}
	switch {
	case s.LabelCollection != "":
		return fmt.Errorf("source.labels: %s labels the tiles in place of source.label_collection (%s): set one or the other", s.Labels, s.LabelCollection)
	case s.LabelField == "":
		return fmt.Errorf("source.label_field: source.labels %s needs the attribute holding its features' class codes", s.Labels)
	case c.Resampling.Labels != "":
		return fmt.Errorf("resampling.labels: %q is not used with source.labels (vector labels are burned onto the grid, not resampled)", c.Resampling.Labels)
	}
	return nil
}

// validateLabelCodes checks source.label_codes: text keys, codes 1–255,
// no key twice once compared as text classes are.
func (c IngestConfig) validateLabelCodes() error {
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(c.Source.LabelCodes)) {
		code := c.Source.LabelCodes[k]
		key := raster.TextKey(k)
		switch {
		case key == "":
			return errors.New("source.label_codes: an empty value: keys are the class field's text values")
		case code < 1 || code > 255:
			return fmt.Errorf("source.label_codes: %q: %d: class codes are 1–255", k, code)
		case seen[key] != "":
			return fmt.Errorf("source.label_codes: %q and %q are the same value (values are compared case-insensitively)", seen[key], k)
		}
		seen[key] = k
	}
	return nil
}

// validateOutput checks the keys every source shares: window and output.
func (c IngestConfig) validateOutput() error {
	if c.Window < 512 || c.Window%512 != 0 || c.Window > 8192 {
		return fmt.Errorf("window: %d is not a multiple of 512 between 512 and 8192", c.Window)
	}
	if !slices.Contains([]string{"DEFLATE", "ZSTD", "LZW"}, c.Output.Compress) {
		return fmt.Errorf("output.compress: %q is not DEFLATE, ZSTD or LZW", c.Output.Compress)
	}
	if c.Output.BlockSize != 512 && c.Output.BlockSize != 1024 {
		return fmt.Errorf("output.blocksize: %d is not 512 or 1024", c.Output.BlockSize)
	}
	if err := CheckZarrNames(c.StackPlanes()); err != nil && c.StackFormats().Zarr() {
		return fmt.Errorf("output.stack: zarr: %w", err)
	}
	return nil
}

// checkBandNames fails on a name that is not a Sentinel-2 reflectance band
// or is listed twice.
func checkBandNames(key string, bands []string) error {
	seen := map[string]bool{}
	for _, b := range bands {
		if !isReflectanceBand(b) {
			return fmt.Errorf("%s: %q is not a Sentinel-2 reflectance band (B01…B12, B8A)", key, b)
		}
		if seen[b] {
			return fmt.Errorf("%s: %s listed twice", key, b)
		}
		seen[b] = true
	}
	return nil
}

// checkLayerNames checks the names of a raster source's image bands: any
// name once each. Those that are not Sentinel-2 reflectance bands (an
// elevation or NDVI layer, say) are layers lulc leaves out of the stack.
func checkLayerNames(names []string) error {
	seen := map[string]bool{}
	for i, b := range names {
		switch {
		case strings.TrimSpace(b) == "":
			return fmt.Errorf("source.bands[%d]: an empty name: name every image band, also those lulc leaves out", i)
		case seen[b]:
			return fmt.Errorf("source.bands: %s listed twice", b)
		}
		seen[b] = true
	}
	return nil
}

// isReflectanceBand reports whether name is a Sentinel-2 reflectance band.
func isReflectanceBand(name string) bool {
	_, ok := catalog.DefaultAssetKeys[name]
	return ok && name != "SCL" && name != "labels"
}

// SkippedLayers are the names of source.bands that are not Sentinel-2
// reflectance bands and that layers: does not stack: image layers left
// out of the stack.
func (c IngestConfig) SkippedLayers() []string {
	var out []string
	for _, b := range c.Source.Bands {
		if !isReflectanceBand(b) && !slices.Contains(c.LayerNames(), b) {
			out = append(out, b)
		}
	}
	return out
}

// CheckStackPlanes accepts a stack's planes: Sentinel-2 bands, then
// temporal planes by their canonical feature names (p10(ndvi)).
func CheckStackPlanes(key string, planes []string) error {
	nb := 0
	for nb < len(planes) {
		if _, ok := catalog.DefaultAssetKeys[planes[nb]]; !ok {
			break
		}
		nb++
	}
	if err := checkBandNames(key, planes[:nb]); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range planes[nb:] {
		f, err := features.ParseFeature(p)
		if (err != nil || f.Kind != "temporal" || f.Name != p) && features.CheckLayerName(p) != nil {
			return fmt.Errorf("%s: %q is neither a Sentinel-2 reflectance band (B01…B12, B8A), a temporal plane such as p10(ndvi) nor a layer's name", key, p)
		}
		if seen[p] {
			return fmt.Errorf("%s: %s listed twice", key, p)
		}
		seen[p] = true
	}
	return nil
}

// validateRasters checks a config whose source is rasters: the images'
// description, the pairs, and that no key of the STAC path is set (it
// would be silently ignored).
func (c IngestConfig) validateRasters() error {
	s := c.Source
	if s.Labels != "" {
		return errors.New("source.labels: not used with source.rasters (each pair names its own labels, source.rasters[i].labels)")
	}
	stacOnly := []struct {
		key string
		set bool
	}{
		{"source.collection", s.Collection != ""}, {"source.label_collection", s.LabelCollection != ""},
		{"source.cloud_filter", s.CloudFilter != ""}, {"source.limit", s.Limit != 0},
		{"source.assets", len(s.Assets) > 0}, {"source.sas_token", s.SASToken != ""},
		{"source.sas_token_url", s.SASTokenURL != ""},
		{"source.allow_hrefs", len(s.AllowHrefs) > 0},
		{"source.max_pages, max_items, request_timeout and search_timeout", s.MaxPages != 0 || s.MaxItems != 0 || s.RequestTimeout != 0 || s.SearchTimeout != 0},
		{"area", len(c.Area.BBox) > 0 || c.Area.GeoJSON != ""},
		{"dates", c.Dates.Start != "" || c.Dates.End != ""},
		{"max_cloud_cover", c.MaxCloudCover != 0},
		{"grid.epsg and grid.bounds", c.Grid.EPSG != 0 || len(c.Grid.Bounds) > 0},
		{"resampling", c.Resampling.Reflectance != "" || c.Resampling.Labels != ""},
		{"mask", c.Mask.DropSCL != nil || c.Mask.Band != ""},
		{"temporal", c.Temporal != nil},
	}
	for _, k := range stacOnly {
		if k.set {
			return fmt.Errorf("%s: not used with source.rasters (each image is stacked whole, on its own grid, without SCL)", k.key)
		}
	}
	if len(s.Bands) == 0 {
		return errors.New("source.bands: rasters need their band order (one name per image band)")
	}
	if err := checkLayerNames(s.Bands); err != nil {
		return err
	}
	if err := c.validateLabelCodes(); err != nil {
		return err
	}
	if s.Scale == 0 || math.IsNaN(s.Scale) || math.IsInf(s.Scale, 0) {
		return errors.New("source.scale: rasters need a finite, non-zero scale (reflectance = value × scale + offset)")
	}
	if len(c.Bands) == 0 {
		return fmt.Errorf("source.bands [%s] names no Sentinel-2 reflectance band (B01…B12, B8A) to stack", strings.Join(s.Bands, ", "))
	}
	if err := checkBandNames("bands", c.Bands); err != nil {
		return err
	}
	for _, b := range c.Bands {
		if !slices.Contains(s.Bands, b) {
			return fmt.Errorf("bands: %s is not among source.bands [%s] (the images' bands)", b, strings.Join(s.Bands, ", "))
		}
	}
	if c.Grid.Resolution < 0 {
		return fmt.Errorf("grid.resolution: %g is negative", c.Grid.Resolution)
	}
	tiles := map[string]int{}
	for i, p := range s.Rasters {
		if p.Image == "" || p.Labels == "" {
			return fmt.Errorf("source.rasters[%d]: image and labels are both required", i)
		}
		name := p.TileName()
		if err := CheckTileName(name); err != nil {
			return fmt.Errorf("source.rasters[%d].tile: %w", i, err)
		}
		if j, ok := tiles[name]; ok {
			return fmt.Errorf("source.rasters[%d]: tile %q is also rasters[%d]'s (set tile to tell them apart)", i, name, j)
		}
		tiles[name] = i
		if p.Datetime == "" {
			continue // locate warns: the items will carry the epoch
		}
		if _, err := ParseDatetime(p.Datetime); err != nil {
			return fmt.Errorf("source.rasters[%d].datetime: %q is not RFC 3339 or YYYY-MM-DD", i, p.Datetime)
		}
	}
	return c.validateOutput()
}

// ParseDatetime reads an RFC 3339 time or a date (midnight UTC).
func ParseDatetime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Parse(time.DateOnly, s)
}

// DateRange parses the dates; the end day is included whole.
func (c IngestConfig) DateRange() (start, end time.Time, err error) {
	if c.Dates.Start == "" || c.Dates.End == "" {
		return start, end, errors.New("dates: start and end are required (YYYY-MM-DD)")
	}
	if start, err = time.Parse(time.DateOnly, c.Dates.Start); err != nil {
		return start, end, fmt.Errorf("dates.start: %q is not YYYY-MM-DD", c.Dates.Start)
	}
	if end, err = time.Parse(time.DateOnly, c.Dates.End); err != nil {
		return start, end, fmt.Errorf("dates.end: %q is not YYYY-MM-DD", c.Dates.End)
	}
	if end.Before(start) {
		return start, end, fmt.Errorf("dates: end %s is before start %s", c.Dates.End, c.Dates.Start)
	}
	return start, end.Add(24*time.Hour - time.Nanosecond), nil
}

// Redacted returns a copy of the config that is safe to write: the SAS
// token and the values of credential GDAL options are replaced (and
// registered with package redact).
func (c IngestConfig) Redacted() IngestConfig {
	if c.Source.SASToken != "" {
		redact.Add(c.Source.SASToken)
		c.Source.SASToken = redact.Mark
	}
	c.Source.GDAL = redact.Options(c.Source.GDAL)
	return c
}

// Hash identifies the resolved config (defaults included). Credentials
// are left out, so that a rotated token resumes the same run and the hash
// reveals nothing of them.
func (c IngestConfig) Hash() string {
	c = c.Redacted()
	if c.Source.SASToken != "" {
		c.Source.SASToken = ""
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MaskConfig says which pixels of a scene are dropped before compositing.
// In YAML it is a word or a mapping:
//
//	mask: scl                 # the scene classification, default classes dropped
//	mask: {drop_scl: [3, 8]}  # the scene classification, these classes dropped
//	mask: none                # nothing dropped: SCL is not read
//	mask: CLM                 # a mask asset (its key): nonzero pixels dropped
//	mask: {band: CLM}         # the same
//
// Products without SCL (re-exports, harmonised series) take none or a band
// of their own.
type MaskConfig struct {
	DropSCL []int `yaml:"drop_scl"`
	// Band is left out of the config's hash when empty, so that configs
	// written before it keep their hash (their plans and runs resume).
	Band string `yaml:"band" json:",omitempty"`
}

// IsZero reports an unset mask (the word scl before defaults, or a raster
// pair's, which has none), so that a resolved config leaves the key out.
func (m MaskConfig) IsZero() bool { return m.DropSCL == nil && m.Band == "" }

// MarshalYAML writes the form that reads back as m: none, a band's key, or
// the mapping of the classes dropped.
func (m MaskConfig) MarshalYAML() (any, error) {
	switch {
	case m.Band != "" && len(m.DropSCL) == 0:
		return m.Band, nil
	case m.Band == "" && m.DropSCL != nil && len(m.DropSCL) == 0:
		return "none", nil
	}
	return struct {
		DropSCL []int  `yaml:"drop_scl"`
		Band    string `yaml:"band,omitempty"`
	}{m.DropSCL, m.Band}, nil
}

// UnmarshalYAML reads the word form (scl, none or a band) or the mapping.
func (m *MaskConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "scl":
			*m = MaskConfig{}
		case "none":
			*m = MaskConfig{DropSCL: []int{}}
		case "":
			return fmt.Errorf("line %d: mask: empty (scl, none, a mask asset's key, or a mapping)", n.Line)
		default:
			*m = MaskConfig{Band: n.Value}
		}
		return m.checkBand(n.Line)
	}
	var plain struct {
		DropSCL []int  `yaml:"drop_scl"`
		Band    string `yaml:"band"`
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "drop_scl" && k != "band" {
				return fmt.Errorf("line %d: mask: unknown key %q (drop_scl or band)", n.Content[i].Line, k)
			}
		}
	}
	if err := n.Decode(&plain); err != nil {
		return err
	}
	*m = MaskConfig(plain)
	if m.Band != "" && len(m.DropSCL) == 0 {
		m.DropSCL = nil // as the word form reads it
	}
	return m.checkBand(n.Line)
}

// checkBand refuses a mask band that reads as a misspelt word form (SCL,
// None): the words are lowercase, and no asset is named after them.
func (m MaskConfig) checkBand(line int) error {
	if w := strings.ToLower(m.Band); w == "scl" || w == "none" {
		return fmt.Errorf("line %d: mask: %q: write the word form %s in lowercase (mask: %s), or name a mask asset other than %s", line, m.Band, w, w, w)
	}
	return nil
}

// SearchArea returns the bbox in lon/lat and, for a GeoJSON area, its geometry.
func (c IngestConfig) SearchArea() ([4]float64, json.RawMessage, error) {
	if len(c.Area.BBox) == 4 {
		return [4]float64(c.Area.BBox), nil, nil
	}
	body, err := os.ReadFile(c.Area.GeoJSON)
	if err != nil {
		return [4]float64{}, nil, fmt.Errorf("area.geojson: %w", err)
	}
	geom, bbox, err := geometryOf(body)
	if err != nil {
		return [4]float64{}, nil, fmt.Errorf("area.geojson %s: %w", c.Area.GeoJSON, err)
	}
	return bbox, geom, nil
}

// geometryOf extracts one geometry from a GeoJSON document (a geometry, a
// Feature, or a FeatureCollection with one feature) and its lon/lat bbox.
func geometryOf(body []byte) (json.RawMessage, [4]float64, error) {
	var doc struct {
		Type        string            `json:"type"`
		Geometry    json.RawMessage   `json:"geometry"`
		Features    []json.RawMessage `json:"features"`
		Coordinates json.RawMessage   `json:"coordinates"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, [4]float64{}, fmt.Errorf("not GeoJSON: %w", err)
	}
	switch doc.Type {
	case "FeatureCollection":
		if len(doc.Features) != 1 {
			return nil, [4]float64{}, fmt.Errorf("a FeatureCollection with %d features (want one)", len(doc.Features))
		}
		return geometryOf(doc.Features[0])
	case "Feature":
		return geometryOf(doc.Geometry)
	case "Polygon", "MultiPolygon":
	default:
		return nil, [4]float64{}, fmt.Errorf("geometry type %q is not Polygon or MultiPolygon", doc.Type)
	}
	var coords []float64
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case []any:
			if len(t) >= 2 {
				if x, ok := t[0].(float64); ok {
					if y, ok := t[1].(float64); ok {
						coords = append(coords, x, y)
						return
					}
				}
			}
			for _, e := range t {
				walk(e)
			}
		}
	}
	var anyCoords any
	if err := json.Unmarshal(doc.Coordinates, &anyCoords); err != nil {
		return nil, [4]float64{}, fmt.Errorf("coordinates: %w", err)
	}
	walk(anyCoords)
	if len(coords) < 6 {
		return nil, [4]float64{}, errors.New("polygon has fewer than three points")
	}
	b := [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for i := 0; i < len(coords); i += 2 {
		b[0], b[1] = min(b[0], coords[i]), min(b[1], coords[i+1])
		b[2], b[3] = max(b[2], coords[i]), max(b[3], coords[i+1])
	}
	return body, b, nil
}

// CheckTileName refuses a tile name from data (an item's s2:mgrs_tile or
// grid:code, its id, a plan's tile, a raster pair's tile, a manifest's
// tile) that cannot be a directory of its own in an output: what
// atomicfs.CheckName refuses, a hidden name (lulc's staging and spill
// entries start with a dot) and the names of lulc's own entries.
func CheckTileName(name string) error {
	if err := atomicfs.CheckName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, ".") {
		return fmt.Errorf("%w: %q: it starts with a dot, as lulc's hidden staging entries do", atomicfs.ErrBadName, name)
	}
	for _, r := range reservedNames {
		// Case-folded: on macOS and Windows file systems "Model" is "model".
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%w: %q: lulc writes its own %s there", atomicfs.ErrBadName, name, r)
		}
	}
	return nil
}

// reservedNames are the entries lulc writes at the root of an ingest,
// predict or run output (and of a job directory), which a tile's
// directory must not take: a tile named "model" would write into the
// run's model, one named "shards" among the tasks of an array job. The
// names are spelled here because the packages that write them import
// this one (pipeline's names test holds them to stage's constants).
var reservedNames = []string{
	"model", "shards", "draws", "collection", "collection.json", IngestConfigFile,
	"run.yaml", "report.json", "report.md", "draw.lulcd", "metrics.json",
}
