package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// vectorLabels are a tile's labels as a vector layer: its href, the codes
// of its text classes, and what its class field holds.
type vectorLabels struct {
	href   string
	codes  *labelCodes // nil when the field holds numbers
	census raster.LabelCensus
}

// labelCodes is how the text classes of vector labels become class codes,
// decided once for all of an ingest's layers so that every tile codes a
// class alike.
type labelCodes struct {
	codes map[string]uint8 // by raster.TextKey
	// from says how they were decided, for the manifest and the log.
	from string
	// scheme names the classes.
	scheme *landcover.Scheme
}

// labelScheme is the scheme the text classes name (nil for none, or for
// numeric classes).
func (v *vectorLabels) labelScheme() *landcover.Scheme {
	if v == nil || v.codes == nil {
		return nil
	}
	return v.codes.scheme
}

// vectorRule is how the config burns a vector layer: its class field,
// layer, all-touched rule and the codes of text classes.
func vectorRule(cfg config.IngestConfig, codes *labelCodes) raster.VectorLabels {
	s := cfg.Source
	v := raster.VectorLabels{Field: s.LabelField, Layer: s.LabelLayer, AllTouched: s.LabelsAllTouched}
	if codes != nil {
		v.Codes = codes.codes
	}
	return v
}

// configCodes is source.label_codes keyed as text classes are compared.
func configCodes(cfg config.IngestConfig) map[string]uint8 {
	if len(cfg.Source.LabelCodes) == 0 {
		return nil
	}
	m := map[string]uint8{}
	for k, c := range cfg.Source.LabelCodes {
		m[raster.TextKey(k)] = uint8(c) // validateLabelCodes kept 1–255
	}
	return m
}

// resolveVectorLabels reads the class field of every layer at hrefs (keys
// are their config keys, for messages), decides the codes of text classes
// (decideCodes) and checks that each layer yields labels, before anything
// is written.
func resolveVectorLabels(cfg config.IngestConfig, hrefs, keys []string, log *slog.Logger) ([]*vectorLabels, error) {
	out := make([]*vectorLabels, len(hrefs))
	var text []raster.LabelValue
	given := configCodes(cfg)
	for i, href := range hrefs {
		if j := slices.Index(hrefs[:i], href); j >= 0 {
			// Pairs often share one layer: it is read and judged once.
			out[i] = out[j]
			continue
		}
		c, err := raster.CensusLabels(raster.GDALPath(href), raster.VectorLabels{Field: cfg.Source.LabelField, Layer: cfg.Source.LabelLayer, Codes: given})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keys[i], err)
		}
		if err := raster.CheckFields(raster.GDALPath(href), vectorRule(cfg, nil), raster.FieldCheck{Key: "source.label_group_field", Field: cfg.Source.LabelGroupField},
			raster.FieldCheck{Key: "source.label_weight_field", Field: cfg.Source.LabelWeightField}); err != nil {
			return nil, fmt.Errorf("%s: %w", keys[i], err)
		}
		out[i] = &vectorLabels{href: href, census: c}
		text = append(text, c.Text...)
	}
	codes := decideCodes(cfg, text)
	for i, v := range out {
		if slices.Index(out, v) < i {
			continue // a layer of an earlier pair
		}
		v.codes = codes
		if codes != nil && given == nil {
			// The census is taken again with the codes decided, so that it
			// counts what the burn will burn.
			c, err := raster.CensusLabels(raster.GDALPath(v.href), vectorRule(cfg, codes))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", keys[i], err)
			}
			v.census = c
		}
		if err := judgeCensus(cfg, v, keys[i], log); err != nil {
			return nil, err
		}
	}
	if codes != nil {
		log.Info("text classes coded "+codes.describe(), "field", cfg.Source.LabelField, "classes", len(codes.codes))
	}
	return out, nil
}

// decideCodes decides the codes of the layers' text classes (text, their
// values): source.label_codes when given; else, when every value is a
// class name of one built-in scheme, that scheme's codes; else the values
// numbered 1, 2, … in sorted order, as a scheme named after the field. It
// returns nil when no layer holds text and no codes are given.
func decideCodes(cfg config.IngestConfig, text []raster.LabelValue) *labelCodes {
	if given := configCodes(cfg); given != nil {
		return &labelCodes{codes: given, from: "source.label_codes", scheme: givenScheme(cfg)}
	}
	// The distinct values, by key, first spelling kept.
	names := map[string]string{}
	for _, v := range text {
		if k := raster.TextKey(v.Value); names[k] == "" {
			names[k] = v.Value
		}
	}
	if len(names) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(names))
	for _, b := range []landcover.Scheme{landcover.WorldCover, landcover.EsriIO} {
		codes := map[string]uint8{}
		for _, k := range keys {
			if c, ok := b.CodeOf(k); ok {
				codes[k] = c
			}
		}
		if len(codes) == len(keys) {
			return &labelCodes{codes: codes, from: "the class names of scheme " + b.Name, scheme: &b}
		}
	}
	// Codes are 1–255: values beyond stay unmapped, and are counted.
	keys = keys[:min(len(keys), 255)]
	spelled := make([]string, len(keys))
	codes := map[string]uint8{}
	for i, k := range keys {
		spelled[i], codes[k] = names[k], uint8(i+1)
	}
	s := landcover.Numbered(cfg.Source.LabelField, spelled)
	return &labelCodes{codes: codes, from: fmt.Sprintf("the values of field %s, numbered 1–%d in sorted order", cfg.Source.LabelField, len(keys)), scheme: &s}
}

// givenScheme is the scheme of source.label_codes: the built-in scheme
// whose codes they all are, else one class per code, named by the first
// of its values in sorted order, named after the field.
func givenScheme(cfg config.IngestConfig) *landcover.Scheme {
	given := cfg.Source.LabelCodes
	for _, b := range []landcover.Scheme{landcover.WorldCover, landcover.EsriIO} {
		if !slices.ContainsFunc(slices.Collect(maps.Values(given)), func(c int) bool { return !b.Has(uint8(c)) }) {
			return &b
		}
	}
	byCode := map[int]string{}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if byCode[given[k]] == "" {
			byCode[given[k]] = k
		}
	}
	codes := slices.Sorted(maps.Keys(byCode))
	names := make([]string, len(codes))
	for i, c := range codes {
		names[i] = byCode[c]
	}
	// Numbered gives the colours; the codes are the config's.
	s := landcover.Numbered(cfg.Source.LabelField, names)
	for i, c := range codes {
		s.Classes[i].Code = uint8(c)
	}
	return &s
}

// describe says how the codes were decided and lists them.
func (lc *labelCodes) describe() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(lc.codes)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, lc.codes[k]))
	}
	return fmt.Sprintf("from %s: %s", lc.from, strings.Join(parts, ", "))
}

// burnVectorLabels burns the vector layer at href onto grid g (reprojected
// from the layer's CRS by GDAL) and returns the class codes, 0 where no
// feature lies, for the tile's windows to copy from. The sinks that keep
// them (groupSink, weightSink) get the features' group ids, and with
// source.label_weight_field their weights, burned by the same rule.
func burnVectorLabels(cfg config.IngestConfig, vec *vectorLabels, g geo.Grid, sinks []TileSink) ([]uint8, error) {
	src, rule, href := cfg.Source, vectorRule(cfg, vec.codes), vec.href
	// GDAL opens URLs through its virtual file systems (/vsicurl/, /vsis3/).
	layer := raster.GDALPath(href)
	labels, err := raster.RasterizeLabels(layer, rule, g)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	// Each plane is burned once, and only when a sink keeps it: a burn
	// reads the whole layer again.
	var groups []uint32
	for _, s := range sinks {
		gs, ok := s.(groupSink)
		if !ok {
			continue
		}
		if groups == nil {
			if groups, err = raster.RasterizeGroups(layer, rule, src.LabelGroupField, g); err != nil {
				return nil, fmt.Errorf("label groups: %w", err)
			}
		}
		if err := gs.WriteGroups(groups); err != nil {
			return nil, fmt.Errorf("label groups: %w", err)
		}
	}
	if src.LabelWeightField == "" {
		return labels, nil
	}
	var weights []uint8
	for _, s := range sinks {
		ws, ok := s.(weightSink)
		if !ok {
			continue
		}
		if weights == nil {
			if weights, err = raster.RasterizeWeights(layer, rule, src.LabelWeightField, g); err != nil {
				return nil, fmt.Errorf("label weights: %w", err)
			}
		}
		if err := ws.WriteWeights(weights); err != nil {
			return nil, fmt.Errorf("label weights: %w", err)
		}
	}
	return labels, nil
}

// describeVectorLabels records in m how a tile's labels were burned from
// a vector layer, how its text classes were coded, which values burned
// no label, and what its groups.tif and weights.tif hold, the same for
// raster pairs and STAC tiles.
func describeVectorLabels(m *stage.Manifest, cfg config.IngestConfig, vec *vectorLabels) {
	src := cfg.Source
	rule := "the pixels whose centre a polygon contains"
	if src.LabelsAllTouched {
		rule = "every pixel a polygon touches"
	}
	m.LabelResampling = fmt.Sprintf("burned by GDAL's rasterizer from field %s (%s; a point's pixel; later features win)", src.LabelField, rule)
	m.LabelGroups = "each feature's FID + 1 (0: no feature)"
	if src.LabelGroupField != "" {
		m.LabelGroups = "field " + src.LabelGroupField + " (0: no feature)"
	}
	if src.LabelWeightField != "" {
		m.LabelWeights = "field " + src.LabelWeightField + ", rounded (0: no feature, or never drawn)"
	}
	if vec.codes != nil {
		m.LabelCodes = &stage.ManifestCodes{From: vec.codes.from, Codes: vec.codes.codes}
	}
	for _, u := range vec.census.Unusable {
		m.LabelsUnused = append(m.LabelsUnused, stage.ManifestValue{Value: u.Value, Why: u.Why, Features: u.Count})
	}
}

// CheckVectorLabels fails, before anything is written, when source.labels
// is set and GDAL opens no vector layer there (a missing file, a raster, a
// URL that does not answer), or one that yields no labels; it returns the
// layer's labels (nil without source.labels).
func CheckVectorLabels(cfg config.IngestConfig, log *slog.Logger) (*vectorLabels, error) {
	href := cfg.Source.Labels
	if href == "" {
		return nil, nil
	}
	if !raster.IsVector(raster.GDALPath(href)) {
		return nil, fmt.Errorf("source.labels: GDAL opens no vector layer at %s", href)
	}
	vecs, err := resolveVectorLabels(cfg, []string{href}, []string{"source.labels"}, log)
	if err != nil {
		return nil, err
	}
	return vecs[0], nil
}

// maxValuesShown bounds the unusable class values a message lists.
const maxValuesShown = 8

// judgeCensus judges what a layer's class field holds (key is its config
// key, for messages). Features whose value burns no label (NULL, 0,
// negative, above 255, not whole, text no code maps) would leave their
// pixels silently unlabelled: they are counted and warned of, naming the
// field and the values; a layer with no usable value at all (or no
// feature) is an error naming the layer, the field and the values it
// holds.
func judgeCensus(cfg config.IngestConfig, v *vectorLabels, key string, log *slog.Logger) error {
	c, href, field := v.census, v.href, cfg.Source.LabelField
	switch {
	case c.Features == 0:
		return fmt.Errorf("%s %s: layer %s has no features: it yields no labels", key, href, c.Layer)
	case c.Usable == 0:
		return fmt.Errorf("%s %s: layer %s yields no labels: field %s holds no class code 1–255 in its %d feature(s), only %s",
			key, href, c.Layer, field, c.Features, c.Describe(maxValuesShown))
	case c.Bad() > 0:
		log.Warn(fmt.Sprintf("%s %s: %d of %d feature(s) of layer %s burn no label: field %s holds %s",
			key, href, c.Bad(), c.Features, c.Layer, field, c.Describe(maxValuesShown)), "field", field, "unusable", c.Bad())
	}
	return nil
}

// vectorExtension is the file extension of a vector layer's href (query
// left out), or "" when it has none.
func vectorExtension(href string) string {
	href, _, _ = strings.Cut(href, "?")
	return path.Ext(href)
}

// vectorManifest fills a STAC tile's manifest with its vector labels: how
// they were burned, and the layer's href, size and SHA-256 (for a local
// file) as its label source.
func vectorManifest(ctx context.Context, m *stage.Manifest, cfg config.IngestConfig, vec *vectorLabels, opt stage.Options) error {
	describeVectorLabels(m, cfg, vec)
	layer, err := DescribeRasterFile(ctx, opt, cfg.Source.Labels)
	if err != nil {
		return fmt.Errorf("source.labels: %w", err)
	}
	m.Labels = []stage.ManifestItem{{ID: m.Tile, Assets: map[string]stage.ManifestAsset{"labels": layer}}}
	return nil
}
