package forest

import "fmt"

// Proba writes each row's class probabilities, the mean over trees, into
// out (x.N × Classes, row-major). Sums run in tree order in float32, so
// results do not depend on threading.
func (f *Forest) Proba(x *Binned, out []float32) error {
	if x.F != f.Features {
		return fmt.Errorf("predict: %d features, the forest has %d", x.F, f.Features)
	}
	c := f.Classes
	if len(out) != x.N*c {
		return fmt.Errorf("predict: output of %d for %d rows × %d classes", len(out), x.N, c)
	}
	const chunk = 4096
	inv := 1 / float32(len(f.Trees))
	parallel((x.N+chunk-1)/chunk, func(k int) {
		lo, hi := k*chunk, min(x.N, (k+1)*chunk)
		acc := out[lo*c : hi*c]
		clear(acc)
		for ti := range f.Trees {
			t := &f.Trees[ti]
			for i := lo; i < hi; i++ {
				n := int32(0)
				for t.Feature[n] >= 0 {
					if x.Codes[int(t.Feature[n])*x.N+i] <= t.Bin[n] {
						n = t.Left[n]
					} else {
						n = t.Right[n]
					}
				}
				p := t.Probs[int(t.Leaf[n])*c : int(t.Leaf[n])*c+c]
				row := acc[(i-lo)*c : (i-lo)*c+c]
				for j := range c {
					row[j] += p[j]
				}
			}
		}
		for j := range acc {
			acc[j] *= inv
		}
	})
	return nil
}

// Classify returns each row's most probable class index (ties to the lower
// index) and that probability.
func (f *Forest) Classify(x *Binned) ([]uint8, []float32, error) {
	c := f.Classes
	prob := make([]float32, x.N*c)
	if err := f.Proba(x, prob); err != nil {
		return nil, nil, err
	}
	cls := make([]uint8, x.N)
	conf := make([]float32, x.N)
	for i := range x.N {
		row := prob[i*c : i*c+c]
		best := 0
		for j := 1; j < c; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		cls[i], conf[i] = uint8(best), row[best]
	}
	return cls, conf, nil
}

// Nodes returns the number of nodes over all trees and the deepest level.
func (f *Forest) Nodes() (nodes, depth int) {
	for _, t := range f.Trees {
		nodes += len(t.Feature)
		d := make([]int, len(t.Feature))
		for n := range t.Feature {
			if t.Feature[n] >= 0 {
				d[t.Left[n]], d[t.Right[n]] = d[n]+1, d[n]+1
			}
			depth = max(depth, d[n])
		}
	}
	return nodes, depth
}
