package sampling

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// stripRows is how many image rows sampling reads at once: small enough
// that the strips in flight stay a few hundred MB on a full tile.
const stripRows = 128

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

// Scan computes the features of input number ii strip by strip and
// visits every pixel whose label is one of scheme's codes and whose bands
// are all present, in raster order, with its class, its split and its key
// as the draw gives them: splits go by blocks of cfg.BlockSize pixels (a
// fraction cfg.ValidationFraction of them to validation; training pixels
// within cfg.Buffer of a validation block are not visited; or by the
// pixels' groups with split features), keys are the
// pixel's hash seeded by cfg.Seed, weighted by the strip's weights when it
// has them (weightedKey; pixels of weight 0 are not visited). Strips are read and their features
// computed by several workers a few strips ahead of the visits.
func Scan(ii uint64, in Input, set *features.Set, comp features.Computer, scheme landcover.Scheme, cfg Config, visit func(Pixel)) error {
	src, err := in.source()
	if err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	seed, block := cfg.Seed, cfg.BlockSize
	var class [256]int
	for i := range class {
		class[i] = -1
	}
	for i, c := range scheme.Classes {
		class[c.Code] = i
	}
	w, nb := src.Width, len(set.Bands)
	strips := (src.Height + stripRows - 1) / stripRows
	results, wait := readStrips(src, set, comp, strips)
	defer wait()
	for k := range strips {
		st := <-results[k].strips
		if st.Err != nil {
			return st.Err
		}
		r0, h := k*stripRows, len(st.Labels)/w
		if st.Weights != nil && len(st.Weights) != len(st.Labels) {
			return fmt.Errorf("%s: a strip of %d labels has %d weights", in.Name, len(st.Labels), len(st.Weights))
		}
		if cfg.byFeatures() && len(st.Groups) != len(st.Labels) {
			return fmt.Errorf("%s: sampling.split %s needs the group id of every pixel (the features of vector labels: groups.tif)", in.Name, SplitFeatures)
		}
		var splits []uint16
		var near bufferRows
		groups := newGroupSplits(cfg)
		for r := range h {
			row := uint64(r0 + r)
			if cfg.byFeatures() {
				// Each pixel's split is its group's.
			} else if r == 0 || row%uint64(block) == 0 {
				splits = blockSplits(cfg, ii, row/uint64(block), w)
				if cfg.Buffer > 0 {
					near = neighbourSplits(cfg, ii, row/uint64(block), w, src.Height, splits)
				}
			}
			if cfg.Buffer > 0 {
				near.reach(int(row), src.Height, block, cfg.Buffer)
			}
			for col := range w {
				i := r*w + col
				c := class[st.Labels[i]]
				if c < 0 {
					continue
				}
				missing := false
				for b := range nb {
					if st.Planes[b][i] != st.Planes[b][i] {
						missing = true
					}
				}
				var split int
				if cfg.byFeatures() {
					split = int(groups.of(st.Groups[i]))
				} else {
					split = int(splits[col/block])
				}
				if missing || split == 0 && cfg.Buffer > 0 && near.near(col, block, cfg.Buffer) {
					continue
				}
				key := rng.Hash(seed, 0x5a4, ii, row, uint64(col))
				if st.Weights != nil {
					if st.Weights[i] == 0 {
						continue
					}
					key = weightedKey(key, st.Weights[i])
				}
				visit(Pixel{class: c, split: split, key: key, id: ii<<40 | row<<20 | uint64(col), feats: st.feats, i: i})
			}
		}
		results[k].done()
	}
	return nil
}

// stripSlot delivers one strip; done frees its place in the read-ahead.
type stripSlot struct {
	strips chan Strip
	done   func()
}

// readStrips starts workers that read strips in order, a bounded number
// ahead of the consumer (with their context planes when set has context
// features: readStrip), and, when comp is not nil, compute their features
// (one strip at a time per Computer). wait stops the workers and waits for them: they use comp,
// which the caller closes after.
func readStrips(src Source, set *features.Set, comp features.Computer, strips int) ([]stripSlot, func()) {
	workers := max(1, min(strips, runtime.GOMAXPROCS(0)/2, 8))
	// tokens bound the strips in flight: a worker takes one before reading
	// a strip, the consumer returns it when done with the strip.
	tokens := make(chan struct{}, workers+1)
	slots := make([]stripSlot, strips)
	for k := range slots {
		slots[k] = stripSlot{strips: make(chan Strip, 1), done: func() { <-tokens }}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var next atomic.Int64
	var compute sync.Mutex
	for range workers {
		wg.Go(func() {
			var read func(r0, h int) Strip
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
				var st Strip
				if read == nil {
					read, closeFn, st.Err = src.Open()
				}
				if st.Err == nil {
					r0 := k * stripRows
					st = readStrip(read, set, src.Width, src.Height, r0, min(stripRows, src.Height-r0))
				}
				if st.Err == nil && comp != nil {
					st.feats = make([][]float32, len(set.Features))
					for f := range st.feats {
						st.feats[f] = make([]float32, len(st.Labels))
					}
					compute.Lock()
					st.Err = comp.Compute(st.feats, st.Planes)
					compute.Unlock()
				}
				slots[k].strips <- st
				if st.Err != nil {
					return
				}
			}
		})
	}
	return slots, func() { close(stop); wg.Wait() }
}

// readStrip reads the h rows from r0 of a width×height input. When set
// has context features, the rows are read with the set's halo above and
// below (cut at the input's edges), the context features computed for the
// strip's pixels from it, and their planes appended to the bands': a
// strip's planes are then set.Planes() long, the values a Computer takes.
func readStrip(read func(r0, h int) Strip, set *features.Set, width, height, r0, h int) Strip {
	r := 0
	if set != nil {
		r = set.Radius()
	}
	if r == 0 {
		return read(r0, h)
	}
	_, oy, rect := features.Halo(0, r0, width, h, width, height, r)
	st := read(oy, rect.Height)
	if st.Err != nil {
		return st
	}
	n := width * h
	ctx := make([][]float32, len(set.ContextFeatures()))
	for k := range ctx {
		ctx[k] = make([]float32, n)
	}
	if err := set.ContextCompute(ctx, st.Planes, rect); err != nil {
		return Strip{Err: err}
	}
	inner := rect.Y * width
	out := Strip{Labels: st.Labels[inner : inner+n]}
	if st.Groups != nil {
		out.Groups = st.Groups[inner : inner+n]
	}
	if st.Weights != nil {
		out.Weights = st.Weights[inner : inner+n]
	}
	for _, p := range st.Planes {
		out.Planes = append(out.Planes, p[inner:inner+n])
	}
	out.Planes = append(out.Planes, ctx...)
	return out
}

// memStrip takes the h rows from r0 of a tile in memory. DNs become float32
// exactly, as GDAL converts them when reading the stack file, so the
// planes are the same bits as strips read from the files (pipeline's).
func memStrip(in Input, t *stack.Tile, r0, h int) Strip {
	w := t.Grid.Width
	st := Strip{Labels: make([]uint8, w*h), Planes: make([][]float32, len(t.DN))}
	t.ReadLabels(0, r0, w, h, st.Labels)
	if in.Groups != nil {
		st.Groups = in.Groups[r0*w : (r0+h)*w]
	}
	if in.Weights != nil {
		st.Weights = in.Weights[r0*w : (r0+h)*w]
	}
	for b, plane := range t.DN {
		vals := make([]float32, w*h)
		for i, v := range plane[r0*w : (r0+h)*w] {
			vals[i] = float32(v)
		}
		in.Reflectance(vals)
		st.Planes[b] = vals
	}
	return st
}
