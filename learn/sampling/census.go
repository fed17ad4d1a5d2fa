package sampling

import (
	"runtime"
	"sync"

	"github.com/lulc/lulc/geo/landcover"
)

// Census counts the labelled pixels a draw saw, by label code (before any
// remap), and what the split made of them: how many fell in validation
// blocks (or features), and how many training pixels the buffer dropped.
// Training reads it to tell a class the labels lack from one the split
// took away, and to say when the labels fit another scheme better.
type Census struct {
	// Labelled are the labelled pixels by code (code 0, unlabelled, is
	// never counted).
	Labelled [256]int64
	// Validation are the pixels of the scheme's classes (after the remap)
	// that the split sent to validation, by code.
	Validation [256]int64
	// Buffered are the training pixels the buffer dropped, by code.
	Buffered [256]int64
	// Partial says that some inputs came in merged draws, which record no
	// counts by code: the census covers only the others.
	Partial bool
}

// add adds a strip's counts.
func (c *Census) add(lc labelCounts) {
	for code := range 256 {
		c.Labelled[code] += lc.byCode[code]
		c.Validation[code] += lc.validation[code]
		c.Buffered[code] += lc.bufferedBy[code]
	}
}

// Codes returns the codes with labelled pixels, in order.
func (c Census) Codes() []uint8 {
	var out []uint8
	for code, n := range c.Labelled {
		if n > 0 {
			out = append(out, uint8(code))
		}
	}
	return out
}

// Total is the count of labelled pixels.
func (c Census) Total() int64 {
	var n int64
	for _, v := range c.Labelled {
		n += v
	}
	return n
}

// Covered is how many labelled pixels, and how many of the labels' codes,
// have a class of s, remap (from → to) counting a code as its target's.
func (c Census) Covered(s landcover.Scheme, remap map[uint8]uint8) (pixels int64, codes int) {
	for code, n := range c.Labelled {
		if n == 0 {
			continue
		}
		k := uint8(code)
		if to, ok := remap[k]; ok {
			k = to
		}
		if s.Has(k) {
			pixels += n
			codes++
		}
	}
	return pixels, codes
}

// pendingTile is a tile in memory whose split the census has yet to
// count: its labels (and group ids for a split by features), kept so that
// the draw itself does no more work than it did.
type pendingTile struct {
	labels        []uint8
	groups        []uint32
	width, height int
	ii            uint64
}

// countCodes adds a tile's labels to the census's counts by code (callers
// hold mu).
func (sp *Sampler) countCodes(labels []uint8) {
	// A tile's labels are a hundred million bytes: each core counts a
	// range, and the counts add up.
	parts := max(1, min(runtime.GOMAXPROCS(0), len(labels)>>20))
	counts := make([][256]int64, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			n := &counts[k]
			for _, code := range labels[k*len(labels)/parts : (k+1)*len(labels)/parts] {
				n[code]++
			}
		})
	}
	wg.Wait()
	for _, n := range counts {
		for code, v := range n[1:] {
			sp.census.Labelled[code+1] += v
		}
	}
}

// Census returns the labelled pixels by code and what the split made of
// them. The split of tiles drawn in memory is counted here, on first
// call, from their labels (as screenStrip counts strips).
func (sp *Sampler) Census() Census {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.pending) > 0 {
		var class [256]int
		for i := range class {
			class[i] = -1
		}
		for code, c := range sp.classIndex {
			class[code] = c
		}
		for _, t := range sp.pending {
			st := Strip{Labels: t.labels, Groups: t.groups}
			_, counts := screenStrip(st, stripPlace{ii: t.ii, w: t.width, height: t.height}, class, nil, sp.cfg)
			// The labels were counted by code when the tile was drawn.
			counts.byCode = [256]int64{}
			sp.census.add(counts)
		}
		sp.pending = nil
	}
	c := sp.census
	c.Partial = sp.partial
	return c
}
