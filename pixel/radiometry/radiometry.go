// Package radiometry checks that images are on the surface-reflectance
// scale lulc assumes, from their darkest pixels. Sentinel-2 L2A products
// of processing baseline 04.00 and later store DN = 10000 × reflectance +
// 1000; older products and many re-exports store no offset. Declaring the
// wrong convention shifts every reflectance by 0.1, which a forest turns
// into a ruined map without a word. Dark surfaces (water, shadow, dense
// vegetation in the visible) sit near zero reflectance in some band of
// every real scene, so a tile's dark level, the 1st percentile of each
// band's valid reflectances, tells the conventions apart: with an offset
// left in, every band's dark level is above about 0.08; with one removed
// that was never there, dark levels fall below zero.
//
// Histogram collects the levels from a stack's windows as they are made
// (on a fixed sample of pixels: every Stride-th row and column of the
// tile, so the windows' layout does not matter). Suspect reads a tile's
// levels on their own; Shift compares them with a model's training data.
package radiometry

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Stride is the sampling step, in rows and columns: one pixel in 16.
const Stride = 4

// Percentile is the share of a band's valid sampled pixels at or below its
// dark level.
const Percentile = 0.01

// Thresholds of Suspect and Mismatch, in reflectance.
const (
	// OffsetLeftIn: every band's dark level above it suggests a +1000 DN
	// offset that was not removed.
	OffsetLeftIn = 0.08
	// OffsetRemovedTwice: any band's dark level below it suggests an
	// offset removed from data that had none.
	OffsetRemovedTwice = -0.05
	// Mismatch: a median shift against the training data's dark levels
	// at least this large, either way.
	Mismatch = 0.05
)

// Histogram counts a stack's digital numbers per band on the sampled
// pixels (DN 0, no data, left out). Write may be called from several
// goroutines, for windows that do not overlap.
type Histogram struct {
	scale, offset float64
	mu            sync.Mutex
	counts        [][]uint32 // per band, per DN
}

// NewHistogram counts nb bands whose reflectance is DN × scale + offset.
func NewHistogram(nb int, scale, offset float64) *Histogram {
	h := &Histogram{scale: scale, offset: offset, counts: make([][]uint32, nb)}
	for b := range h.counts {
		h.counts[b] = make([]uint32, 65536)
	}
	return h
}

// Write counts a w × h window at column x, row y of the tile: its
// sampled pixels' DNs, band by band (a tile sink; counts and labels are
// not used).
func (h *Histogram) Write(x, y, w, ht int, dn [][]uint16, _, _ []uint8) error {
	if len(dn) < len(h.counts) {
		return fmt.Errorf("radiometry: %d bands, counting %d", len(dn), len(h.counts))
	}
	// Planes after the bands (a stack's temporal planes) are not
	// reflectance of one band: they are not counted.
	dn = dn[:len(h.counts)]
	// The first sampled column and row of the window, on the tile's
	// lattice of every Stride-th pixel.
	c0, r0 := (Stride-x%Stride)%Stride, (Stride-y%Stride)%Stride
	h.mu.Lock()
	defer h.mu.Unlock()
	for b, plane := range dn {
		if len(plane) != w*ht {
			return fmt.Errorf("radiometry: band %d has %d pixels for a %d × %d window", b, len(plane), w, ht)
		}
		cnt := h.counts[b]
		for r := r0; r < ht; r += Stride {
			row := plane[r*w : (r+1)*w]
			for c := c0; c < w; c += Stride {
				cnt[row[c]]++
			}
		}
	}
	return nil
}

// Dark returns each band's dark level: the reflectance of the DN at the
// Percentile of its valid sampled pixels, rounded to 1e-6; NaN for a band
// with none.
func (h *Histogram) Dark() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]float64, len(h.counts))
	for b, cnt := range h.counts {
		var n uint64
		for _, c := range cnt[1:] {
			n += uint64(c)
		}
		out[b] = math.NaN()
		if n == 0 {
			continue
		}
		// The smallest DN with at least ceil(Percentile × n) pixels at
		// or below it.
		need := uint64(math.Ceil(Percentile * float64(n)))
		var seen uint64
		for dn := 1; dn < len(cnt); dn++ {
			if seen += uint64(cnt[dn]); seen >= max(need, 1) {
				out[b] = Round(float64(dn)*h.scale + h.offset)
				break
			}
		}
	}
	return out
}

// Round rounds a reflectance to 1e-6, so that levels print and compare
// the same everywhere.
func Round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// Suspect says what a tile's dark levels (one per band of bands; NaN: no
// valid pixel) suggest about the images' declared scaling: "" when they
// look like surface reflectance, else a warning with the numbers.
func Suspect(bands []string, dark []float64) string {
	lowest, highest := -1, -1
	for b, v := range dark {
		if math.IsNaN(v) {
			continue
		}
		if lowest < 0 || v < dark[lowest] {
			lowest = b
		}
		if highest < 0 || v > dark[highest] {
			highest = b
		}
	}
	switch {
	case lowest < 0:
		return ""
	case LooksOffset(dark):
		return fmt.Sprintf("every band's darkest 1 %% of pixels is above %.2f reflectance (the lowest, %s, at %.4f): the images may carry the +1000 DN offset of Sentinel-2 processing baseline 04.00 and later, which their declared scaling does not remove (for source.rasters, offset: -0.1 or auto removes it)",
			OffsetLeftIn, bands[lowest], dark[lowest])
	case dark[lowest] < OffsetRemovedTwice:
		return fmt.Sprintf("band %s's darkest 1 %% of pixels is below %.2f reflectance (%.4f): an offset seems to be removed from images that do not carry one (for source.rasters, offset: 0 keeps them as they are)",
			bands[lowest], OffsetRemovedTwice, dark[lowest])
	}
	return ""
}

// Shift compares a tile's dark levels with the training data's, band by
// band (tile and trained are aligned with bands): the median of the
// differences over the bands both have (the lower middle one of an even
// count), and how many bands that is.
func Shift(tile, trained []float64) (median float64, n int) {
	var d []float64
	for b := range min(len(tile), len(trained)) {
		if !math.IsNaN(tile[b]) && !math.IsNaN(trained[b]) {
			d = append(d, tile[b]-trained[b])
		}
	}
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return Round(d[(len(d)-1)/2]), len(d)
}

// LooksOffset reports whether dark levels (NaN: no valid pixel) carry the
// signature of a +1000 DN offset left in: every band's dark level above
// OffsetLeftIn, with at least one band measured. Real scenes have some
// dark band (water and shadow in the visible, snow and cloud in the
// short-wave infrared), so a bright scene alone does not pass.
func LooksOffset(dark []float64) bool {
	seen := false
	for _, v := range dark {
		if math.IsNaN(v) {
			continue
		}
		if v <= OffsetLeftIn {
			return false
		}
		seen = true
	}
	return seen
}

// Compare returns a warning when a tile's dark levels are shifted from
// the training data's by Mismatch or more (the median over bands), with
// the numbers; "" otherwise, or when either has no levels. It blames the
// +1000 DN offset only when the brighter side's own levels show it
// (LooksOffset); otherwise the scene is unlike the training data, which
// the area of applicability maps pixel by pixel.
func Compare(bands []string, tile, trained []float64) string {
	s, n := Shift(tile, trained)
	if n == 0 || math.Abs(s) < Mismatch {
		return ""
	}
	way, hint := "brighter", ""
	switch {
	case s > 0 && LooksOffset(tile):
		hint = "the tile's images may carry the +1000 DN offset that the training images did not (or its declared scaling does not remove it); a map made across radiometric conventions is unreliable"
	case s < 0 && LooksOffset(trained):
		way = "darker"
		hint = "the training images may have carried a +1000 DN offset that this tile's do not (or an offset is removed twice); a map made across radiometric conventions is unreliable"
	default:
		if s < 0 {
			way = "darker"
		}
		hint = "the tile's own dark pixels show no offset, so the scene itself is unlike the training data (snow, haze, another season or place): the area of applicability (aoa.tif) shows where the model is on unfamiliar ground"
	}
	return fmt.Sprintf("the tile's darkest pixels are %.4f %s than the training data's (the median over %d bands of %s): %s",
		math.Abs(s), way, n, strings.Join(bands, ", "), hint)
}

// Levels are dark levels by band name, as files store them (JSON has no
// NaN: a band without a level is left out).
type Levels map[string]float64

// ByName turns levels aligned with bands into Levels.
func ByName(bands []string, dark []float64) Levels {
	if len(dark) == 0 {
		return nil
	}
	m := Levels{}
	for b, v := range dark {
		if b < len(bands) && !math.IsNaN(v) {
			m[bands[b]] = v
		}
	}
	return m
}

// Aligned returns the levels in the order of bands, NaN where a band has
// none; nil when there are no levels at all.
func (m Levels) Aligned(bands []string) []float64 {
	if len(m) == 0 {
		return nil
	}
	out := make([]float64, len(bands))
	for b, name := range bands {
		v, ok := m[name]
		if !ok {
			v = math.NaN()
		}
		out[b] = v
	}
	return out
}

// Median is the training data's dark level per band: the lower middle of
// the inputs' levels (NaN where no input has one). Every input lists the
// same bands.
func Median(inputs [][]float64) []float64 {
	if len(inputs) == 0 {
		return nil
	}
	out := make([]float64, len(inputs[0]))
	for b := range out {
		var v []float64
		for _, in := range inputs {
			if b < len(in) && !math.IsNaN(in[b]) {
				v = append(v, in[b])
			}
		}
		out[b] = math.NaN()
		if len(v) > 0 {
			slices.Sort(v)
			out[b] = v[(len(v)-1)/2]
		}
	}
	return out
}
