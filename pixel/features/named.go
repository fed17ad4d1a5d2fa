package features

import (
	"fmt"
	"slices"
	"strings"
)

// The named feature sets, which configs may give in place of a list, or
// among its items (features: [per-pixel, mean(B08, 31)]). Each expands to
// a fixed list: a model records the list, never the name. Names are
// written as a YAML list of a config reads them: arguments after a comma
// without a space.
var named = map[string][]string{
	"per-pixel": perPixel,
	"context":   contextSet(),
	"default":   slices.Concat(perPixel, contextSet()),
	"temporal":  slices.Concat(perPixel, contextSet(), temporalSet),
}

// perPixel are the ten 10 m and 20 m bands and ten indices: what a pixel
// says of itself.
var perPixel = []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12",
	"ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "evi", "savi", "bsi", "ndre1"}

// temporalSet are the temporal planes an ingest with a temporal section
// writes by default: percentiles of NDVI, NDWI, B08 and B11 over the dates,
// and NDVI by season.
var temporalSet = []string{"p10(ndvi)", "p50(ndvi)", "p90(ndvi)", "p10(ndwi)", "p50(ndwi)", "p90(ndwi)",
	"p10(B08)", "p50(B08)", "p90(B08)", "p10(B11)", "p50(B11)", "p90(B11)",
	"season(ndvi,spring)", "season(ndvi,summer)", "season(ndvi,autumn)"}

// contextSet is the mean, standard deviation and range over 7×7 and 15×15
// windows of B04, B08, B11, NDVI, NDWI and NDBI (36 features; on the real
// TerraMind patches they raise macro-F1 by 7 points over the per-pixel
// set: docs/train.md, "Context features: accuracy").
func contextSet() []string {
	var out []string
	for _, v := range []string{"B04", "B08", "B11", "ndvi", "ndwi", "ndbi"} {
		for _, size := range []int{7, 15} {
			for _, stat := range []string{"mean", "std", "range"} {
				out = append(out, fmt.Sprintf("%s(%s,%d)", stat, v, size))
			}
		}
	}
	return out
}

// SetNames lists the named feature sets, sorted.
func SetNames() []string {
	var out []string
	for n := range named {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Named returns the features of a named set (a copy), and whether name
// is one.
func Named(name string) ([]string, bool) {
	f, ok := named[strings.TrimSpace(name)]
	return slices.Clone(f), ok
}

// Expand replaces each item of names that names a set with the set's
// features, in place. A feature a set gives that an earlier item gave is
// left out, and so is an item a set gave before it; an item written twice
// stays twice, for the feature set's check to name.
func Expand(names []string) []string {
	var out []string
	bySet := map[string]bool{} // added, and by a set
	for _, n := range names {
		set, ok := named[strings.TrimSpace(n)]
		if !ok {
			// Kept unless a set gave it, also when written a second time.
			if !bySet[n] {
				out = append(out, n)
				bySet[n] = false
			}
			continue
		}
		for _, f := range set {
			if _, seen := bySet[f]; !seen {
				out = append(out, f)
				bySet[f] = true
			}
		}
	}
	return out
}
