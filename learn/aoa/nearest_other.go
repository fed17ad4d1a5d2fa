//go:build !amd64

package aoa

// nearestVector is nil: only amd64 compares points by vectors.
var nearestVector func(blocks []float64, nf int, z []float64) float64
