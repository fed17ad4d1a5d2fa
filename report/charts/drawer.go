package charts

import "github.com/lulc/lulc/geo/landcover"

// Drawer draws the stages' pictures with this package's functions: it is
// what the commands and the bench set stage.Options.Charts to.
type Drawer struct{}

// Confusion draws a confusion matrix (Confusion).
func (Drawer) Confusion(path string, conf [][]int64, names []string, title string, counts bool) error {
	return Confusion(path, conf, names, title, counts)
}

// Importance draws feature importance (Importance).
func (Drawer) Importance(path string, names []string, values []float64, title string) error {
	return Importance(path, names, values, title)
}

// Quicklook draws a class map's quicklook (Quicklook).
func (Drawer) Quicklook(path string, codes []uint8, width, height, maxSide int, scheme landcover.Scheme) error {
	return Quicklook(path, codes, width, height, maxSide, scheme)
}
