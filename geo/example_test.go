package geo_test

import (
	"fmt"

	"github.com/lulc/lulc/geo"
)

// A Sentinel-2 tile's 10 m grid in UTM zone 31N: 10980 pixels a side
// from its upper-left corner.
func ExampleGrid_Bounds() {
	tile := geo.Grid{EPSG: 32631, Transform: [6]float64{600000, 10, 0, 5000040, 0, -10}, Width: 10980, Height: 10980}
	b := tile.Bounds()
	fmt.Printf("x %.0f to %.0f, y %.0f to %.0f\n", b[0], b[2], b[1], b[3])
	// Output: x 600000 to 709800, y 4890240 to 5000040
}
