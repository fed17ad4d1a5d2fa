// Package ingest turns scenes into analysis-ready stacks: per tile, a
// plan of windows aligned to its grid, the bands of every date read
// (decoded by GDAL, or read compressed a row of windows ahead, for a
// device that decodes them or, when they are read over a network, for
// the CPU's own decoder), masked and composited on the engine, with
// the labels (raster classes, or vector layers burned onto the grid, text
// classes given codes) into the stack's COGs, its manifest and STAC item;
// and the stack's layers (elevation, slope, aspect, backscatter, rasters
// of the user's own: layers.go), made on the host before the windows and
// handed whole to the sinks.
// Ingest drives it from a config; the job layer (pipeline.Run) drives the
// same SourceTile into a stack in memory.
package ingest
