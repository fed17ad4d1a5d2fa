package sampling

import "github.com/lulc/lulc/geo/landcover"

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

// pendingTile is a tile in memory whose census (its labels by code and
// what the split makes of them, as screenStrip counts strips) is counted
// in the background from the moment it is drawn: done closes once
// counts holds it.
type pendingTile struct {
	done   chan struct{}
	counts labelCounts
}

// countTile starts the census of a tile in memory (groups: its pixels'
// group ids for a split by features; dn its bands, whose pixels bad finds
// missing are no candidates, as in strips) and queues it for Census
// (callers hold mu).
func (sp *Sampler) countTile(labels []uint8, groups []uint32, dn [][]uint16, bad dnTest, width, height int, ii uint64) {
	class := sp.classTable()
	t := &pendingTile{done: make(chan struct{})}
	sp.pending = append(sp.pending, t)
	cfg := sp.cfg
	go func() {
		defer close(t.done)
		_, t.counts = screenStrip(Strip{Labels: labels, Groups: groups}, stripPlace{ii: ii, w: width, height: height, dn: dn, bad: bad}, class, nil, cfg)
	}()
}

// Census returns the labelled pixels by code and what the split made of
// them, once the censuses of the tiles drawn in memory are counted.
func (sp *Sampler) Census() Census {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, t := range sp.pending {
		<-t.done
		sp.census.add(t.counts)
	}
	sp.pending = nil
	c := sp.census
	c.Partial = sp.partial
	return c
}
