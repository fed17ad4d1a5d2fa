package sampling

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// referenceSamples is the draw's specification, written the plain way:
// every pixel of every input whose code is in the scheme and whose bands
// are all present (no NaN reflectance) is keyed (by its weight, when the
// input has weights); per class and split, all
// of them are sorted by (key, id) and the first max_per_class kept; with
// balancing, every class of a split is cut to the rarest present class's
// count; the rows go training split first, class by class, by key.
func referenceSamples(t *testing.T, cfg Config, names []string, scheme landcover.Scheme, ins []Input) (*sampleset.Set, []string, int64) {
	t.Helper()
	s := cfg
	type pixel struct {
		key, id uint64
		bands   []float32
	}
	k := len(scheme.Classes)
	res := make([][]pixel, 2*k)
	ref := New(cfg, names, scheme, cpu) // for its warnings only
	var buffered int64
	var sources []string
	var set *features.Set
	for ii, in := range ins {
		fs, err := features.NewSet(names, in.Bands)
		if err != nil {
			t.Fatal(err)
		}
		set = fs
		sources = append(sources, in.Name)
		tile := in.Tile
		w, h := tile.Grid.Width, tile.Grid.Height
		// The context features of every pixel, from the whole tile.
		refl := make([][]float32, len(tile.DN))
		for b, dn := range tile.DN {
			refl[b] = make([]float32, w*h)
			for i, v := range dn {
				refl[b][i] = float32(v)
			}
			in.Reflectance(refl[b])
		}
		ctx := make([][]float32, set.Planes()-len(set.Bands))
		for k := range ctx {
			ctx[k] = make([]float32, w*h)
		}
		if err := set.ContextCompute(ctx, refl, features.Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
			t.Fatal(err)
		}
		for row := range h {
			for col := range w {
				i := row*w + col
				code := tile.Labels[i]
				c, ok := ref.classIndex[code]
				if code != 0 {
					ref.labelled++
					if !ok {
						ref.outside[code]++
					}
				}
				if !ok {
					continue
				}
				bands := make([]float32, len(tile.DN))
				missing := false
				for b := range bands {
					v := []float32{float32(tile.DN[b][i])}
					in.Reflectance(v)
					bands[b] = v[0]
					missing = missing || math.IsNaN(float64(v[0]))
				}
				if missing {
					continue
				}
				for _, p := range ctx {
					bands = append(bands, p[i])
				}
				split := 0
				if s.Split == SplitFeatures {
					// The feature's split: a seeded hash of its group.
					if rng.Unit(rng.Hash(s.Seed, 0x7a2, uint64(in.Groups[i]))) < s.ValidationFraction {
						split = 1
					}
				} else if validationAt(s, ii, row, col) {
					split = 1
				} else if nearValidationPixel(s, ii, w, h, row, col) {
					buffered++
					continue
				}
				key := rng.Hash(s.Seed, 0x5a4, uint64(ii), uint64(row), uint64(col))
				if in.Weights != nil {
					// Weight w: the smallest of w hashes, the key and the
					// key extended by 1 … w−1; weight 0 is never drawn.
					if in.Weights[i] == 0 {
						continue
					}
					min := key
					for j := 1; j < int(in.Weights[i]); j++ {
						if h := rng.Hash(s.Seed, 0x5a4, uint64(ii), uint64(row), uint64(col), uint64(j)); h < min {
							min = h
						}
					}
					key = min
				}
				id := uint64(ii)<<40 | uint64(row)<<20 | uint64(col)
				res[c*2+split] = append(res[c*2+split], pixel{key, id, bands})
			}
		}
	}
	for r := range res {
		slices.SortFunc(res[r], func(a, b pixel) int {
			return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id))
		})
		res[r] = res[r][:min(len(res[r]), s.MaxPerClass)]
	}
	if s.Balance {
		for split := range 2 {
			least := math.MaxInt
			for c := range k {
				if n := len(res[c*2+split]); n > 0 {
					least = min(least, n)
				}
			}
			for c := range k {
				res[c*2+split] = res[c*2+split][:min(least, len(res[c*2+split]))]
			}
		}
	}
	out := &sampleset.Set{Header: sampleset.Header{Features: set.Names(), Classes: scheme.Codes(), Sources: sources, Seed: s.Seed, Buffered: buffered}}
	nb, nf := set.Planes(), len(set.Features)
	planes := make([][]float32, nb)
	for split := range 2 {
		for c := range k {
			for _, px := range res[c*2+split] {
				out.Y = append(out.Y, uint8(c))
				out.Split = append(out.Split, uint8(split))
				out.Pixel = append(out.Pixel, px.id)
				for b := range nb {
					planes[b] = append(planes[b], px.bands[b])
				}
			}
		}
	}
	n := len(out.Y)
	feats := make([][]float32, nf)
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	if n > 0 {
		if err := (features.CPU{Set: set}).Compute(feats, planes); err != nil {
			t.Fatal(err)
		}
	}
	out.X = make([]float32, 0, n*nf)
	for i := range n {
		for f := range nf {
			out.X = append(out.X, feats[f][i])
		}
	}
	ref.buffered = buffered
	// Warnings tell a draw of no candidate: the reference's stand in its
	// reservoirs.
	for r := range res {
		if len(res[r]) > 0 {
			ref.res[r].entries = make([]entry, 1)
		}
	}
	return out, ref.Warnings(), buffered
}

// validationAt reports whether pixel (row, col) of input ii lies in a
// validation block.
func validationAt(s Config, ii, row, col int) bool {
	return rng.Unit(rng.Hash(s.Seed, 0x7a1, uint64(ii), uint64(row/s.BlockSize), uint64(col/s.BlockSize))) < s.ValidationFraction
}

// nearValidationPixel is the buffer's definition: some pixel of the w × h
// input within s.Buffer of (row, col), in Chebyshev distance, lies in a
// validation block.
func nearValidationPixel(s Config, ii, w, h, row, col int) bool {
	for r := max(0, row-s.Buffer); r <= min(h-1, row+s.Buffer); r++ {
		for c := max(0, col-s.Buffer); c <= min(w-1, col+s.Buffer); c++ {
			if validationAt(s, ii, r, c) {
				return true
			}
		}
	}
	return false
}

// drawCase is one randomized sampling problem.
type drawCase struct {
	cfg    Config
	names  []string
	scheme landcover.Scheme
	ins    []Input
}

// randomDrawCase makes tiles (small, or up to 400² when big) with patchy
// labels from a few of the scheme's classes (others empty, some rare),
// unlabelled pixels and codes outside the scheme, nodata holes and single
// missing bands, and random sampling settings.
func randomDrawCase(t *testing.T, seed uint64, big bool) drawCase {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	scheme := landcover.WorldCover
	bands := []string{"B02", "B03", "B04", "B08"}
	names := []string{"B02", "B04", "B08", "ndvi", "ndwi"}
	if seed%2 == 0 {
		// Context features: the draw's paths read their neighbourhoods
		// through halos, the reference from the whole tile.
		names = append(names, "mean(B08,5)", "std(ndvi,3)", "range(B04,7)")
	}
	side, most := 70, 60
	if big {
		// Many pixels per histogram bin: the bound falls inside one.
		side, most = 400, 5000
	}
	cfg := Config{MaxPerClass: 1 + r.IntN(most), Balance: r.IntN(2) == 0, BlockSize: 1 + r.IntN(12),
		ValidationFraction: r.Float64() * 0.6, Seed: r.Uint64()}
	switch r.IntN(4) {
	case 0, 1:
		// Half the cases buffer the split, up to the largest buffer.
		cfg.Buffer = r.IntN(cfg.BlockSize)
	case 2:
		// A quarter split by features: the label patches, a group each.
		cfg.Split = SplitFeatures
	}
	// Scaling and nodata: the stack's, none, a nodata DN that is not 0,
	// and a scale that also makes DN 0 NaN (0 × Inf), so that two DNs are
	// missing.
	scale, offset, nodata := 1e-4, -0.1, ptr(0.0)
	switch r.IntN(4) {
	case 1:
		nodata = nil
	case 2:
		nodata = ptr(7.0)
	case 3:
		scale, offset, nodata = math.Inf(1), 0, ptr(7.0)
	}
	// A few classes, one of them rare; the rest of the scheme stays empty.
	var codes []uint8
	for _, c := range r.Perm(len(scheme.Classes))[:1+r.IntN(5)] {
		codes = append(codes, scheme.Classes[c].Code)
	}
	var ins []Input
	for ii := range 1 + r.IntN(3) {
		w, h := 1+r.IntN(side), 1+r.IntN(side)
		tile := stack.New(fmt.Sprintf("tile%d", ii), geo.Grid{EPSG: 32631, Width: w, Height: h,
			Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}, bands, scale, offset)
		patch := 1 + r.IntN(8)
		for row := range h {
			for col := range w {
				i := row*w + col
				p := rng.Hash(seed, uint64(ii), uint64(row/patch), uint64(col/patch))
				code := codes[p%uint64(len(codes))]
				switch {
				case p>>32%10 == 0:
					code = 0
				case p>>32%23 == 1:
					code = 5 // outside the scheme
				case code == codes[0] && p>>40%8 != 0:
					code = 0 // the rare class
				}
				tile.Labels[i] = code
				hole := r.IntN(15) == 0
				for b := range tile.DN {
					dn := uint16(r.IntN(10000))
					switch {
					case hole || r.IntN(40) == 0:
						dn = 0
					case r.IntN(40) == 0:
						dn = 7
					}
					tile.DN[b][i] = dn
				}
			}
		}
		in := Input{Name: tile.Name, Bands: bands, Scale: scale, Offset: offset, NoData: nodata, Tile: tile}
		if cfg.Split == SplitFeatures {
			// Groups: the label patches, numbered across tiles (features
			// may span tiles) with a few repeats.
			in.Groups = make([]uint32, w*h)
			for i := range in.Groups {
				in.Groups[i] = uint32(rng.Hash(seed, uint64(i/w/patch), uint64(i%w/patch)) % 97)
			}
		}
		ins = append(ins, in)
	}
	return drawCase{cfg, names, scheme, ins}
}

// drawSamples runs the sampler over the inputs and returns the samples
// file's bytes and the warnings.
func drawSamples(t *testing.T, c drawCase, ins []Input) ([]byte, []string) {
	t.Helper()
	b, warn, _ := drawBuffered(t, c, ins)
	return b, warn
}

// drawBuffered is drawSamples that also returns how many training
// candidates the buffer dropped.
func drawBuffered(t *testing.T, c drawCase, ins []Input) ([]byte, []string, int64) {
	t.Helper()
	sp := New(c.cfg, c.names, c.scheme, cpu)
	for _, in := range ins {
		if err := sp.Add(in); err != nil {
			t.Fatal(err)
		}
	}
	set, _, err := sp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b, sp.Warnings(), sp.Buffered()
}

// stripInputs are the inputs read strip by strip (the path of inputs in
// files), from the same tiles.
func stripInputs(ins []Input) []Input {
	var out []Input
	for _, in := range ins {
		tile := in.Tile
		read := func(r0, h int) Strip { return memStrip(in, tile, r0, h) }
		f := in
		f.Tile = nil
		f.Source = Source{Width: tile.Grid.Width, Height: tile.Grid.Height, Open: func() (func(int, int) Strip, func(), error) { return read, func() {}, nil }}
		out = append(out, f)
	}
	return out
}

// cpu computes features on the CPU.
func cpu(set *features.Set) (features.Computer, func(), error) {
	return features.CPU{Set: set}, func() {}, nil
}

func ptr[T any](v T) *T { return &v }

// TestDrawMatchesReference checks that the draw from memory gives the
// reference's samples file, byte for byte, on randomized inputs, whatever
// GOMAXPROCS is, and that the strip path (that of inputs in files) gives
// the same.
func TestDrawMatchesReference(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	bufferedTrials := 0
	defer func() {
		if bufferedTrials < 5 {
			t.Errorf("only %d trials buffered pixels: the buffer goes untested", bufferedTrials)
		}
	}()
	for trial := range uint64(44) {
		c := randomDrawCase(t, trial, trial >= 40)
		want, wantWarn, wantBuffered := referenceSamples(t, c.cfg, c.names, c.scheme, c.ins)
		wantBytes, err := want.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if wantBuffered > 0 {
			bufferedTrials++
		}
		name := fmt.Sprintf("trial %d (%d inputs, max_per_class %d, balance %v, block %d, buffer %d, %d samples)", trial, len(c.ins),
			c.cfg.MaxPerClass, c.cfg.Balance, c.cfg.BlockSize, c.cfg.Buffer, want.N())
		for _, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			got, warn, buffered := drawBuffered(t, c, c.ins)
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("%s, GOMAXPROCS %d: samples differ from the reference", name, procs)
			}
			if !slices.Equal(warn, wantWarn) {
				t.Errorf("%s, GOMAXPROCS %d: warnings %q, the reference's %q", name, procs, warn, wantWarn)
			}
			if buffered != wantBuffered {
				t.Errorf("%s, GOMAXPROCS %d: %d pixels buffered, the reference %d", name, procs, buffered, wantBuffered)
			}
		}
		if trial%4 == 0 || c.cfg.Buffer > 0 {
			got, _, buffered := drawBuffered(t, c, stripInputs(c.ins))
			if !bytes.Equal(got, wantBytes) || buffered != wantBuffered {
				t.Errorf("%s: samples drawn strip by strip differ from the reference (%d buffered, the reference %d)", name, buffered, wantBuffered)
			}
		}
	}
}

// TestDrawKeepsEarlierInputs checks the merge with what earlier inputs
// kept: a tile drawn from memory after one drawn strip by strip, and the
// other way round, as the reference.
func TestDrawKeepsEarlierInputs(t *testing.T) {
	t.Parallel()
	for trial := range uint64(6) {
		c := randomDrawCase(t, 1000+trial, false)
		if len(c.ins) < 2 {
			continue
		}
		want, _, _ := referenceSamples(t, c.cfg, c.names, c.scheme, c.ins)
		wantBytes, _ := want.Encode()
		files := stripInputs(c.ins)
		mixed := slices.Clone(c.ins)
		for i := range mixed {
			if (i+int(trial))%2 == 0 {
				mixed[i] = files[i]
			}
		}
		got, _ := drawSamples(t, c, mixed)
		if !bytes.Equal(got, wantBytes) {
			t.Errorf("trial %d: samples from mixed inputs differ from the reference", trial)
		}
	}
}

// TestSortCandidates checks the radix sort against a comparison sort, with
// keys drawn from few values (ties broken by id) and from all 64 bits.
func TestSortCandidates(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		c := make([]entry, r.IntN(300))
		for i := range c {
			c[i] = entry{key: r.Uint64(), id: r.Uint64(), at: i}
			if trial%2 == 0 {
				c[i].key = r.Uint64N(5) << (8 * r.UintN(8))
			}
		}
		want := slices.Clone(c)
		slices.SortFunc(want, func(a, b entry) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id)) })
		sortCandidates(c, make([]entry, len(c)))
		if !slices.Equal(c, want) {
			t.Fatalf("trial %d: radix sort differs", trial)
		}
	}
}

// TestWarnsWhenEveryPixelLacksAPlane: labelled pixels of the scheme's
// classes whose every pixel has a band without data (as a temporal
// season matching none of the dates leaves its planes) are drawn none,
// and the warnings say why, from memory and from strips; a tile with
// samples has no such warning.
func TestWarnsWhenEveryPixelLacksAPlane(t *testing.T) {
	t.Parallel()
	bands := []string{"B04", "B08"}
	make1 := func(emptyPlane bool) Input {
		tile := stack.New("t", geo.Grid{EPSG: 32631, Width: 20, Height: 10,
			Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}, bands, 1e-4, 0)
		for i := range tile.Labels {
			tile.Labels[i] = []uint8{10, 30, 0}[i%3]
			tile.DN[0][i] = uint16(1000 + i)
			if !emptyPlane {
				tile.DN[1][i] = uint16(3000 + i)
			}
		}
		return Input{Name: "t", Bands: bands, Scale: 1e-4, NoData: ptr(0.0), Tile: tile}
	}
	c := drawCase{cfg: Config{MaxPerClass: 50, BlockSize: 4, ValidationFraction: 0.3, Seed: 7}, names: bands, scheme: landcover.WorldCover}
	for _, strips := range []bool{false, true} {
		ins := []Input{make1(true)}
		if strips {
			ins = stripInputs(ins)
		}
		_, warn := drawSamples(t, c, ins)
		if len(warn) != 1 || !strings.Contains(warn[0], "none of the 134 labelled pixels") || !strings.Contains(warn[0], "temporal season") {
			t.Errorf("strips %v: warnings %q", strips, warn)
		}
	}
	if _, warn := drawSamples(t, c, []Input{make1(false)}); len(warn) != 0 {
		t.Errorf("a tile with samples warns: %q", warn)
	}
}

// TestCensusInMemoryMatchesStrips: the census of tiles drawn from memory
// (counted in the background while the draw goes on) is the census of the
// same tiles drawn strip by strip, and its labelled pixels by code are
// the labels' own counts.
func TestCensusInMemoryMatchesStrips(t *testing.T) {
	for trial := range uint64(12) {
		c := randomDrawCase(t, 100+trial, trial >= 10)
		census := func(ins []Input) Census {
			sp := New(c.cfg, c.names, c.scheme, cpu)
			for _, in := range ins {
				if err := sp.Add(in); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := sp.Finish(); err != nil {
				t.Fatal(err)
			}
			return sp.Census()
		}
		mem, strips := census(c.ins), census(stripInputs(c.ins))
		for code := range 256 {
			if mem.Labelled[code] != strips.Labelled[code] || mem.Validation[code] != strips.Validation[code] || mem.Buffered[code] != strips.Buffered[code] {
				t.Fatalf("trial %d, code %d: labelled, validation, buffered %d, %d, %d from memory, %d, %d, %d strip by strip", trial, code,
					mem.Labelled[code], mem.Validation[code], mem.Buffered[code], strips.Labelled[code], strips.Validation[code], strips.Buffered[code])
			}
		}
		if mem != strips {
			t.Fatalf("trial %d: partial %v from memory, %v strip by strip", trial, mem.Partial, strips.Partial)
		}
		var want [256]int64
		for _, in := range c.ins {
			for _, code := range in.Tile.Labels {
				if code != 0 {
					want[code]++
				}
			}
		}
		if mem.Labelled != want {
			t.Fatalf("trial %d: labelled by code %v, the labels hold %v", trial, mem.Labelled, want)
		}
		var validation int64
		for _, n := range mem.Validation {
			validation += n
		}
		if trial == 0 && validation == 0 {
			t.Fatalf("trial %d: no validation pixel counted: the split goes untested", trial)
		}
	}
}
