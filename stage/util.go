package stage

import (
	"fmt"
	"image/color"
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/internal/atomicfs"
)

// RGBA is the opaque colour (r, g, b).
func RGBA(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 0xff} }

// CogType is the media type of Cloud-Optimized GeoTIFF assets.
const CogType = "image/tiff; application=geotiff; profile=cloud-optimized"

// round9 keeps coordinates at 1e-9° so JSON stays stable and readable.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// WriteResolvedConfig writes a config as YAML with its own key names, so
// that the file can be given back to the command that wrote it.
func WriteResolvedConfig(path string, cfg any) error {
	body, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfs.WriteFile(path, body)
}
