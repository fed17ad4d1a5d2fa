package pipeline

import (
	"image/color"
	"math"
)

func rgba(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 0xff} }

// cogType is the media type of Cloud-Optimized GeoTIFF assets.
const cogType = "image/tiff; application=geotiff; profile=cloud-optimized"

// round9 keeps coordinates at 1e-9° so JSON stays stable and readable.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }
