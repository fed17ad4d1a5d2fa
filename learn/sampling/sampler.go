package sampling

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pixel/features"
)

// Sampler draws stratified samples input by input: for every class and
// split, the pixels with the smallest seeded hashes (a uniform sample
// without replacement, independent of read order), up to max_per_class.
// Validation pixels are those whose block_size×block_size block hashes
// below the validation fraction, so that neighbours never straddle the
// split (training pixels within Config.Buffer of a validation block are
// dropped), or, with Config.Split features, those whose group (the
// feature that labelled them) hashes below it. Inputs are numbered in the
// order they are added, which makes the draw the same whether they come
// from files or from memory.
type Sampler struct {
	cfg        Config
	names      []string // the configured features
	scheme     landcover.Scheme
	compute    Computers
	classIndex map[uint8]int
	res        []*reservoir // class*2 + split
	set        *features.Set
	sources    []string // by the job's input index ("" not drawn here)
	total      int      // the job's input count, from merged draws (0: unknown)
	// labelled counts the pixels with a label (code not 0); outside those
	// whose code is not in the scheme, by code: they are never sampled,
	// and the user is told.
	labelled int64
	outside  [256]int64
	// buffered counts the training candidates the buffer dropped.
	buffered int64
	// outsideBy is outside per input added here, by name.
	outsideBy map[string]map[uint8]int64
	// census counts the labelled pixels by code and what the split made
	// of them (Census); tiles in memory are counted from their labels in
	// the background (pending), merged draws not at all (partial).
	census  Census
	pending []*pendingTile
	partial bool
	// mu guards the sampler's state when tiles in memory are added from
	// several goroutines (AddAt): their draws run at once, their merges
	// take turns.
	mu sync.Mutex
}

// New starts a draw of the named features' samples, by cfg, over scheme's
// classes; compute makes the features computer (the CPU's or a GPU's).
func New(cfg Config, names []string, scheme landcover.Scheme, compute Computers) *Sampler {
	sp := &Sampler{cfg: cfg, names: names, scheme: scheme, compute: compute, classIndex: map[uint8]int{}, res: make([]*reservoir, 2*len(scheme.Classes))}
	for i := range sp.res {
		sp.res[i] = newReservoir()
	}
	for i, c := range scheme.Classes {
		sp.classIndex[c.Code] = i
	}
	// A remap may take any code, the scheme's own too: its pixels then
	// train as the class of the code it maps to (one step, never a chain,
	// whatever the order the map gives them in).
	own := maps.Clone(sp.classIndex)
	for from, to := range cfg.Remap {
		if c, ok := own[to]; ok {
			sp.classIndex[from] = c
		}
	}
	return sp
}

// Add scans one input and keeps its candidates: per class and split, the
// max_per_class pixels with the smallest seeded keys (ties, which 64-bit
// hashes all but never make, go to the pixel scanned first). A tile in
// memory is drawn from its DNs in two data-parallel passes (addTile). From
// files, each strip's pixels are screened on every core against the
// reservoirs' limits, and each reservoir takes its survivors on a core of
// its own, in raster order. Both keep the same pixels. Features are not
// computed here: Finish computes them for the kept pixels only.
func (sp *Sampler) Add(in Input) error { return sp.AddAt(in, len(sp.sources)) }

// AddAt is Add with the input's index in the job given rather than the
// next one: keys, splits and pixel ids derive from it, so that shards
// drawing disjoint inputs of one job number them as one process would.
// Tiles in memory may be added from several goroutines at once (each
// draws on its own, the merges take turns): the draw is the same whatever
// the order the inputs come in.
func (sp *Sampler) AddAt(in Input, index int) error {
	if err := sp.cfg.Check(); err != nil {
		return err
	}
	fs, err := features.NewSet(sp.names, in.Bands, in.Layers...)
	if err != nil {
		return fmt.Errorf("%s: %w", in.Name, err)
	}
	sp.mu.Lock()
	if sp.set != nil && !slices.Equal(sp.set.Bands, fs.Bands) {
		sp.mu.Unlock()
		return fmt.Errorf("%s: bands [%s] differ from the first input's [%s]", in.Name, strings.Join(fs.Bands, ", "), strings.Join(sp.set.Bands, ", "))
	}
	// Drawn values are plane values, which one map turns into features:
	// every input's layers must map alike.
	if sp.set != nil && !slices.Equal(sp.set.Layers, fs.Layers) {
		sp.mu.Unlock()
		return fmt.Errorf("%s: its layers map their planes otherwise than the first input's (%v, %v): give each layer the same range (ingest's layers[i].range)", in.Name, fs.Layers, sp.set.Layers)
	}
	if err := sp.claim(index, in.Name); err != nil {
		sp.mu.Unlock()
		return err
	}
	sp.set = fs
	ii := uint64(index)
	if sp.cfg.byFeatures() && in.Tile != nil && len(in.Groups) != in.Tile.Grid.Width*in.Tile.Grid.Height {
		sp.mu.Unlock()
		return fmt.Errorf("%s: sampling.split %s needs the group id of every pixel (the features of vector labels: groups.tif)", in.Name, SplitFeatures)
	}
	if in.Tile != nil && in.Weights != nil && len(in.Weights) != in.Tile.Grid.Width*in.Tile.Grid.Height {
		sp.mu.Unlock()
		return fmt.Errorf("%s: %d pixel weights for %d×%d pixels", in.Name, len(in.Weights), in.Tile.Grid.Width, in.Tile.Grid.Height)
	}
	if in.Tile != nil && !sp.scheme.Has(0) {
		sp.mu.Unlock()
		return sp.addTile(in, ii, fs)
	}
	defer sp.mu.Unlock()
	src, err := in.source()
	if err != nil {
		return err
	}
	class := sp.classTable()
	s := sp.cfg
	strips := (src.Height + stripRows - 1) / stripRows
	slots, wait := readStrips(src, fs, nil, strips)
	defer wait()
	limits := make([]uint64, len(sp.res))
	for k := range strips {
		st := <-slots[k].strips
		if st.Err != nil {
			return st.Err
		}
		if s.byFeatures() && len(st.Groups) != len(st.Labels) {
			return fmt.Errorf("%s: sampling.split %s needs the group id of every pixel (the features of vector labels: groups.tif)", in.Name, SplitFeatures)
		}
		if st.Weights != nil && len(st.Weights) != len(st.Labels) {
			return fmt.Errorf("%s: a strip of %d labels has %d weights", in.Name, len(st.Labels), len(st.Weights))
		}
		for r, res := range sp.res {
			limits[r] = res.limit
		}
		found, counts := screenStrip(st, stripPlace{ii: ii, w: src.Width, height: src.Height, r0: k * stripRows, nb: len(fs.Bands)}, class, limits, s)
		sp.labelled += counts.labelled
		sp.buffered += counts.buffered
		sp.census.add(counts)
		for code, n := range counts.outside {
			sp.outside[code] += n
			sp.countOutside(in.Name, uint8(code), n)
		}
		var wg sync.WaitGroup
		for r, res := range sp.res {
			wg.Go(func() {
				bands := make([]float32, len(st.Planes))
				for _, part := range found {
					for _, px := range part[r] {
						for b := range bands {
							bands[b] = st.Planes[b][px.i]
						}
						res.add(px.key, px.id, bands, s.MaxPerClass)
					}
				}
			})
		}
		wg.Wait()
		slots[k].done()
	}
	return nil
}

// labelCounts are a strip's labelled pixels, by code those whose code is
// not in the scheme, and the training candidates the buffer dropped.
type labelCounts struct {
	labelled int64
	outside  [256]int64
	buffered int64
	// byCode are the labelled pixels, the validation ones and the
	// buffered ones, by code (Census).
	byCode, validation, bufferedBy [256]int64
}

// countOutside adds n pixels of an input whose code is outside the scheme
// (callers hold mu; code 0, unlabelled, and n 0 are not counted).
func (sp *Sampler) countOutside(input string, code uint8, n int64) {
	if n == 0 || code == 0 {
		return
	}
	if sp.outsideBy == nil {
		sp.outsideBy = map[string]map[uint8]int64{}
	}
	if sp.outsideBy[input] == nil {
		sp.outsideBy[input] = map[uint8]int64{}
	}
	sp.outsideBy[input][code] += n
}

// OutsideOf returns, by code, an input's labelled pixels whose code is
// outside the scheme (and not remapped into it); nil when there are none
// or the input came in a merged draw, whose counts are its shard's total.
func (sp *Sampler) OutsideOf(input string) map[uint8]int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return maps.Clone(sp.outsideBy[input])
}

// Buffered returns how many training candidates (pixels of the scheme's
// classes with every band present, in training blocks) the buffer
// (Config.Buffer) dropped for lying near a validation block.
func (sp *Sampler) Buffered() int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.buffered
}

// Warnings says how many labelled pixels carry codes outside the scheme,
// by code, when any do, and when labelled pixels of the scheme's classes
// were drawn none because each lacks a band or plane.
func (sp *Sampler) Warnings() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var total int64
	var codes []string
	for code, n := range sp.outside {
		if n > 0 {
			total += n
			codes = append(codes, fmt.Sprintf("%d (%d)", code, n))
		}
	}
	var warnings []string
	if total > 0 {
		warnings = append(warnings, fmt.Sprintf("labels: %.1f %% of the labelled pixels (%d of %d) have codes outside the scheme %s and are not sampled: %s",
			100*float64(total)/float64(sp.labelled), total, sp.labelled, sp.scheme.Name, strings.Join(codes, ", ")))
	}
	drawn := 0
	for _, r := range sp.res {
		drawn += len(r.entries)
	}
	if in := sp.labelled - total; drawn == 0 && sp.buffered == 0 && in > 0 {
		warnings = append(warnings, fmt.Sprintf("features: none of the %d labelled pixels of the scheme's classes has every band and temporal plane present, so none can be sampled (a temporal season that matches none of the dates leaves its planes without data over the whole tile; widen the dates or drop the season)", in))
	}
	return warnings
}

// survivor is a screened pixel: its key, id and index in the strip.
type survivor struct {
	key, id uint64
	i       int
}

// stripPlace is where a strip lies: its input's index ii (for the seeded
// keys), the input's size (w × height), the strip's first row r0, and
// how many of its leading planes are bands (nb).
type stripPlace struct {
	ii                uint64
	w, height, r0, nb int
	// dn, for the census of a tile in memory, holds its bands' digital
	// numbers: a pixel with one that bad finds missing lacks a band.
	dn  [][]uint16
	bad dnTest
}

// missingDN reports whether pixel i lacks a band of at.dn.
func (at stripPlace) missingDN(i int) bool {
	for _, p := range at.dn {
		if at.bad.missing(p[i]) {
			return true
		}
	}
	return false
}

// screenStrip returns, per part of the strip's rows (in order) and per
// reservoir, the labelled pixels with every band (the first nb planes)
// present, outside the buffer, whose key is below the reservoir's limit,
// in raster order. Parts run on every core.
func screenStrip(st Strip, at stripPlace, class [256]int, limits []uint64, s Config) ([][][]survivor, labelCounts) {
	nb, w, height, r0, ii := at.nb, at.w, at.height, at.r0, at.ii
	h := len(st.Labels) / w
	parts := max(1, min(h, runtime.GOMAXPROCS(0)))
	found := make([][][]survivor, parts)
	counts := make([]labelCounts, parts)
	var wg sync.WaitGroup
	for p := range parts {
		found[p] = make([][]survivor, len(limits))
		wg.Go(func() {
			var splits []uint16
			var near bufferRows
			var splitRow uint64 = math.MaxUint64
			groups := newGroupSplits(s)
			for r := p * h / parts; r < (p+1)*h/parts; r++ {
				row := uint64(r0 + r)
				if s.byFeatures() {
					// No blocks: each pixel's split is its group's.
				} else if blk := row / uint64(s.BlockSize); blk != splitRow {
					splits, splitRow = blockSplits(s, ii, blk, w), blk
					if s.Buffer > 0 {
						near = neighbourSplits(s, ii, blk, w, height, splits)
					}
				}
				if s.Buffer > 0 {
					near.reach(int(row), height, s.BlockSize, s.Buffer)
				}
				for col := range w {
					i := r*w + col
					code := st.Labels[i]
					c := class[code]
					if code != 0 {
						counts[p].labelled++
						counts[p].byCode[code]++
						if c < 0 {
							counts[p].outside[code]++
						}
					}
					if c < 0 || missingBand(st.Planes[:nb], i) || at.dn != nil && at.missingDN(i) {
						continue
					}
					var split int
					if s.byFeatures() {
						split = int(groups.of(st.Groups[i]))
					} else {
						split = int(splits[col/s.BlockSize])
					}
					if split == 1 {
						counts[p].validation[code]++
					}
					if split == 0 && s.Buffer > 0 && near.near(col, s.BlockSize, s.Buffer) {
						counts[p].buffered++
						counts[p].bufferedBy[code]++
						continue
					}
					if limits == nil {
						continue // a census (countTile): no candidate is kept
					}
					res := c*2 + split
					key := rng.Hash(s.Seed, 0x5a4, ii, row, uint64(col))
					if st.Weights != nil {
						if st.Weights[i] == 0 {
							continue
						}
						key = weightedKey(key, st.Weights[i])
					}
					if key >= limits[res] {
						continue
					}
					found[p][res] = append(found[p][res], survivor{key: key, id: ii<<40 | row<<20 | uint64(col), i: i})
				}
			}
		})
	}
	wg.Wait()
	var total labelCounts
	for _, c := range counts {
		total.labelled += c.labelled
		total.buffered += c.buffered
		for code := range 256 {
			total.outside[code] += c.outside[code]
			total.byCode[code] += c.byCode[code]
			total.validation[code] += c.validation[code]
			total.bufferedBy[code] += c.bufferedBy[code]
		}
	}
	return found, total
}

// blockSplits gives each block of a block row its split: 1 (validation)
// for a fraction of blocks, by seeded hash.
func blockSplits(s Config, ii, blockRow uint64, w int) []uint16 {
	splits := make([]uint16, (w+s.BlockSize-1)/s.BlockSize)
	for b := range splits {
		if rng.Unit(rng.Hash(s.Seed, 0x7a1, ii, blockRow, uint64(b))) < s.ValidationFraction {
			splits[b] = 1
		}
	}
	return splits
}

// groupSplits gives pixels their group's split, remembering the last
// group's (a feature's pixels come in runs).
type groupSplits struct {
	seed    uint64
	valFrac float64
	last    uint32
	split   uint16
	valid   bool
}

func newGroupSplits(s Config) *groupSplits {
	return &groupSplits{seed: s.Seed, valFrac: s.ValidationFraction}
}

// of returns group g's split.
func (gs *groupSplits) of(g uint32) uint16 {
	if !gs.valid || g != gs.last {
		gs.last, gs.split, gs.valid = g, groupSplit(gs.seed, gs.valFrac, g), true
	}
	return gs.split
}

// neighbourSplits are the splits of block row blockRow (cur) and of the
// block rows around it that an input of height rows has.
func neighbourSplits(s Config, ii, blockRow uint64, w, height int, cur []uint16) bufferRows {
	b := bufferRows{cur: cur}
	if blockRow > 0 {
		b.prev = blockSplits(s, ii, blockRow-1, w)
	}
	if int(blockRow+1)*s.BlockSize < height {
		b.next = blockSplits(s, ii, blockRow+1, w)
	}
	return b
}

// classTable is each code's class index, −1 for codes outside the scheme.
func (sp *Sampler) classTable() [256]int {
	var class [256]int
	for i := range class {
		class[i] = -1
	}
	for code, c := range sp.classIndex {
		class[code] = c
	}
	return class
}

// missingBand reports whether any band is NaN (nodata) at pixel i.
func missingBand(planes [][]float32, i int) bool {
	for _, p := range planes {
		if p[i] != p[i] {
			return true
		}
	}
	return false
}

// Finish balances the classes if asked and returns the samples, training
// split first, each class's rows by key.
func (sp *Sampler) Finish() (*sampleset.Set, *features.Set, error) {
	if sp.set == nil {
		return nil, nil, errors.New("no input to sample")
	}
	k := len(sp.scheme.Classes)
	s := sp.cfg
	eachReservoir(len(sp.res), func(k int) { sp.res[k].keep(s.MaxPerClass) })
	// Optional balancing: every class at the rarest present class's count
	// (the largest keys go).
	if s.Balance {
		for split := range 2 {
			least := math.MaxInt
			for c := range k {
				if n := len(sp.res[c*2+split].entries); n > 0 {
					least = min(least, n)
				}
			}
			for c := range k {
				sp.res[c*2+split].keep(least)
			}
		}
	}
	for i := range max(sp.total, len(sp.sources)) {
		if i >= len(sp.sources) || sp.sources[i] == "" {
			return nil, nil, fmt.Errorf("input %d of the job's %d is missing: no draw or input covers it", i, max(sp.total, len(sp.sources)))
		}
	}
	out := &sampleset.Set{Header: sampleset.Header{Features: sp.set.Names(), Classes: sp.scheme.Codes(), Sources: sp.sources, Seed: s.Seed, Buffered: sp.buffered}}
	n := 0
	for _, r := range sp.res {
		n += len(r.entries)
	}
	out.Y, out.Split, out.Pixel = make([]uint8, 0, n), make([]uint8, 0, n), make([]uint64, 0, n)
	// The rows in order: training then validation, class by class. Each
	// reservoir's values go straight into their rows of the value planes
	// the features are computed from, on every core (a few hundred
	// megabytes on a full tile).
	var order []*reservoir
	for split := range 2 {
		for c := range k {
			r := sp.res[c*2+split]
			order = append(order, r)
			for _, e := range r.entries {
				out.Y = append(out.Y, uint8(c))
				out.Split = append(out.Split, uint8(split))
				out.Pixel = append(out.Pixel, e.id)
			}
		}
	}
	nv := sp.set.Planes()
	planes := make([][]float32, nv)
	for b := range planes {
		planes[b] = make([]float32, n)
	}
	row0 := make([]int, len(order)+1)
	for i, r := range order {
		row0[i+1] = row0[i] + len(r.entries)
	}
	eachReservoir(len(order), func(i int) { order[i].transpose(planes, row0[i]) })
	x, err := sp.features(planes, n)
	if err != nil {
		return nil, nil, err
	}
	out.X = x
	return out, sp.set, nil
}

// transpose writes the reservoir's values (len(planes) per entry, the
// entries in order) into planes (one per value) from row row0 on, blocks
// of entries at a time so that their rows stay in cache while each plane
// takes its values.
func (r *reservoir) transpose(planes [][]float32, row0 int) {
	nv := len(planes)
	const block = 256
	for j0 := 0; j0 < len(r.entries); j0 += block {
		j1 := min(len(r.entries), j0+block)
		for b, p := range planes {
			p := p[row0:]
			for j := j0; j < j1; j++ {
				p[j] = r.bands[j*nv+b]
			}
		}
	}
}

// features computes the kept pixels' features in one batch from their
// value planes (band reflectances, then context features: set.Planes()
// planes of n values), rows in the order given. The features are
// per-pixel functions of these values, so a batch of scattered pixels
// gives the bits a whole strip would.
func (sp *Sampler) features(planes [][]float32, n int) ([]float32, error) {
	nf := len(sp.set.Features)
	feats := make([][]float32, nf)
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	comp, closeComp, err := sp.compute(sp.set)
	if err != nil {
		return nil, err
	}
	defer closeComp()
	if n > 0 {
		if err := comp.Compute(feats, planes); err != nil {
			return nil, err
		}
	}
	return features.Rows(feats), nil
}

// reservoir holds one class and split's candidates: the pixels with the
// smallest (key, id) seen so far, at most twice the cap between
// compactions, each with its band reflectances (features are computed once
// the draw is over).
type reservoir struct {
	entries []entry
	bands   []float32 // nb per entry, at entry.at
	nb      int       // bands per entry
	// limit is the largest kept key after a compaction: a later pixel
	// (larger id) at or above it can never be kept.
	limit uint64
}

// entry is a candidate's key, id and place in the reservoir's bands.
type entry struct {
	key, id uint64
	at      int
}

func newReservoir() *reservoir { return &reservoir{limit: math.MaxUint64} }

// add appends a candidate and compacts when twice the cap is held.
func (r *reservoir) add(key, id uint64, bands []float32, capacity int) {
	if key >= r.limit {
		return
	}
	if r.entries == nil {
		// Room for a full buffer: appends never reallocate.
		r.entries, r.bands = make([]entry, 0, 2*capacity), make([]float32, 0, 2*capacity*len(bands))
	}
	r.nb = len(bands)
	r.entries = append(r.entries, entry{key, id, len(r.bands)})
	r.bands = append(r.bands, bands...)
	if len(r.entries) >= 2*capacity {
		r.keep(capacity)
		r.limit = r.entries[len(r.entries)-1].key
	}
}

// keep sorts the candidates by (key, id) and keeps the first n.
func (r *reservoir) keep(n int) {
	nb := r.nb
	slices.SortFunc(r.entries, func(a, b entry) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	r.entries = r.entries[:min(n, len(r.entries))]
	// The kept bands move to a new array of the old capacity, so the
	// buffer refills without reallocating.
	bands := make([]float32, 0, cap(r.bands))
	for j, e := range r.entries {
		bands = append(bands, r.bands[e.at:e.at+nb]...)
		r.entries[j].at = j * nb
	}
	r.bands = bands
}
