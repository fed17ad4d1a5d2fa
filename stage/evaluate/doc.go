// Package evaluate scores a class map against reference labels (warped
// onto the map's grid when the grids differ): the confusion of every
// labelled pixel, or only of a split plane's held-out pixels, and the
// area estimate from a seeded stratified sample of pixels per map class,
// written as metrics.json and, with Options.Charts, a confusion chart.
package evaluate
