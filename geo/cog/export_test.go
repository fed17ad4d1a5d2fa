package cog

// ForceBigTIFF has p lay out a BigTIFF whatever its size, for the tests
// of GDAL reading one (a raster big enough for one would take gigabytes).
func ForceBigTIFF(p *Plan) { p.big = true }
