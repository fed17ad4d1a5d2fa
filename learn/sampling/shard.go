package sampling

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pixel/features"
)

// claim records the job's input number index as name, refusing an index
// already drawn.
func (sp *Sampler) claim(index int, name string) error {
	if index < 0 || index >= 1<<24 {
		return fmt.Errorf("%s: input index %d is out of range", name, index)
	}
	if name == "" {
		return fmt.Errorf("input %d has no name", index)
	}
	for len(sp.sources) <= index {
		sp.sources = append(sp.sources, "")
	}
	if sp.sources[index] != "" {
		return fmt.Errorf("%s: input %d was already drawn (as %s)", name, index, sp.sources[index])
	}
	sp.sources[index] = name
	return nil
}

// Draw returns what the sampler holds as one shard's draw of a job of
// total inputs: per class and split its candidates with the smallest
// keys, at most max_per_class each and not balanced, with their band
// reflectances in X (sampleset.Draw says which inputs they come from and
// how their values were scaled). Merged in any order, the draws of a
// job's shards give the sampler one process adding every input would
// have. A shard with no input (an array of more tasks than the job has
// tiles) draws an empty set: no inputs, no features, no candidates.
func (sp *Sampler) Draw(total int, scale, offset float64, nodata *float64) (*sampleset.Set, error) {
	if total <= 0 || total < len(sp.sources) {
		return nil, fmt.Errorf("draw: input %d of a job of %d", len(sp.sources)-1, total)
	}
	d := &sampleset.Draw{Total: total, Labelled: sp.labelled, Scale: scale, Offset: offset, NoData: nodata}
	if sp.set != nil {
		d.Layers = sp.set.Layers
	}
	var names []string
	for i, name := range sp.sources {
		if name != "" {
			d.Inputs, names = append(d.Inputs, i), append(names, name)
		}
	}
	for code, n := range sp.outside {
		if n > 0 {
			if d.Outside == nil {
				d.Outside = map[uint8]int64{}
			}
			d.Outside[uint8(code)] = n
		}
	}
	// A candidate's values: its bands, then its context features.
	var bands []string
	if sp.set != nil {
		bands = sp.set.Values()
	}
	out := &sampleset.Set{Header: sampleset.Header{Features: bands, Classes: sp.scheme.Codes(), Sources: names, Seed: sp.cfg.Seed, Buffered: sp.buffered, Draw: d}}
	var keys []uint64
	weighted := false
	for r, res := range sp.res {
		res.keep(sp.cfg.MaxPerClass)
		for _, e := range res.entries {
			out.Y = append(out.Y, uint8(r/2))
			out.Split = append(out.Split, uint8(r%2))
			out.Pixel = append(out.Pixel, e.id)
			keys = append(keys, e.key)
			weighted = weighted || e.key != unweightedKey(sp.cfg.Seed, e.id)
		}
		out.X = append(out.X, res.bands...)
	}
	// Weighted keys cannot be recomputed from the ids: the draw carries
	// them. An unweighted draw's bytes stay as they were.
	if weighted {
		d.Keys = keys
	}
	return out, nil
}

// unweightedKey is the sampling key of pixel id before any weight.
func unweightedKey(seed, id uint64) uint64 {
	return rng.Hash(seed, 0x5a4, id>>40, id>>20&(1<<20-1), id&(1<<20-1))
}

// Merge adds one shard's draw (Draw's output, from the same config) as if
// its inputs had been added here: its inputs take their indices, its
// candidates join the reservoirs (keys recomputed from their ids and the
// seed), its label counts add up.
func (sp *Sampler) Merge(d *sampleset.Set) error {
	if d.Draw == nil {
		return fmt.Errorf("merge: a training set, not a shard's draw")
	}
	if d.Seed != sp.cfg.Seed || !slices.Equal(d.Classes, sp.scheme.Codes()) {
		return fmt.Errorf("merge: drawn with seed %d over classes %v, this job has seed %d over %v", d.Seed, d.Classes, sp.cfg.Seed, sp.scheme.Codes())
	}
	if len(d.Draw.Inputs) != len(d.Sources) {
		return fmt.Errorf("merge: %d input indices for %d sources", len(d.Draw.Inputs), len(d.Sources))
	}
	if sp.total != 0 && d.Draw.Total != sp.total || d.Draw.Total <= 0 {
		return fmt.Errorf("merge: a draw of a job of %d inputs, others are of %d", d.Draw.Total, sp.total)
	}
	sp.total = d.Draw.Total
	if len(d.Draw.Inputs) == 0 {
		// An empty shard's draw: it adds no input, and names no bands.
		if d.N() > 0 || d.Draw.Labelled != 0 {
			return fmt.Errorf("merge: a draw of no input holds %d candidates and %d labelled pixels", d.N(), d.Draw.Labelled)
		}
		return nil
	}
	bandNames, context := features.SplitValues(d.Features)
	fs, err := features.NewSet(sp.names, bandNames, d.Draw.Layers...)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if want := fs.Values()[len(bandNames):]; !slices.Equal(context, want) {
		return fmt.Errorf("merge: the draw holds context features [%s], the features configured need [%s]", strings.Join(context, ", "), strings.Join(want, ", "))
	}
	if sp.set != nil && !slices.Equal(sp.set.Bands, fs.Bands) {
		return fmt.Errorf("merge: bands %v differ from %v", fs.Bands, sp.set.Bands)
	}
	for j, index := range d.Draw.Inputs {
		if err := sp.claim(index, d.Sources[j]); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
	}
	sp.set = fs
	sp.labelled += d.Draw.Labelled
	sp.buffered += d.Buffered
	// A draw records its labelled pixels in all, not by code.
	sp.partial = true
	for _, code := range slices.Sorted(maps.Keys(d.Draw.Outside)) {
		sp.outside[code] += d.Draw.Outside[code]
	}
	nb := len(d.Features)
	cands := make([][]entry, len(sp.res))
	bands := make([][]float32, len(sp.res))
	if d.Draw.Keys != nil && len(d.Draw.Keys) != len(d.Pixel) {
		return fmt.Errorf("merge: %d keys for %d candidates", len(d.Draw.Keys), len(d.Pixel))
	}
	for i, id := range d.Pixel {
		r := int(d.Y[i])*2 + int(d.Split[i])
		key := unweightedKey(sp.cfg.Seed, id)
		if d.Draw.Keys != nil {
			// A weighted key is the smallest of its pixel's hashes, the
			// unweighted one among them: never above it.
			if d.Draw.Keys[i] > key {
				return fmt.Errorf("merge: candidate %d (pixel %#x) has key %#x, above its unweighted key %#x: not a draw of this seed", i, id, d.Draw.Keys[i], key)
			}
			key = d.Draw.Keys[i]
		}
		cands[r] = append(cands[r], entry{key: key, id: id, at: len(bands[r])})
		bands[r] = append(bands[r], d.X[i*nb:(i+1)*nb]...)
	}
	for r, c := range cands {
		slices.SortFunc(c, cmpEntry)
		sp.res[r].merge(c, bands[r], nb, sp.cfg.MaxPerClass)
	}
	return nil
}
