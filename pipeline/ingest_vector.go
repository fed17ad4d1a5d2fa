package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
)

// vectorRule is how the config burns a vector layer: its class field,
// layer and all-touched rule.
func vectorRule(cfg IngestConfig) raster.VectorLabels {
	s := cfg.Source
	return raster.VectorLabels{Field: s.LabelField, Layer: s.LabelLayer, AllTouched: s.LabelsAllTouched}
}

// burnVectorLabels burns the vector layer at href onto grid g (reprojected
// from the layer's CRS by GDAL) and returns the class codes, 0 where no
// feature lies, for the tile's windows to copy from. The sinks that keep
// them (groupSink, weightSink) get the features' group ids, and with
// source.label_weight_field their weights, burned by the same rule.
func burnVectorLabels(cfg IngestConfig, href string, g geo.Grid, sinks []tileSink) ([]uint8, error) {
	src, rule := cfg.Source, vectorRule(cfg)
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
// a vector layer and what its groups.tif and weights.tif hold, the same
// for raster pairs and STAC tiles.
func describeVectorLabels(m *manifest, cfg IngestConfig) {
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
}

// checkVectorLabels fails, before anything is written, when source.labels
// is set and GDAL opens no vector layer there (a missing file, a raster, a
// URL that does not answer), or one that yields no labels
// (censusVectorLabels).
func checkVectorLabels(cfg IngestConfig, log *slog.Logger) error {
	href := cfg.Source.Labels
	if href == "" {
		return nil
	}
	if !raster.IsVector(raster.GDALPath(href)) {
		return fmt.Errorf("source.labels: GDAL opens no vector layer at %s", href)
	}
	return censusVectorLabels(cfg, href, "source.labels", log)
}

// maxValuesShown bounds the unusable class values a message lists.
const maxValuesShown = 8

// censusVectorLabels reads the class field of every feature of a vector
// label layer (key is its config key, for messages). Features whose code
// burns no label (NULL, 0, negative, above 255, not whole, text) would
// leave their pixels silently unlabelled: they are counted and warned of,
// naming the field and the values; a layer with no usable code at all (or
// no feature) is an error naming the layer, the field and the values it
// holds.
func censusVectorLabels(cfg IngestConfig, href, key string, log *slog.Logger) error {
	c, err := raster.CensusLabels(raster.GDALPath(href), vectorRule(cfg))
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if err := raster.CheckFields(raster.GDALPath(href), vectorRule(cfg), raster.FieldCheck{Key: "source.label_group_field", Field: cfg.Source.LabelGroupField},
		raster.FieldCheck{Key: "source.label_weight_field", Field: cfg.Source.LabelWeightField}); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	field := cfg.Source.LabelField
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
func vectorManifest(ctx context.Context, m *manifest, cfg IngestConfig, opt Options) error {
	describeVectorLabels(m, cfg)
	layer, err := DescribeRasterFile(ctx, opt, cfg.Source.Labels)
	if err != nil {
		return fmt.Errorf("source.labels: %w", err)
	}
	m.Labels = []manifestItem{{ID: m.Tile, Assets: map[string]ManifestAsset{"labels": layer}}}
	return nil
}
