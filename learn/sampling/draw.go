package sampling

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/pixel/features"
)

// The draw from a tile in memory runs in two data-parallel passes over the
// tile's rows, split into one part per core, with no sequential step per
// pixel:
//
//  1. drawCount keys every candidate (a pixel whose code is in the scheme
//     and whose bands are all present) and counts, per reservoir (class and
//     split), its keys' top bits: a histogram per part.
//  2. The summed histograms give each reservoir a bound under which this
//     input's max_per_class smallest keys lie (drawBounds), and each part
//     its exact place for the candidates under it (a scan of the counts).
//  3. drawCollect keys the pixels again and writes the candidates under the
//     bound, with their reflectances, to their places.
//
// drawSelect then sorts each reservoir's candidates by (key, id) and keeps
// max_per_class, and the sampler merges them with what earlier inputs kept.
// The result is the strip path's, whatever the number of parts: the same
// pixels, the same reflectance bits (DN → float32 → inputReflectance, as
// a table). Nodata is tested on the DNs, and only the candidates' bands
// become reflectances. The passes are plain functions of slices (labels,
// DN planes, histograms), in the shape of a GPU kernel pair: histogram,
// scan, compaction, then a radix sort per reservoir.

// drawNone marks a pixel that is no candidate in a row's reservoir indices.
const drawNone = math.MaxUint16

// drawTile is an input in memory as the draw reads it.
type drawTile struct {
	width, height int
	labels        []uint8    // class codes, row-major
	dn            [][]uint16 // per band, row-major
	// groups are the pixels' group ids, row-major, for a split by
	// features (nil: by blocks).
	groups []uint32
	// weights are the pixels' weights, row-major (nil: all 1).
	weights []uint8
}

// drawRule says which pixels are candidates, in which reservoir, under
// which key.
type drawRule struct {
	// res2 is a code's class index times two (its training reservoir; the
	// validation one is res2|1), drawNone for codes outside the scheme.
	// Code 0 (unlabelled) must be outside.
	res2  [256]uint16
	nres  int
	seed  uint64
	input uint64 // the input's index: keys and ids carry it
	block int
	// buffer is Config.Buffer; height the input's, which says which
	// block rows it has.
	buffer, height int
	// valFrac is the fraction of blocks that go to validation.
	valFrac float64
	bad     dnTest
	// refl is every DN's reflectance.
	refl *[65536]float32
	// bits is how many top bits of a key the histograms count.
	bits uint
}

// dnTest says which DNs are nodata (give a NaN reflectance): none, one
// value, or those a table marks.
type dnTest struct {
	one   int32 // the one nodata DN; -1: none, or see table
	table []bool
}

// newDNTest finds the DNs whose reflectance is NaN.
func newDNTest(refl *[65536]float32) dnTest {
	var bad []int
	for v, r := range refl {
		if r != r {
			bad = append(bad, v)
		}
	}
	switch len(bad) {
	case 0:
		return dnTest{one: -1}
	case 1:
		return dnTest{one: int32(bad[0])}
	}
	t := dnTest{one: -1, table: make([]bool, 65536)}
	for _, v := range bad {
		t.table[v] = true
	}
	return t
}

// missing reports whether the DN is nodata.
func (t dnTest) missing(v uint16) bool {
	if t.table != nil {
		return t.table[v]
	}
	return int32(v) == t.one
}

// drawBits is how many key bits the histograms count: 4096 bins per
// reservoir, fewer when the scheme has many classes, so that a part's
// histogram stays a few hundred KB.
func drawBits(nres int) uint {
	bits := uint(12)
	for bits > 6 && nres<<bits > 1<<17 {
		bits--
	}
	return bits
}

// keyBase is the hash of what every key of the input shares.
func (rule *drawRule) keyBase() uint64 {
	return rng.Extend(rng.Extend(rng.Start(rule.seed), 0x5a4), rule.input)
}

// splitsOf sets each block of a block row to its split: 1 (validation)
// for a fraction of blocks, by seeded hash (as blockSplits).
func (rule *drawRule) splitsOf(blockRow int, splits []uint16) {
	h := rng.Extend(rng.Extend(rng.Extend(rng.Start(rule.seed), 0x7a1), rule.input), uint64(blockRow))
	for b := range splits {
		splits[b] = 0
		if rng.Unit(rng.Extend(h, uint64(b))) < rule.valFrac {
			splits[b] = 1
		}
	}
}

// neighbours sets b to the splits of block row blockRow (cur, already
// set by splitsOf) and of its neighbours, in prev and next's storage
// (nil where the input has no such row).
func (rule *drawRule) neighbours(blockRow int, b *bufferRows, cur, prev, next []uint16) {
	b.cur, b.prev, b.next = cur, nil, nil
	if blockRow > 0 {
		rule.splitsOf(blockRow-1, prev)
		b.prev = prev
	}
	if (blockRow+1)*rule.block < rule.height {
		rule.splitsOf(blockRow+1, next)
		b.next = next
	}
}

// dropBuffered sets to drawNone the training candidates of row r that lie
// within the buffer of a validation block, and returns how many.
func (rule *drawRule) dropBuffered(r int, b *bufferRows, res []uint16) int64 {
	b.reach(r, rule.height, rule.block, rule.buffer)
	var n int64
	for col, k := range res {
		if k != drawNone && k&1 == 0 && b.near(col, rule.block, rule.buffer) {
			res[col] = drawNone
			n++
		}
	}
	return n
}

// classify sets res[col] to the reservoir of a row's pixel by its code and
// block, drawNone for codes outside the scheme, which off counts by code.
func (rule *drawRule) classify(labels []uint8, splits, res []uint16, off *[256]int64) {
	w := len(labels)
	for b, split := range splits {
		c0, c1 := b*rule.block, min((b+1)*rule.block, w)
		for col, code := range labels[c0:c1] {
			r := rule.res2[code]
			if r == drawNone {
				off[code]++
			}
			res[c0+col] = r | split
		}
	}
}

// classifyGroups is classify for a split by features: a pixel's split is
// its group's.
func (rule *drawRule) classifyGroups(labels []uint8, groups []uint32, gs *groupSplits, res []uint16, off *[256]int64) {
	for col, code := range labels {
		r := rule.res2[code]
		if r == drawNone {
			off[code]++
			res[col] = drawNone
			continue
		}
		res[col] = r | gs.of(groups[col])
	}
}

// maskMissing sets res to drawNone where any band of the row at i0 is
// nodata. With one nodata DN it tests four pixels of a band at once, band
// after band, into ok (len(res)/4 words): a 16-bit lane of x is not zero
// iff bit 15 of ((x&0x7fff)+0x7fff)|x is set.
func (rule *drawRule) maskMissing(dn [][]uint16, i0 int, res []uint16, ok []uint64) {
	w := len(res)
	switch {
	case rule.bad.table != nil:
		for _, plane := range dn {
			for col, v := range plane[i0 : i0+w] {
				if rule.bad.table[v] {
					res[col] = drawNone
				}
			}
		}
	case rule.bad.one >= 0:
		const low, high = 0x7fff_7fff_7fff_7fff, 0x8000_8000_8000_8000
		nd := uint16(rule.bad.one)
		nd4 := uint64(nd) * 0x0001_0001_0001_0001
		ok = ok[:w/4]
		for g := range ok {
			ok[g] = high
		}
		for _, plane := range dn {
			p := plane[i0 : i0+4*len(ok)]
			for g := range ok {
				q := p[4*g : 4*g+4 : 4*g+4]
				x := (uint64(q[0]) | uint64(q[1])<<16 | uint64(q[2])<<32 | uint64(q[3])<<48) ^ nd4
				ok[g] &= (x&low + low) | x
			}
		}
		for g, m := range ok {
			if m == high {
				continue
			}
			for lane := range 4 {
				if m>>(16*lane+15)&1 == 0 {
					res[4*g+lane] = drawNone
				}
			}
		}
		for col := 4 * len(ok); col < w; col++ {
			for _, plane := range dn {
				if plane[i0+col] == nd {
					res[col] = drawNone
				}
			}
		}
	}
}

// drawCount is pass 1 over rows [r0, r1): it adds every candidate's key
// to hist (reservoir r's bin k at r<<bits|k), counts in off the pixels
// whose code is outside the scheme, by code, and in buffered the training
// candidates the buffer drops.
func drawCount(t drawTile, rule *drawRule, r0, r1 int, hist []uint32, off *[256]int64, buffered *int64) {
	w := t.width
	res, ok := make([]uint16, w), make([]uint64, w/4)
	nbc := (w + rule.block - 1) / rule.block
	splits, prev, next := make([]uint16, nbc), make([]uint16, nbc), make([]uint16, nbc)
	var near bufferRows
	gs := &groupSplits{seed: rule.seed, valFrac: rule.valFrac}
	base, shift := rule.keyBase(), 64-rule.bits
	for r := r0; r < r1; r++ {
		if t.groups != nil {
			rule.classifyGroups(t.labels[r*w:(r+1)*w], t.groups[r*w:(r+1)*w], gs, res, off)
		} else {
			if r == r0 || r%rule.block == 0 {
				rule.splitsOf(r/rule.block, splits)
				if rule.buffer > 0 {
					rule.neighbours(r/rule.block, &near, splits, prev, next)
				}
			}
			rule.classify(t.labels[r*w:(r+1)*w], splits, res, off)
		}
		rule.maskMissing(t.dn, r*w, res, ok)
		if rule.buffer > 0 {
			*buffered += rule.dropBuffered(r, &near, res)
		}
		hr := rng.Extend(base, uint64(r))
		for col, k := range res {
			if k == drawNone {
				continue
			}
			key := rng.Extend(hr, uint64(col))
			if t.weights != nil {
				// Weight 0 is no candidate.
				wt := t.weights[r*w+col]
				if wt == 0 {
					continue
				}
				key = weightedKey(key, wt)
			}
			hist[int(k)<<rule.bits|int(key>>shift)]++
		}
	}
}

// drawOut is where pass 2 writes: per reservoir k, its candidates
// (entries[k]) and their reflectances, band by band (bands[k]).
type drawOut struct {
	entries [][]entry
	bands   [][]float32
}

// drawCollect is pass 2 over rows [r0, r1): it writes every candidate
// whose key is at most its reservoir's bound[k] to dst.entries[k] at
// pos[k] (then advanced), with its reflectances, band by band, to
// dst.bands[k] from pos[k]×(number of bands). A row's candidates are
// listed first and their DNs then read band by band: loads that do not
// wait on each other.
func drawCollect(t drawTile, rule *drawRule, r0, r1 int, bound []uint64, pos []int, dst drawOut) {
	out, bands := dst.entries, dst.bands
	w, nb := t.width, len(t.dn)
	nbc := (w + rule.block - 1) / rule.block
	splits, prev, next := make([]uint16, nbc), make([]uint16, nbc), make([]uint16, nbc)
	var near bufferRows
	base := rule.keyBase()
	type rowCandidate struct {
		key     uint64
		col     int32
		res     uint16
		missing bool
	}
	var cands []rowCandidate
	var dns []uint16 // per band, a DN per candidate
	gs := &groupSplits{seed: rule.seed, valFrac: rule.valFrac}
	for r := r0; r < r1; r++ {
		if r == r0 || r%rule.block == 0 {
			rule.splitsOf(r/rule.block, splits)
			if rule.buffer > 0 {
				rule.neighbours(r/rule.block, &near, splits, prev, next)
			}
		}
		if rule.buffer > 0 {
			near.reach(r, rule.height, rule.block, rule.buffer)
		}
		labels := t.labels[r*w : (r+1)*w]
		hr := rng.Extend(base, uint64(r))
		cands = cands[:0]
		if t.groups != nil {
			groups := t.groups[r*w : (r+1)*w]
			for col, code := range labels {
				k := rule.res2[code]
				if k == drawNone {
					continue
				}
				k |= gs.of(groups[col])
				key := rng.Extend(hr, uint64(col))
				if t.weights != nil {
					if t.weights[r*w+col] == 0 {
						continue
					}
					key = weightedKey(key, t.weights[r*w+col])
				}
				if key <= bound[k] {
					cands = append(cands, rowCandidate{key: key, col: int32(col), res: k})
				}
			}
		} else {
			for b, split := range splits {
				for col := b * rule.block; col < min((b+1)*rule.block, w); col++ {
					k := rule.res2[labels[col]] | split
					if k == drawNone || k&1 == 0 && rule.buffer > 0 && near.near(col, rule.block, rule.buffer) {
						continue
					}
					key := rng.Extend(hr, uint64(col))
					if t.weights != nil {
						if t.weights[r*w+col] == 0 {
							continue
						}
						key = weightedKey(key, t.weights[r*w+col])
					}
					if key <= bound[k] {
						cands = append(cands, rowCandidate{key: key, col: int32(col), res: k})
					}
				}
			}
		}
		n := len(cands)
		if n == 0 {
			continue
		}
		dns = slices.Grow(dns[:0], n*nb)[:n*nb]
		for band, plane := range t.dn {
			row, dst := plane[r*w:(r+1)*w], dns[band*n:(band+1)*n]
			for j, c := range cands {
				dst[j] = row[c.col]
			}
		}
		if rule.bad.table != nil || rule.bad.one >= 0 {
			for band := range nb {
				for j, v := range dns[band*n : (band+1)*n] {
					if rule.bad.missing(v) {
						cands[j].missing = true
					}
				}
			}
		}
		id := rule.input<<40 | uint64(r)<<20
		for j, c := range cands {
			if c.missing {
				continue
			}
			k := c.res
			at := pos[k] * nb
			dst := bands[k][at : at+nb]
			for band := range dst {
				dst[band] = rule.refl[dns[band*n+j]]
			}
			out[k][pos[k]] = entry{key: c.key, id: id | uint64(c.col), at: at}
			pos[k]++
		}
	}
}

// drawBounds gives each reservoir the largest key worth collecting:
// the top of the first histogram bin at which the reservoir has capacity
// candidates (every key when it has fewer), and below limit[k], above
// which no key can be kept.
func drawBounds(hist []uint32, bits uint, limit []uint64, capacity int) []uint64 {
	bins := 1 << bits
	bound := make([]uint64, len(limit))
	for k := range bound {
		bound[k] = math.MaxUint64
		n := 0
		for b, c := range hist[k*bins : (k+1)*bins] {
			if n += int(c); n >= capacity {
				if b < bins-1 {
					bound[k] = uint64(b+1)<<(64-bits) - 1
				}
				break
			}
		}
		if limit[k] != math.MaxUint64 {
			// Keys at or over the limit are never kept: their bin's top
			// is enough.
			bound[k] = min(bound[k], limit[k]|(1<<(64-bits)-1))
		}
	}
	return bound
}

// drawInput draws one input: per reservoir, the candidates with the
// capacity smallest (key, id) whose key is under limit[k], sorted, with
// their reflectances (one per band from its at, in bands[k]); the pixels
// whose code is outside the scheme, by code; and the training candidates
// the buffer dropped.
func drawInput(t drawTile, rule *drawRule, limit []uint64, capacity int) (out [][]entry, bands [][]float32, off [256]int64, buffered int64, err error) {
	nres, bins := rule.nres, 1<<rule.bits
	parts := max(1, min(t.height, runtime.GOMAXPROCS(0)))
	rows := func(p int) (int, int) { return p * t.height / parts, (p + 1) * t.height / parts }

	// Pass 1: a histogram per part.
	hists := make([][]uint32, parts)
	offs := make([][256]int64, parts)
	bufs := make([]int64, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			hists[p] = make([]uint32, nres*bins)
			r0, r1 := rows(p)
			drawCount(t, rule, r0, r1, hists[p], &offs[p], &bufs[p])
		})
	}
	wg.Wait()
	hist := make([]uint32, nres*bins)
	for p := range parts {
		buffered += bufs[p]
		for i, c := range hists[p] {
			hist[i] += c
		}
		for code, n := range offs[p] {
			off[code] += n
		}
	}
	bound := drawBounds(hist, rule.bits, limit, capacity)

	// Each part's place per reservoir: the candidates of the parts before
	// it under the bound.
	shift := 64 - rule.bits
	pos := make([][]int, parts+1)
	for p := range pos {
		pos[p] = make([]int, nres)
	}
	for k := range nres {
		top := int(bound[k] >> shift)
		for p := range parts {
			n := 0
			for _, c := range hists[p][k*bins : k*bins+top+1] {
				n += int(c)
			}
			pos[p+1][k] = pos[p][k] + n
		}
	}
	nb := len(t.dn)
	out, bands = make([][]entry, nres), make([][]float32, nres)
	for k := range nres {
		out[k], bands[k] = make([]entry, pos[parts][k]), make([]float32, pos[parts][k]*nb)
	}

	// Pass 2: every part fills its places.
	ends := make([][]int, parts)
	for p := range parts {
		wg.Go(func() {
			ends[p] = slices.Clone(pos[p])
			r0, r1 := rows(p)
			drawCollect(t, rule, r0, r1, bound, ends[p], drawOut{out, bands})
		})
	}
	wg.Wait()
	for p := range parts {
		if !slices.Equal(ends[p], pos[p+1]) {
			return nil, nil, off, 0, fmt.Errorf("draw: part %d collected %v candidates, counted %v", p, ends[p], pos[p+1])
		}
	}
	drawSelect(out, limit, capacity)
	return out, bands, off, buffered, nil
}

// drawSelect sorts each reservoir's candidates by (key, id) and keeps the
// first capacity whose key is under limit[k], reservoirs on all cores.
func drawSelect(out [][]entry, limit []uint64, capacity int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(out), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			var tmp []entry
			for {
				k := int(next.Add(1) - 1)
				if k >= len(out) {
					return
				}
				c := out[k]
				if len(tmp) < len(c) {
					tmp = make([]entry, len(c))
				}
				sortCandidates(c, tmp)
				c = c[:min(len(c), capacity)]
				for len(c) > 0 && c[len(c)-1].key >= limit[k] {
					c = c[:len(c)-1]
				}
				out[k] = c
			}
		})
	}
	wg.Wait()
}

// sortCandidates sorts candidates by (key, id): a stable radix sort of
// the keys, 8 bits a pass (none where all keys share the digit), through
// tmp (at least as long), then runs of equal keys by id.
func sortCandidates(c, tmp []entry) {
	if len(c) < 2 {
		return
	}
	var counts [8][256]int
	for _, x := range c {
		for d := range 8 {
			counts[d][x.key>>(8*d)&0xff]++
		}
	}
	src, dst := c, tmp[:len(c)]
	for d := range 8 {
		shift := 8 * uint(d)
		at := &counts[d]
		if at[src[0].key>>shift&0xff] == len(c) {
			continue
		}
		sum := 0
		for v, n := range at {
			at[v], sum = sum, sum+n
		}
		for _, x := range src {
			v := x.key >> shift & 0xff
			dst[at[v]] = x
			at[v]++
		}
		src, dst = dst, src
	}
	if &src[0] != &c[0] {
		copy(c, src)
	}
	for i := 0; i < len(c); {
		j := i + 1
		for j < len(c) && c[j].key == c[i].key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(c[i:j], func(a, b entry) int { return cmp.Compare(a.id, b.id) })
		}
		i = j
	}
}

// merge adds an input's kept candidates (sorted by (key, id), at most
// capacity) to the reservoir, with their reflectances (nb per candidate,
// in cb from the candidate's at), and keeps the capacity smallest of both.
// An empty reservoir takes the candidates as they are.
func (r *reservoir) merge(c []entry, cb []float32, nb, capacity int) {
	if len(c) == 0 {
		return
	}
	if len(r.entries) == 0 {
		r.entries, r.bands, r.nb = c, cb, nb
	} else {
		if !slices.IsSortedFunc(r.entries, cmpEntry) {
			r.keep(len(r.entries))
		}
		n := min(capacity, len(r.entries)+len(c))
		entries, bands := make([]entry, 0, n), make([]float32, 0, n*nb)
		i, j := 0, 0
		for len(entries) < n {
			if j == len(c) || i < len(r.entries) && cmpEntry(r.entries[i], c[j]) < 0 {
				e := r.entries[i]
				entries = append(entries, entry{e.key, e.id, len(bands)})
				bands = append(bands, r.bands[e.at:e.at+nb]...)
				i++
				continue
			}
			entries = append(entries, entry{c[j].key, c[j].id, len(bands)})
			bands = append(bands, cb[c[j].at:c[j].at+nb]...)
			j++
		}
		r.entries, r.bands = entries, bands
	}
	r.limit = math.MaxUint64
	if len(r.entries) == capacity {
		// A later pixel (larger id) at or over the largest kept key can
		// never be kept.
		r.limit = r.entries[capacity-1].key
	}
}

// cmpEntry orders entries by (key, id).
func cmpEntry(a, b entry) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// reflectanceTable is every DN's reflectance for an input in memory:
// the bits inputReflectance gives a DN read as float32 (NaN at nodata).
func reflectanceTable(in Input) *[65536]float32 {
	var t [65536]float32
	for v := range t {
		t[v] = float32(v)
	}
	in.Reflectance(t[:])
	return &t
}

// addTile draws from an input in memory (see drawInput) and merges its
// candidates into the reservoirs, which hold what earlier inputs kept.
func (sp *Sampler) addTile(in Input, ii uint64, set *features.Set) error {
	t := in.Tile
	if len(t.DN) != len(in.Bands) {
		return fmt.Errorf("%s has %d bands, the input lists %d", in.Name, len(t.DN), len(in.Bands))
	}
	s := sp.cfg
	refl := reflectanceTable(in)
	rule := &drawRule{nres: len(sp.res), seed: s.Seed, input: ii, block: s.BlockSize, buffer: s.Buffer, height: t.Grid.Height,
		valFrac: s.ValidationFraction, bad: newDNTest(refl), refl: refl, bits: drawBits(len(sp.res))}
	for code := range rule.res2 {
		rule.res2[code] = drawNone
	}
	for code, c := range sp.classIndex {
		rule.res2[code] = uint16(2 * c)
	}
	// The limits as they stand: a merge that tightens them meanwhile only
	// means this draw collects a few candidates that its merge drops.
	limit := make([]uint64, len(sp.res))
	sp.mu.Lock()
	for k, r := range sp.res {
		limit[k] = r.limit
	}
	sp.mu.Unlock()
	tile := drawTile{width: t.Grid.Width, height: t.Grid.Height, labels: t.Labels, dn: t.DN, weights: in.Weights}
	if s.byFeatures() {
		tile.groups = in.Groups
	}
	var out [][]entry
	var bands [][]float32
	var off [256]int64
	var buffered int64
	var err error
	// The device's passes split by blocks and key pixels unweighted only:
	// a split by features, or a tile with weights, is drawn on every core.
	if in.Passes != nil && tile.groups == nil && tile.weights == nil {
		out, bands, off, buffered, err = drawInputOn(in.Passes, len(t.DN), rule, limit, s.MaxPerClass)
	} else {
		out, bands, off, buffered, err = drawInput(tile, rule, limit, s.MaxPerClass)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", in.Name, err)
	}
	nv := len(t.DN)
	if set.Radius() > 0 {
		if bands, err = withContext(in, set, refl, out, bands); err != nil {
			return fmt.Errorf("%s: %w", in.Name, err)
		}
		nv = set.Planes()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	// Every pixel but the unlabelled (code 0) is labelled.
	sp.labelled += int64(tile.width)*int64(tile.height) - off[0]
	sp.countTile(t.Labels, tile.groups, t.DN, rule.bad, tile.width, tile.height, ii)
	sp.buffered += buffered
	for code, n := range off[1:] {
		sp.outside[code+1] += n
		sp.countOutside(in.Name, uint8(code+1), n)
	}
	eachReservoir(len(sp.res), func(k int) { sp.res[k].merge(out[k], bands[k], nv, s.MaxPerClass) })
	return nil
}

// withContext appends to each candidate's band reflectances its context
// features, computed from the tile for the candidates' pixels only: by
// the device that holds the tile when its passes can (ContextPasses),
// else on every core (features.Set.ContextAt), the same bits either way.
// It returns the reservoirs' values, set.Planes() per candidate, with the
// entries' places moved to match.
func withContext(in Input, set *features.Set, refl *[65536]float32, out [][]entry, bands [][]float32) ([][]float32, error) {
	t := in.Tile
	w, h := t.Grid.Width, t.Grid.Height
	nb, nv := len(set.Bands), set.Planes()
	nc := nv - nb
	// Each reservoir's candidates from start[k] on in xs, ys and ctx; the
	// reservoirs are filled side by side, a few hundred megabytes on a
	// full tile.
	start := make([]int, len(out)+1)
	for k, c := range out {
		start[k+1] = start[k] + len(c)
	}
	xs, ys := make([]int, start[len(out)]), make([]int, start[len(out)])
	values := make([][]float32, len(out))
	eachReservoir(len(out), func(k int) {
		c := out[k]
		values[k] = make([]float32, len(c)*nv)
		for j, e := range c {
			xs[start[k]+j], ys[start[k]+j] = int(e.id&(1<<20-1)), int(e.id>>20&(1<<20-1))
			copy(values[k][j*nv:j*nv+nb], bands[k][e.at:e.at+nb])
			c[j].at = j * nv
		}
	})
	ctx := make([]float32, len(xs)*nc)
	var err error
	if dp, ok := in.Passes.(ContextPasses); ok {
		err = dp.Context(set, refl, xs, ys, ctx)
	} else {
		err = set.ContextAt(ctx, xs, ys, w, h, func(b, i int) float32 { return refl[t.DN[b][i]] })
	}
	if err != nil {
		return nil, fmt.Errorf("context features: %w", err)
	}
	eachReservoir(len(out), func(k int) {
		for j := range out[k] {
			p := start[k] + j
			copy(values[k][j*nv+nb:(j+1)*nv], ctx[p*nc:(p+1)*nc])
		}
	})
	return values, nil
}

// eachReservoir runs f for reservoirs 0…n−1 on every core.
func eachReservoir(n int, f func(k int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				f(k)
			}
		})
	}
	wg.Wait()
}
