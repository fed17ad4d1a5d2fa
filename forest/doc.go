// Package forest trains and evaluates random forests on binned pixel
// features: quantile binning, the CPU histogram forest that is the exact twin
// of the GPU forest, the golearn baseline adapter, the model file and metrics.
//
// It is pure Go with no cgo, so its test binaries run on GPU hosts without
// GDAL. The forest itself arrives with the training stage; until then the
// package holds only this description of its role.
package forest
