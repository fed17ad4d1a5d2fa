package stage

import "github.com/lulc/lulc/geo/landcover"

// Charts draws the pictures the stages write beside their data: Train's
// confusion.png and importance.png, Evaluate's confusion.png and each
// predicted tile's quicklook.png. Drawing is no part of the core: the
// commands and the bench set Options.Charts to package charts' drawer
// (charts.Drawer), and with none set the stages write no PNGs and name
// none (no quicklook asset in the tiles' STAC items).
type Charts interface {
	// Confusion writes a heat map of a confusion matrix (reference rows
	// × predicted columns) of the named classes to path; counts prints
	// pixel counts in the cells rather than each row's shares.
	Confusion(path string, conf [][]int64, names []string, title string, counts bool) error
	// Importance writes bars of the named features' importance to path.
	Importance(path string, names []string, values []float64, title string) error
	// Quicklook writes a class map of width × height codes, at most
	// maxSide pixels on a side, in the scheme's colours with its legend,
	// to path.
	Quicklook(path string, codes []uint8, width, height, maxSide int, scheme landcover.Scheme) error
}
