package sampling

import (
	"fmt"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/pixel/features"
)

// Passes are the draw's two passes over a whole tile in memory, run by a
// device that holds the tile (a cuda.Mirror, through stage's engine):
// the twins of drawCount and drawCollect, which find the same
// candidates. The rest of the draw (bounds, selection, merging) stays on
// the host, so the samples are the CPU's, bit for bit.
type Passes interface {
	// Count adds every candidate's key to hist (reservoir k's bin b at
	// k<<r.Bits|b, for nres reservoirs), counts in off, by code, the
	// pixels whose code is outside the scheme, and in buffered the
	// training candidates the buffer drops.
	Count(r *DeviceRule, nres int, hist []uint32, off *[256]int64, buffered *int64) error
	// Collect returns, in any order, every candidate whose key is at
	// most its reservoir's bound; count[k] is how many reservoir k has.
	Collect(r *DeviceRule, bound []uint64, count []int) (Collected, error)
}

// ContextPasses are Passes whose device also computes the context
// features of chosen pixels of the tile it holds: the twin of
// features.Set.ContextAt with refl as every DN's reflectance (dst gets
// the set's context features of pixel (xs[p], ys[p]) at p×their count).
type ContextPasses interface {
	Passes
	Context(set *features.Set, refl *[65536]float32, xs, ys []int, dst []float32) error
}

// DeviceRule is the draw's rule as a device's passes take it: plain
// tables and the input's hashes (see drawRule).
type DeviceRule struct {
	// Reservoir is each code's training reservoir (class index × 2; the
	// validation one is that | 1), math.MaxUint16 outside the scheme.
	Reservoir [256]uint16
	// SplitBase and KeyBase are the hashes that blocks' splits and
	// pixels' keys extend: a block's split is Unit(Extend(Extend(
	// SplitBase, block row), block column)) < ValidationFraction, a
	// pixel's key Extend(Extend(KeyBase, row), column).
	SplitBase, KeyBase uint64
	Input              uint64 // the input's index: ids are Input<<40 | row<<20 | column
	Block              int
	// Buffer is Config.Buffer: a pixel of a training block within Buffer
	// pixels (Chebyshev) of a pixel of a validation block is no candidate
	// (see buffer.go); the tile's size says which blocks it has.
	Buffer             int
	ValidationFraction float64
	Missing            *[2048]uint32 // the DNs that are nodata, a bit each
	Bits               uint          // the top key bits the histograms count
}

// Collected is what the second pass finds: per candidate its key, id,
// reservoir, and its bands' DNs (the tile's band count a candidate).
type Collected struct {
	Key, ID   []uint64
	Reservoir []uint16
	DN        []uint16
}

// device is the rule as Passes take it.
func (rule *drawRule) device() *DeviceRule {
	d := &DeviceRule{Reservoir: rule.res2, KeyBase: rule.keyBase(), Input: rule.input, Block: rule.block, Buffer: rule.buffer,
		ValidationFraction: rule.valFrac, Missing: new([2048]uint32), Bits: rule.bits}
	d.SplitBase = rng.Extend(rng.Extend(rng.Start(rule.seed), 0x7a1), rule.input)
	for v := range 65536 {
		if rule.bad.missing(uint16(v)) {
			d.Missing[v>>5] |= 1 << (v & 31)
		}
	}
	return d
}

// drawInputOn is drawInput with the passes run by p: the same
// candidates, sorted and cut the same way (drawSelect).
func drawInputOn(p Passes, nb int, rule *drawRule, limit []uint64, capacity int) (out [][]entry, bands [][]float32, off [256]int64, buffered int64, err error) {
	nres, bins := rule.nres, 1<<rule.bits
	dr := rule.device()
	hist := make([]uint32, nres*bins)
	if err := p.Count(dr, nres, hist, &off, &buffered); err != nil {
		return nil, nil, off, 0, fmt.Errorf("draw: %w", err)
	}
	bound := drawBounds(hist, rule.bits, limit, capacity)
	count := make([]int, nres)
	for k := range nres {
		for _, c := range hist[k*bins : k*bins+int(bound[k]>>(64-rule.bits))+1] {
			count[k] += int(c)
		}
	}
	c, err := p.Collect(dr, bound, count)
	if err != nil {
		return nil, nil, off, 0, fmt.Errorf("draw: %w", err)
	}
	if len(c.ID) != len(c.Key) || len(c.Reservoir) != len(c.Key) || len(c.DN) != len(c.Key)*nb {
		return nil, nil, off, 0, fmt.Errorf("draw: %d keys, %d ids, %d reservoirs and %d DNs collected", len(c.Key), len(c.ID), len(c.Reservoir), len(c.DN))
	}
	out, bands = make([][]entry, nres), make([][]float32, nres)
	for k := range nres {
		out[k], bands[k] = make([]entry, 0, count[k]), make([]float32, 0, count[k]*nb)
	}
	for j, k := range c.Reservoir {
		if int(k) >= nres {
			return nil, nil, off, 0, fmt.Errorf("draw: a candidate in reservoir %d of %d", k, nres)
		}
		out[k] = append(out[k], entry{key: c.Key[j], id: c.ID[j], at: len(bands[k])})
		for _, v := range c.DN[j*nb : (j+1)*nb] {
			bands[k] = append(bands[k], rule.refl[v])
		}
	}
	for k := range nres {
		if len(out[k]) != count[k] {
			return nil, nil, off, 0, fmt.Errorf("draw: reservoir %d collected %d candidates, counted %d", k, len(out[k]), count[k])
		}
	}
	drawSelect(out, limit, capacity)
	return out, bands, off, buffered, nil
}
