// Package geo holds lulc's plain geospatial values, which every stage
// passes along and none needs GDAL for: a raster grid (its CRS, its
// geotransform, its size) and its extent. It has no dependencies, so
// that the packages that only carry grids build without cgo.
package geo

// Grid is a north-up raster grid: a CRS given by its EPSG code, a GDAL
// geotransform and a size in pixels.
type Grid struct {
	EPSG      int
	Transform [6]float64 // x0, dx, 0, y0, 0, dy (dy < 0)
	Width     int
	Height    int
}

// Bounds returns the grid's extent as minx, miny, maxx, maxy in CRS units.
func (g Grid) Bounds() [4]float64 {
	x0, y0 := g.Transform[0], g.Transform[3]
	x1 := x0 + float64(g.Width)*g.Transform[1]
	y1 := y0 + float64(g.Height)*g.Transform[5]
	return [4]float64{min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)}
}
