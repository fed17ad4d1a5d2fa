// Package sampling draws the labelled pixels a forest is trained and
// validated on: a stratified, block-split draw (for every class and split,
// the pixels with the smallest seeded hashes, up to a cap; with pixel
// weights, a pixel of weight w keys as the smallest of w hashes: a
// weighted draw, weightedKey) from tiles in
// memory or from strips read out of files, and the features of the pixels
// it keeps. Training pixels near validation blocks may be dropped (a
// buffer, buffer.go), or the split may go by the vector features that
// labelled the pixels instead of blocks (leave-location-out). A tile in memory is drawn from its digital numbers in two
// data-parallel passes (draw.go), run on every core or by a device that
// holds the tile too (Passes, passes.go); strips from files are screened
// on every core (sampler.go). All keep the same pixels, bit for bit. With
// context features, each candidate keeps its context features (from its
// window: strips are read with the set's halo) beside its bands. Scan visits
// every labelled pixel instead, for benchmarks that need them all.
//
// The package computes; it reads no files. Strips from files come through
// a Source its caller builds (pipeline, with GDAL behind raster).
package sampling

import (
	"fmt"
	"math"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// Config says how labelled pixels are drawn: a stratified, block-split
// draw, reproducible from its seed.
type Config struct {
	MaxPerClass        int     `yaml:"max_per_class"` // per class and split
	Balance            bool    `yaml:"balance"`       // cap every class at the rarest's count
	BlockSize          int     `yaml:"block_size"`    // pixels; blocks go wholly to one split
	ValidationFraction float64 `yaml:"validation_fraction"`
	MinPerClass        int     `yaml:"min_per_class"` // refuse a present class with fewer training samples
	Seed               uint64  `yaml:"seed"`
	// Buffer drops from training every pixel within Buffer pixels
	// (Chebyshev: a (2×Buffer+1)² square) of a validation block, so that
	// features computed over a neighbourhood of that radius never see
	// validation pixels. 0 (the default) drops none; it must be below
	// BlockSize (see CheckBuffer).
	Buffer int `yaml:"buffer,omitempty" json:",omitempty"`
	// Split is how pixels go to validation: SplitBlocks (the default,
	// also "") by block, SplitFeatures by the vector feature that labelled
	// them (leave-location-out: each feature's pixels on one side), which
	// needs the inputs' group ids (Input.Groups, Strip.Groups).
	Split string `yaml:"split,omitempty" json:",omitempty"`
	// Remap turns label codes, the scheme's own too, into codes of the
	// scheme (a train config's classes.remap): their pixels are drawn as
	// that class.
	Remap map[uint8]uint8 `yaml:"-" json:"-"`
}

// The splits (Config.Split).
const (
	SplitBlocks   = "blocks"
	SplitFeatures = "features"
)

// Check refuses a split it does not know, and a buffer that is negative
// or not below the block size: with Buffer < BlockSize, a pixel's square
// reaches no block beyond its own block's eight neighbours, which is what
// every draw path tests. The buffer is a blocked split's: around features
// it would need each pixel's neighbourhood of every strip, which the
// strip path does not read.
func (c Config) Check() error {
	switch c.Split {
	case "", SplitBlocks:
	case SplitFeatures:
		if c.Buffer != 0 {
			return fmt.Errorf("sampling.buffer: %d with split %s; the buffer works with split %s only", c.Buffer, SplitFeatures, SplitBlocks)
		}
	default:
		return fmt.Errorf("sampling.split: %q is not %s or %s", c.Split, SplitBlocks, SplitFeatures)
	}
	if c.Buffer < 0 || c.Buffer >= c.BlockSize {
		return fmt.Errorf("sampling.buffer: %d is outside [0, block_size %d)", c.Buffer, c.BlockSize)
	}
	return nil
}

// byFeatures reports whether the split goes by feature.
func (c Config) byFeatures() bool { return c.Split == SplitFeatures }

// groupSplit is a feature's split (1: validation) by a seeded hash of its
// group id, independent of the input, so that a feature spanning inputs
// stays on one side.
func groupSplit(seed uint64, valFrac float64, group uint32) uint16 {
	if rng.Unit(rng.Hash(seed, 0x7a2, uint64(group))) < valFrac {
		return 1
	}
	return 0
}

// weightedKey is the sampling key of a pixel of weight w whose
// unweighted key is key: the smallest of w hashes, key itself and key
// extended by 1 … w−1. The minimum of w independent uniform keys has
// P(min ≤ x) = 1 − (1 − x)^w, the distribution of Efraimidis and
// Spirakis's key u^(1/w) (in 1 − u form), so the smallest keys of a
// reservoir are a sample without replacement weighted by w, computed
// with integer hashes only (the same bits on every machine). Weight 1
// gives key: an unweighted draw. Weight 0 pixels are never drawn (the
// callers skip them).
func weightedKey(key uint64, w uint8) uint64 {
	k := key
	for j := uint64(1); j < uint64(w); j++ {
		k = min(k, rng.Extend(key, j))
	}
	return k
}

// Computers makes a features computer for a feature set (the CPU's, or a
// GPU's) and its release.
type Computers func(set *features.Set) (features.Computer, func(), error)

// Input is one labelled image to draw from: a tile in memory, or strips
// from a Source.
type Input struct {
	Name  string   // for messages and the samples' sources
	Bands []string // the image's bands, in order
	// Layers are those of Bands that are layers (features.Layer): their
	// maps to the layers' units.
	Layers        []features.Layer
	Scale, Offset float64  // reflectance = value × Scale + Offset
	NoData        *float64 // the stored value that means no data, if any
	// Tile, when set, is the input in memory: it is drawn from its DNs.
	Tile *stack.Tile
	// Groups, with Tile, are its pixels' group ids (the vector features
	// that labelled them, row-major) for a split by features.
	Groups []uint32
	// Weights, with Tile, are its pixels' weights (the features of
	// vector labels' weight attribute, row-major, 0 never drawn); nil:
	// every pixel's is 1. See weightedKey.
	Weights []uint8
	// Passes, with Tile, run the draw's passes on a device that holds
	// the tile too; nil: on every core. A split by features, and a tile
	// with weights, run on every core whatever Passes says.
	Passes Passes
	// Source gives the strips of an input in files (Tile nil).
	Source Source
}

// Source reads an input strip by strip: its size, and a reader per
// worker (GDAL handles are not shared between threads).
type Source struct {
	Width, Height int
	Open          func() (read func(r0, h int) Strip, close func(), err error)
}

// Strip is h rows of an input from row r0: labels and reflectance planes
// (NaN at nodata), or the error that reading them met.
type Strip struct {
	Labels []uint8
	Groups []uint32 // group ids, for a split by features
	// Weights are the pixels' weights (nil: all 1; see weightedKey).
	Weights []uint8
	Planes  [][]float32
	Err     error
	feats   [][]float32 // computed by readStrips when a scan asks
}

// source is the input's strips: from the tile in memory, or its Source.
func (in Input) source() (Source, error) {
	if t := in.Tile; t != nil {
		read := func(r0, h int) Strip { return memStrip(in, t, r0, h) }
		return Source{t.Grid.Width, t.Grid.Height, func() (func(int, int) Strip, func(), error) { return read, func() {}, nil }}, nil
	}
	if in.Source.Open == nil {
		return Source{}, fmt.Errorf("%s: an input with neither a tile nor a source", in.Name)
	}
	return in.Source, nil
}

// Reflectance turns an input's stored values into reflectance in place,
// NaN at its nodata: float32(v) × scale rounded, then + offset.
func (in Input) Reflectance(vals []float32) {
	for i, v := range vals {
		if in.NoData != nil && float64(v) == *in.NoData {
			vals[i] = float32(math.NaN())
		} else {
			vals[i] = float32(float32(v)*float32(in.Scale)) + float32(in.Offset)
		}
	}
}
