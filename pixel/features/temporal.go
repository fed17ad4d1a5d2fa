package features

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Temporal features describe a pixel's season: statistics of a per-pixel
// feature (a band, an index or an nd) over a tile's dates, computed by the
// composite (package composite) and kept as planes of the stack. A model
// reads them like bands:
//
//   - pNN(f), NN from 1 to 99: the NN-th percentile of f over the valid
//     dates, by nearest rank (see composite.Temporal for the rule);
//   - season(f, name): the median of f over the valid dates that fall in
//     the season called name, as the ingest config defines it.
//
// A stack plane and the feature reading it share one canonical name,
// "p10(ndvi)", "season(ndvi,spring)". Planes of bands hold reflectance in
// the stack's encoding; planes of indices and nds hold the value + 1 in
// that encoding (so that −1 … 1 fits in its −0.0999 … 6.45), and the
// feature takes the 1 away again: the feature's value is float32(plane −
// 1), in float32 arithmetic, which the GPU twin reproduces.

// TemporalShift is what a temporal plane of an index or nd adds to the
// value before it is quantised into the stack.
const TemporalShift = 1

// nan32 is the canonical quiet NaN.
var nan32 = math.Float32frombits(0x7fc00000)

// parseTemporal parses "pNN(feature)" or "season(feature, name)"; ok is
// false when s is not of either form.
func parseTemporal(s string, ls *layerSet) (Feature, bool, error) {
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return Feature{}, false, nil
	}
	head := strings.ToLower(strings.TrimSpace(s[:open]))
	args := s[open+1 : len(s)-1]
	var base Feature
	var name string
	var pct int
	var season string
	switch {
	case head == "season":
		comma := strings.LastIndexByte(args, ',')
		if comma < 0 {
			return Feature{}, true, fmt.Errorf("feature %q: season takes a feature and a season's name, as in season(ndvi, summer)", s)
		}
		season = strings.TrimSpace(args[comma+1:])
		if err := CheckSeasonName(season); err != nil {
			return Feature{}, true, fmt.Errorf("feature %q: %w", s, err)
		}
		b, err := temporalBase(s, strings.TrimSpace(args[:comma]), ls)
		if err != nil {
			return Feature{}, true, err
		}
		base, name = b, fmt.Sprintf("season(%s,%s)", b.Name, season)
	case len(head) >= 2 && head[0] == 'p' && isDigits(head[1:]):
		p, err := strconv.Atoi(head[1:])
		if err != nil || p < 1 || p > 99 {
			return Feature{}, true, fmt.Errorf("feature %q: percentile %s is outside 1–99", s, head[1:])
		}
		b, err := temporalBase(s, strings.TrimSpace(args), ls)
		if err != nil {
			return Feature{}, true, err
		}
		base, name, pct = b, fmt.Sprintf("p%d(%s)", p, b.Name), p
	default:
		return Feature{}, false, nil
	}
	f := Feature{Name: name, Kind: "temporal", Inputs: []string{name}, Op: "band", Base: &base, Percentile: pct, Season: season,
		fn: func(v []float32) float32 { return v[0] }}
	if base.Kind != "band" {
		f.Op = "shift"
		f.fn = func(v []float32) float32 { return v[0] - TemporalShift }
	}
	return f, true, nil
}

// temporalBase parses the per-pixel feature a temporal feature summarises.
func temporalBase(s, arg string, ls *layerSet) (Feature, error) {
	b, err := parse(arg, ls)
	if err != nil {
		return Feature{}, fmt.Errorf("feature %q: %w", s, err)
	}
	if b.Kind == "layer" {
		return Feature{}, fmt.Errorf("feature %q: layer %s has one value per pixel, not one per date: use %s itself", s, b.Name, b.Name)
	}
	if b.Kind == "context" || b.Kind == "temporal" {
		return Feature{}, fmt.Errorf("feature %q: a temporal feature summarises a band, an index or an nd, not %s", s, b.Name)
	}
	return b, nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// CheckSeasonName accepts a season's name: letters, digits, '_' and '-',
// starting with a letter, so that it reads unambiguously inside a feature
// name.
func CheckSeasonName(name string) error {
	if name == "" {
		return fmt.Errorf("a season needs a name")
	}
	for i, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !(letter || i > 0 && (r >= '0' && r <= '9' || r == '_' || r == '-')) {
			return fmt.Errorf("season name %q: use letters, digits, _ and -, starting with a letter", name)
		}
	}
	return nil
}

// Value is the feature's per-pixel expression on its inputs' values (in
// Inputs order): NaN when any input is NaN, and every NaN canonical.
// Context features have none (their values come from a window).
func (f *Feature) Value(in []float32) float32 {
	if f.fn == nil {
		return nan32
	}
	for _, v := range in {
		if v != v {
			return nan32
		}
	}
	v := f.fn(in)
	if v != v {
		return nan32
	}
	return v
}
