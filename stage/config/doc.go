// Package config holds the stages' configs as their YAML files spell
// them: IngestConfig (where the scenes are, the area, dates, bands, mask,
// grid, temporal planes and output encoding; or a user's own raster pairs)
// and TrainConfig (inputs, features, sampling, classes, forest, area of
// applicability), each parsed with lulc's defaults, validated with errors
// that name the key, hashed for resumption and written back redacted.
// It reads no pixels; the stages above it take its values.
package config
