//go:build !amd64

package aoa

import "math"

// vectorNearest is false: only amd64 compares points by vectors.
var vectorNearest = false

// nearestVector is never reached where vectorNearest is false (NewIndex
// lays out no blocks); it searches eightBlocks' layout one lane at a time.
func nearestVector(blocks []float64, nf int, z []float64) float64 {
	best := math.Inf(1)
	for b := 0; b < len(blocks); b += 8 * nf {
		for lane := range 8 {
			var s float64
			for f, v := range z {
				d := v - blocks[b+f*8+lane]
				s = float64(s + float64(d*d))
				if s > best {
					break
				}
			}
			best = min(best, s)
		}
	}
	return best
}
