package pipeline

import (
	"fmt"
	"math"
	"strings"
)

// AreaWarnPercent is the share of a local catalog's scenes below which
// ingest warns that the configured area maps only part of them.
const AreaWarnPercent = 10.0

// areaCoverageWarning says, for a local catalog (the user's own scenes,
// source.catalog or --catalog), when the configured area covers less than
// AreaWarnPercent of the scenes' footprint (their tiles' lon/lat bboxes):
// an embedded config's area, kept with another scene, maps a corner of it
// without a word otherwise. It names the area, the share and the key to
// change; "" when the area covers enough, or the scenes come from a STAC
// API, where an area smaller than a tile is the usual case.
func areaCoverageWarning(cfg IngestConfig, area [4]float64, groups []tileItems) string {
	if cfg.Source.Catalog == "" || len(groups) == 0 {
		return ""
	}
	var covered, total float64
	var tiles []string
	for _, g := range groups {
		fp := g.items[0].BBox
		for _, it := range g.items[1:] {
			fp = [4]float64{min(fp[0], it.BBox[0]), min(fp[1], it.BBox[1]), max(fp[2], it.BBox[2]), max(fp[3], it.BBox[3])}
		}
		// Degrees of longitude shrink with latitude; the share within a
		// tile does not, but tiles at other latitudes weigh by it.
		k := math.Cos((fp[1] + fp[3]) / 2 * math.Pi / 180)
		total += k * bboxArea(fp)
		covered += k * bboxArea([4]float64{max(fp[0], area[0]), max(fp[1], area[1]), min(fp[2], area[2]), min(fp[3], area[3])})
		tiles = append(tiles, g.tile)
	}
	if total <= 0 {
		return ""
	}
	share := 100 * covered / total
	if share >= AreaWarnPercent {
		return ""
	}
	key, what := "area.bbox", fmt.Sprintf("area.bbox [%g, %g, %g, %g]", area[0], area[1], area[2], area[3])
	if len(cfg.Area.BBox) != 4 {
		key, what = "area.geojson", fmt.Sprintf("area.geojson %s (bbox [%g, %g, %g, %g])", cfg.Area.GeoJSON, area[0], area[1], area[2], area[3])
	}
	return fmt.Sprintf("area: %s covers %.1f %% of the catalog's scenes (tiles %s): only that part is mapped; set %s to the part to map (the scenes' bboxes are in their items)",
		what, share, strings.Join(tiles, ", "), key)
}

// bboxArea is a lon/lat bbox's area in square degrees, 0 when empty.
func bboxArea(b [4]float64) float64 {
	return max(0, b[2]-b[0]) * max(0, b[3]-b[1])
}
