package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/cuda"
	"github.com/lulc/lulc/features"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/landcover"
	"github.com/lulc/lulc/raster"
	"github.com/lulc/lulc/samples"
	"github.com/lulc/lulc/stack"
)

// trainInput is one labelled image: the stack (or raster) and its labels.
type trainInput struct {
	image, labels string
	bands         []string
	scale, offset float64
	nodata        *float64
	// mem, when set, is the input in memory (lulc run): strips come from
	// it rather than from image and labels, which only name it.
	mem *stack.Tile
	// inMemory says the input was sampled from memory, with no files to
	// checksum (mem is dropped once the samples are drawn).
	inMemory bool
}

// inputs resolves the config's input section into images with their band
// order and scaling.
func (c TrainConfig) inputs() ([]trainInput, error) {
	if c.Input.Stack == "" {
		var out []trainInput
		for _, r := range c.Input.Rasters {
			out = append(out, trainInput{image: r.Image, labels: r.Labels, bands: c.Input.Bands,
				scale: c.Input.Scale, offset: c.Input.Offset, nodata: c.Input.NoData})
		}
		return out, nil
	}
	manifests, _ := filepath.Glob(filepath.Join(c.Input.Stack, "*", "manifest.json"))
	if len(manifests) == 0 {
		return nil, fmt.Errorf("input.stack: %s holds no tile manifests (*/manifest.json): is it a lulc ingest output?", c.Input.Stack)
	}
	slices.Sort(manifests)
	var out []trainInput
	for _, p := range manifests {
		body, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		m, err := parseManifest(body)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %s: %w", p, err)
		}
		dir := filepath.Dir(p)
		nd := m.NoData
		out = append(out, trainInput{image: filepath.Join(dir, "stack.tif"), labels: filepath.Join(dir, "labels.tif"),
			bands: m.Bands, scale: m.Scale, offset: m.Offset, nodata: &nd})
	}
	return out, nil
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

// sampleStrip is how many image rows sampling reads at once: small enough
// that the strips in flight stay a few hundred MB on a full tile.
const sampleStrip = 128

// sample draws stratified samples from every input (see sampler) and
// returns what the draw has to say about the labels.
func sample(cfg TrainConfig, ins []trainInput, scheme landcover.Scheme, e engine) (*samples.Set, []string, error) {
	sp := newSampler(cfg, scheme, e)
	for _, in := range ins {
		if err := sp.add(in); err != nil {
			return nil, nil, err
		}
	}
	set, _, err := sp.finish()
	return set, sp.warnings(), err
}

// sampler draws stratified samples input by input: for every class and
// split, the pixels with the smallest seeded hashes (a uniform sample
// without replacement, independent of read order), up to max_per_class.
// Validation pixels are those whose block_size×block_size block hashes
// below the validation fraction, so that neighbours never straddle the
// split. Inputs are numbered in the order they are added, which makes the
// draw the same whether they come from files or from memory.
type sampler struct {
	cfg        TrainConfig
	scheme     landcover.Scheme
	engine     engine
	classIndex map[uint8]int
	res        []*reservoir // class*2 + split
	set        *features.Set
	sources    []string
	// labelled counts the pixels with a label (code not 0); outside those
	// whose code is not in the scheme, by code: they are never sampled,
	// and the user is told.
	labelled int64
	outside  [256]int64
}

func newSampler(cfg TrainConfig, scheme landcover.Scheme, e engine) *sampler {
	sp := &sampler{cfg: cfg, scheme: scheme, engine: e, classIndex: map[uint8]int{}, res: make([]*reservoir, 2*len(scheme.Classes))}
	for i := range sp.res {
		sp.res[i] = newReservoir()
	}
	for i, c := range scheme.Classes {
		sp.classIndex[c.Code] = i
	}
	return sp
}

// add scans one input and keeps its candidates: per class and split, the
// max_per_class pixels with the smallest seeded keys (ties, which 64-bit
// hashes all but never make, go to the pixel scanned first). A tile in
// memory is drawn from its DNs in two data-parallel passes (addTile). From
// files, each strip's pixels are screened on every core against the
// reservoirs' limits, and each reservoir takes its survivors on a core of
// its own, in raster order. Both keep the same pixels. Features are not
// computed here: finish computes them for the kept pixels only.
func (sp *sampler) add(in trainInput) error {
	fs, err := features.NewSet(sp.cfg.Features, in.bands)
	if err != nil {
		return fmt.Errorf("%s: %w", in.image, err)
	}
	if sp.set != nil && !slices.Equal(sp.set.Bands, fs.Bands) {
		return fmt.Errorf("%s: bands [%s] differ from the first input's [%s]", in.image, strings.Join(fs.Bands, ", "), strings.Join(sp.set.Bands, ", "))
	}
	sp.set = fs
	ii := uint64(len(sp.sources))
	sp.sources = append(sp.sources, in.image)
	if in.mem != nil && !sp.scheme.Has(0) {
		return sp.addTile(in, ii)
	}
	src, err := stripSourceOf(in)
	if err != nil {
		return err
	}
	var class [256]int
	for i := range class {
		class[i] = -1
	}
	for code, c := range sp.classIndex {
		class[code] = c
	}
	s := sp.cfg.Sampling
	strips := (src.height + sampleStrip - 1) / sampleStrip
	slots, wait := readStrips(src, nil, nil, strips)
	defer wait()
	limits := make([]uint64, len(sp.res))
	for k := range strips {
		st := <-slots[k].strips
		if st.err != nil {
			return st.err
		}
		for r, res := range sp.res {
			limits[r] = res.limit
		}
		found, counts := screenStrip(st, src.width, k*sampleStrip, ii, class, limits, s)
		sp.labelled += counts.labelled
		for code, n := range counts.outside {
			sp.outside[code] += n
		}
		var wg sync.WaitGroup
		for r, res := range sp.res {
			wg.Go(func() {
				bands := make([]float32, len(st.planes))
				for _, part := range found {
					for _, px := range part[r] {
						for b := range bands {
							bands[b] = st.planes[b][px.i]
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

// labelCounts are a strip's labelled pixels and, by code, those whose
// code is not in the scheme.
type labelCounts struct {
	labelled int64
	outside  [256]int64
}

// warnings says how many labelled pixels carry codes outside the scheme,
// by code, when any do.
func (sp *sampler) warnings() []string {
	var total int64
	var codes []string
	for code, n := range sp.outside {
		if n > 0 {
			total += n
			codes = append(codes, fmt.Sprintf("%d (%d)", code, n))
		}
	}
	if total == 0 {
		return nil
	}
	return []string{fmt.Sprintf("labels: %.1f %% of the labelled pixels (%d of %d) have codes outside the scheme %s and are not sampled: %s",
		100*float64(total)/float64(sp.labelled), total, sp.labelled, sp.scheme.Name, strings.Join(codes, ", "))}
}

// survivor is a screened pixel: its key, id and index in the strip.
type survivor struct {
	key, id uint64
	i       int
}

// screenStrip returns, per part of the strip's rows (in order) and per
// reservoir, the labelled pixels with every band present whose key is
// below the reservoir's limit, in raster order. Parts run on every core.
func screenStrip(st strip, w, r0 int, ii uint64, class [256]int, limits []uint64, s SamplingConfig) ([][][]survivor, labelCounts) {
	h := len(st.labels) / w
	parts := max(1, min(h, runtime.GOMAXPROCS(0)))
	found := make([][][]survivor, parts)
	counts := make([]labelCounts, parts)
	var wg sync.WaitGroup
	for p := range parts {
		found[p] = make([][]survivor, len(limits))
		wg.Go(func() {
			var splits []int
			var splitRow uint64 = math.MaxUint64
			for r := p * h / parts; r < (p+1)*h/parts; r++ {
				row := uint64(r0 + r)
				if blk := row / uint64(s.BlockSize); blk != splitRow {
					splits, splitRow = blockSplits(s, ii, blk, w), blk
				}
				for col := range w {
					i := r*w + col
					code := st.labels[i]
					c := class[code]
					if code != 0 {
						counts[p].labelled++
						if c < 0 {
							counts[p].outside[code]++
						}
					}
					if c < 0 || missingBand(st.planes, i) {
						continue
					}
					res := c*2 + splits[col/s.BlockSize]
					key := rng.Hash(s.Seed, 0x5a4, ii, row, uint64(col))
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
		for code, n := range c.outside {
			total.outside[code] += n
		}
	}
	return found, total
}

// blockSplits gives each block of a block row its split: 1 (validation)
// for a fraction of blocks, by seeded hash.
func blockSplits(s SamplingConfig, ii, blockRow uint64, w int) []int {
	splits := make([]int, (w+s.BlockSize-1)/s.BlockSize)
	for b := range splits {
		if rng.Unit(rng.Hash(s.Seed, 0x7a1, ii, blockRow, uint64(b))) < s.ValidationFraction {
			splits[b] = 1
		}
	}
	return splits
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

// finish balances the classes if asked and returns the samples, training
// split first, each class's rows by key.
func (sp *sampler) finish() (*samples.Set, *features.Set, error) {
	if sp.set == nil {
		return nil, nil, errors.New("no input to sample")
	}
	k := len(sp.scheme.Classes)
	s := sp.cfg.Sampling
	for _, r := range sp.res {
		r.keep(s.MaxPerClass)
	}
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
	out := &samples.Set{Header: samples.Header{Features: sp.set.Names(), Classes: sp.scheme.Codes(), Sources: sp.sources, Seed: s.Seed}}
	n := 0
	for _, r := range sp.res {
		n += len(r.entries)
	}
	out.Y, out.Split, out.Pixel = make([]uint8, 0, n), make([]uint8, 0, n), make([]uint64, 0, n)
	bands := make([]float32, 0, n*len(sp.set.Bands))
	for split := range 2 {
		for c := range k {
			r := sp.res[c*2+split]
			for _, e := range r.entries {
				out.Y = append(out.Y, uint8(c))
				out.Split = append(out.Split, uint8(split))
				out.Pixel = append(out.Pixel, e.id)
			}
			bands = append(bands, r.bands...)
		}
	}
	x, err := sp.features(bands, len(out.Y))
	if err != nil {
		return nil, nil, err
	}
	out.X = x
	return out, sp.set, nil
}

// features computes the kept pixels' features in one batch from their
// band reflectances (nb per pixel), rows in the order given. The features
// are per-pixel functions of the bands, so a batch of scattered pixels
// gives the bits a whole strip would.
func (sp *sampler) features(bands []float32, n int) ([]float32, error) {
	nb, nf := len(sp.set.Bands), len(sp.set.Features)
	planes := features.Columns(bands, nb)
	feats := make([][]float32, nf)
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	comp, closeComp, err := sp.engine.features(sp.set)
	if err != nil {
		return nil, err
	}
	defer closeComp()
	if n > 0 {
		if err := comp.Compute(feats, planes); err != nil {
			return nil, err
		}
	}
	x := make([]float32, n*nf)
	for i := range n {
		for f := range nf {
			x[i*nf+f] = feats[f][i]
		}
	}
	return x, nil
}

// stripSource reads an input strip by strip: its size, and a reader per
// worker (GDAL handles are not shared between threads).
type stripSource struct {
	width, height int
	open          func() (read func(r0, h int) strip, close func(), err error)
}

// stripSourceOf checks an input (labels on the image's grid, the band
// count) and returns its strips, from memory or from the files.
func stripSourceOf(in trainInput) (stripSource, error) {
	if t := in.mem; t != nil {
		read := func(r0, h int) strip { return memStrip(in, t, r0, h) }
		return stripSource{t.Grid.Width, t.Grid.Height, func() (func(int, int) strip, func(), error) { return read, func() {}, nil }}, nil
	}
	img, err := raster.Open(in.image)
	if err != nil {
		return stripSource{}, err
	}
	defer img.Close()
	lab, err := raster.Open(in.labels)
	if err != nil {
		return stripSource{}, err
	}
	defer lab.Close()
	if img.Width != lab.Width || img.Height != lab.Height || img.Transform != lab.Transform {
		return stripSource{}, fmt.Errorf("%s: labels %s are not on the image's grid", in.image, in.labels)
	}
	if got, nb := bandCount(in.image), len(in.bands); got != nb {
		return stripSource{}, fmt.Errorf("%s has %d bands, the config or manifest lists %d (%s)", in.image, got, nb, strings.Join(in.bands, ", "))
	}
	open := func() (func(int, int) strip, func(), error) {
		wimg, err := raster.Open(in.image)
		if err != nil {
			return nil, nil, err
		}
		wlab, err := raster.Open(in.labels)
		if err != nil {
			wimg.Close()
			return nil, nil, err
		}
		read := func(r0, h int) strip { return fileStrip(in, wimg, wlab, r0, h) }
		return read, func() { wimg.Close(); wlab.Close() }, nil
	}
	return stripSource{img.Width, img.Height, open}, nil
}

// Pixel is one labelled pixel with all bands present, as a scan visits
// it: its class index, split (0 training, 1 validation), sampling key and
// id, and its features at feats[f][i]. It is valid only during the visit:
// the features belong to the strip being scanned.
type Pixel struct {
	class, split int
	key, id      uint64
	feats        [][]float32
	i            int
}

// Class is the pixel's class: its index in the train config's scheme.
func (px Pixel) Class() int { return px.class }

// Validation reports whether the pixel lies in a validation block.
func (px Pixel) Validation() bool { return px.split == 1 }

// AppendFeatures appends the pixel's features, in the config's order, to
// dst.
func (px Pixel) AppendFeatures(dst []float32) []float32 {
	for f := range px.feats {
		dst = append(dst, px.feats[f][px.i])
	}
	return dst
}

// PixelScan reads every labelled pixel of a train config's inputs.
type PixelScan struct {
	cfg TrainConfig
	ins []trainInput
}

// NewPixelScan resolves the inputs of cfg, which must be valid (the
// stack's tile manifests, or its raster pairs), so that a missing input
// fails before any output is prepared.
func NewPixelScan(cfg TrainConfig) (*PixelScan, error) {
	ins, err := cfg.inputs()
	if err != nil {
		return nil, err
	}
	return &PixelScan{cfg: cfg, ins: ins}, nil
}

// Run visits every pixel of the inputs, in input then raster order, whose
// label is in the scheme and whose bands are all present, with the config's
// features (computed on gpu when it is not nil) and its split by the
// config's sampling seed, block size and validation fraction.
func (s *PixelScan) Run(ctx context.Context, gpu *cuda.Device, visit func(Pixel)) error {
	cfg := s.cfg
	scheme, err := cfg.Scheme()
	if err != nil {
		return err
	}
	classIndex := map[uint8]int{}
	for i, c := range scheme.Classes {
		classIndex[c.Code] = i
	}
	for ii, in := range s.ins {
		set, err := features.NewSet(cfg.Features, in.bands)
		if err != nil {
			return fmt.Errorf("%s: %w", in.image, err)
		}
		comp, closeComp, err := engine{gpu: gpu}.features(set)
		if err != nil {
			return err
		}
		src, err := stripSourceOf(in)
		if err == nil {
			err = scanPixels(uint64(ii), src, set, comp, classIndex, cfg.Sampling.Seed, cfg.Sampling.BlockSize, cfg.Sampling.ValidationFraction, visit)
		}
		closeComp()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// scanPixels computes the features of an input strip by strip and visits
// every pixel whose label is in the scheme and whose bands are all
// present, in raster order. Splits go by blocks of block × block pixels (a
// fraction valFrac of them to validation); keys are seeded hashes of the
// pixel, so taking the lowest keys is a seeded random choice. Strips are
// read and their features computed by several workers a few strips ahead
// of the visits.
func scanPixels(ii uint64, src stripSource, set *features.Set, comp features.Computer, classIndex map[uint8]int,
	seed uint64, block int, valFrac float64, visit func(Pixel)) error {
	var class [256]int
	for i := range class {
		class[i] = -1
	}
	for code, c := range classIndex {
		class[code] = c
	}
	w, nb := src.width, len(set.Bands)
	strips := (src.height + sampleStrip - 1) / sampleStrip
	results, wait := readStrips(src, set, comp, strips)
	defer wait()
	for k := range strips {
		st := <-results[k].strips
		if st.err != nil {
			return st.err
		}
		r0, h := k*sampleStrip, len(st.labels)/w
		splits := make([]int, (w+block-1)/block)
		for r := range h {
			row := uint64(r0 + r)
			if r == 0 || row%uint64(block) == 0 {
				for b := range splits {
					splits[b] = 0
					if rng.Unit(rng.Hash(seed, 0x7a1, ii, row/uint64(block), uint64(b))) < valFrac {
						splits[b] = 1
					}
				}
			}
			for col := range w {
				i := r*w + col
				c := class[st.labels[i]]
				if c < 0 {
					continue
				}
				missing := false
				for b := range nb {
					if st.planes[b][i] != st.planes[b][i] {
						missing = true
					}
				}
				if missing {
					continue
				}
				visit(Pixel{class: c, split: splits[col/block], key: rng.Hash(seed, 0x5a4, ii, row, uint64(col)), id: ii<<40 | row<<20 | uint64(col), feats: st.feats, i: i})
			}
		}
		results[k].done()
	}
	return nil
}

// stripSlot delivers one strip; done frees its place in the read-ahead.
type stripSlot struct {
	strips chan strip
	done   func()
}

// readStrips starts workers that read strips in order, a bounded number
// ahead of the consumer, and, when comp is not nil, compute their features
// (one strip at a time per Computer). wait stops the workers and waits for them: they use comp,
// which the caller closes after.
func readStrips(src stripSource, set *features.Set, comp features.Computer, strips int) ([]stripSlot, func()) {
	workers := max(1, min(strips, runtime.GOMAXPROCS(0)/2, 8))
	// tokens bound the strips in flight: a worker takes one before reading
	// a strip, the consumer returns it when done with the strip.
	tokens := make(chan struct{}, workers+1)
	slots := make([]stripSlot, strips)
	for k := range slots {
		slots[k] = stripSlot{strips: make(chan strip, 1), done: func() { <-tokens }}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var next atomic.Int64
	var compute sync.Mutex
	for range workers {
		wg.Go(func() {
			var read func(r0, h int) strip
			closeFn := func() {}
			defer func() { closeFn() }()
			for {
				select {
				case tokens <- struct{}{}:
				case <-stop:
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				k := int(next.Add(1) - 1)
				if k >= strips {
					return
				}
				var st strip
				if read == nil {
					read, closeFn, st.err = src.open()
				}
				if st.err == nil {
					r0 := k * sampleStrip
					st = read(r0, min(sampleStrip, src.height-r0))
				}
				if st.err == nil && comp != nil {
					st.feats = make([][]float32, len(set.Features))
					for f := range st.feats {
						st.feats[f] = make([]float32, len(st.labels))
					}
					compute.Lock()
					st.err = comp.Compute(st.feats, st.planes)
					compute.Unlock()
				}
				slots[k].strips <- st
				if st.err != nil {
					return
				}
			}
		})
	}
	return slots, func() { close(stop); wg.Wait() }
}

// strip is one strip of an input: labels, reflectance planes and features.
type strip struct {
	labels []uint8
	planes [][]float32
	feats  [][]float32
	err    error
}

// fileStrip reads the h rows from r0 of an input's files.
func fileStrip(in trainInput, img, lab *raster.Source, r0, h int) strip {
	w, nb := img.Width, len(in.bands)
	win := raster.Grid{EPSG: img.EPSG, Width: w, Height: h,
		Transform: [6]float64{img.Transform[0], img.Transform[1], 0, img.Transform[3] + float64(r0)*img.Transform[5], 0, img.Transform[5]}}
	st := strip{labels: make([]uint8, w*h), planes: make([][]float32, nb)}
	if st.err = lab.Read(win, "nearest", st.labels); st.err != nil {
		return st
	}
	for b := range nb {
		vals := make([]float32, w*h)
		if st.err = raster.ReadBandWindowInto(img, b+1, 0, r0, w, h, vals); st.err != nil {
			return st
		}
		inputReflectance(vals, in)
		st.planes[b] = vals
	}
	return st
}

// memStrip takes the h rows from r0 of a tile in memory. DNs become float32
// exactly, as GDAL converts them when reading the stack file, so the
// planes are the same bits as fileStrip's.
func memStrip(in trainInput, t *stack.Tile, r0, h int) strip {
	w := t.Grid.Width
	st := strip{labels: make([]uint8, w*h), planes: make([][]float32, len(t.DN))}
	t.ReadLabels(0, r0, w, h, st.labels)
	for b, plane := range t.DN {
		vals := make([]float32, w*h)
		for i, v := range plane[r0*w : (r0+h)*w] {
			vals[i] = float32(v)
		}
		inputReflectance(vals, in)
		st.planes[b] = vals
	}
	return st
}

// inputReflectance turns an input's stored values into reflectance in
// place, NaN at its nodata.
func inputReflectance(vals []float32, in trainInput) {
	for i, v := range vals {
		if in.nodata != nil && float64(v) == *in.nodata {
			vals[i] = float32(math.NaN())
		} else {
			vals[i] = float32(float32(v)*float32(in.scale)) + float32(in.offset)
		}
	}
}

func bandCount(path string) int {
	info, err := raster.Inspect(path)
	if err != nil {
		return -1
	}
	return info.Bands
}
