// Package predict maps tiles with a model: the streaming read, features
// and prediction of package inference on the engine, counted against the
// tile's labels as it goes (a tile in memory may still be composited:
// Input.Composited), the class and confidence COGs, the area of
// applicability's map, the quicklook and the STAC items of the maps.
package predict
