// Package scenes finds the scenes an ingest maps: the STAC search of a
// static catalog or an API (with the href policy, signing and paging
// limits of package catalog; a static catalog read once for the scenes,
// their labels and the layers, Searcher), the items grouped by tile, the tile's
// output grid from its finest band, and the warning when a configured
// area covers little of a local catalog. It reads no pixels.
package scenes
