package composite

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lulc/lulc/pixel/features"
)

// Temporal describes the planes a composite adds after its bands' medians:
// per source, a per-pixel feature of the composite's bands (a band, an
// index or an nd), its percentiles over the valid dates and its median
// over each season's valid dates. The rules, which the GPU twin follows:
//
//   - A date counts for a pixel when it is valid there (Window's mask) and
//     the source's value is not NaN (an index whose denominator is zero is
//     NaN). The k values counted are sorted ascending by float32
//     comparison, equal values in date order (a stable sort).
//   - The p-th percentile is the value of nearest rank ⌈p·k/100⌉, that is
//     v[(p·k + 99)/100 − 1] in integer arithmetic; NaN when k = 0.
//   - A season's median is Median's rule over the counted dates whose
//     acquisition day lies in the season, taken from the same sorted
//     values (the dates of a season keep their sorted order).
//   - A plane of a band holds its value as reflectance, quantised like the
//     medians; a plane of an index or nd holds float32(value +
//     features.TemporalShift), quantised the same way. NaN gives DN 0.
//
// Planes come in source order, each source's percentiles first (in the
// order given), then its seasons.
type Temporal struct {
	Sources     []features.Feature
	Inputs      [][]int // per source, its inputs' positions among the composite's bands
	Percentiles []int
	Seasons     []Season
}

// MaxSeasons is how many seasons a composite takes: a date's seasons are
// a 32-bit mask.
const MaxSeasons = 32

// Season is a named part of the year, From to To inclusive, as month and
// day; a From later in the year than To wraps over new year (12-01 to
// 02-28 is the northern winter). Years don't matter: a series of several
// years pools each season's dates.
type Season struct {
	Name     string
	From, To MonthDay
}

// MonthDay is a day of the year as month and day, year-independent.
type MonthDay struct {
	Month time.Month
	Day   int
}

// ParseMonthDay parses "MM-DD" (02-29 allowed: it matches leap days only).
func ParseMonthDay(s string) (MonthDay, error) {
	t, err := time.Parse("01-02", strings.TrimSpace(s))
	if err != nil {
		if strings.TrimSpace(s) == "02-29" {
			return MonthDay{time.February, 29}, nil
		}
		return MonthDay{}, fmt.Errorf("%q is not a day of the year as MM-DD", s)
	}
	return MonthDay{t.Month(), t.Day()}, nil
}

// String is the day as MM-DD.
func (m MonthDay) String() string { return fmt.Sprintf("%02d-%02d", int(m.Month), m.Day) }

func (m MonthDay) key() int { return int(m.Month)*100 + m.Day }

// Contains says whether t's calendar day (in UTC) lies in the season.
func (s Season) Contains(t time.Time) bool {
	t = t.UTC()
	d, from, to := int(t.Month())*100+t.Day(), s.From.key(), s.To.key()
	if from <= to {
		return from <= d && d <= to
	}
	return d >= from || d <= to
}

// NewTemporal checks a temporal configuration against the composite's
// bands: sources (feature names such as ndvi, B08, nd(B08,B11)),
// percentiles (1–99) and seasons, and names what is wrong.
func NewTemporal(of, bands []string, percentiles []int, seasons []Season) (*Temporal, error) {
	if len(of) == 0 {
		return nil, fmt.Errorf("temporal.of: no features to summarise")
	}
	if len(percentiles) == 0 && len(seasons) == 0 {
		return nil, fmt.Errorf("temporal: set percentiles, seasons or both")
	}
	t := &Temporal{Percentiles: slices.Clone(percentiles), Seasons: slices.Clone(seasons)}
	seen := map[string]bool{}
	for _, name := range of {
		f, err := features.ParseFeature(name)
		if err != nil {
			return nil, fmt.Errorf("temporal.of: %w", err)
		}
		if f.Kind == "context" || f.Kind == "temporal" {
			return nil, fmt.Errorf("temporal.of: %s is not a band, an index or an nd", f.Name)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("temporal.of: %s listed twice", f.Name)
		}
		seen[f.Name] = true
		var pos []int
		for _, in := range f.Inputs {
			i := slices.Index(bands, in)
			if i < 0 {
				return nil, fmt.Errorf("temporal.of: %s needs band %s, which the stack's bands lack (%s)", f.Name, in, strings.Join(bands, ", "))
			}
			pos = append(pos, i)
		}
		t.Sources, t.Inputs = append(t.Sources, f), append(t.Inputs, pos)
	}
	for i, p := range percentiles {
		if p < 1 || p > 99 {
			return nil, fmt.Errorf("temporal.percentiles: %d is outside 1–99", p)
		}
		if slices.Contains(percentiles[:i], p) {
			return nil, fmt.Errorf("temporal.percentiles: %d listed twice", p)
		}
	}
	if len(seasons) > MaxSeasons {
		return nil, fmt.Errorf("temporal.seasons: %d seasons (at most %d)", len(seasons), MaxSeasons)
	}
	names := map[string]bool{}
	for _, s := range seasons {
		if err := features.CheckSeasonName(s.Name); err != nil {
			return nil, fmt.Errorf("temporal.seasons: %w", err)
		}
		if names[s.Name] {
			return nil, fmt.Errorf("temporal.seasons: %s listed twice", s.Name)
		}
		names[s.Name] = true
		for _, md := range []MonthDay{s.From, s.To} {
			if md.Month < time.January || md.Month > time.December || md.Day < 1 || md.Day > 31 {
				return nil, fmt.Errorf("temporal.seasons: %s: %s is not a day of the year", s.Name, md)
			}
		}
	}
	return t, nil
}

// Planes names the temporal planes in order; each is also the name of
// the feature that reads it.
func (t *Temporal) Planes() []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, f := range t.Sources {
		for _, p := range t.Percentiles {
			out = append(out, fmt.Sprintf("p%d(%s)", p, f.Name))
		}
		for _, s := range t.Seasons {
			out = append(out, fmt.Sprintf("season(%s,%s)", f.Name, s.Name))
		}
	}
	return out
}

// PerSource is the number of planes each source gives.
func (t *Temporal) PerSource() int { return len(t.Percentiles) + len(t.Seasons) }

// SeasonMask has bit j set when t lies in season j.
func (t *Temporal) SeasonMask(at time.Time) uint32 {
	var m uint32
	for j, s := range t.Seasons {
		if s.Contains(at) {
			m |= 1 << j
		}
	}
	return m
}

// Shifted says whether source s's planes hold value + TemporalShift (an
// index or nd) rather than reflectance (a band).
func (t *Temporal) Shifted(s int) bool { return t.Sources[s].Kind != "band" }

// Scratch holds a pixel's sorted values while Summarise works.
type Scratch struct {
	v, sub []float32
	d      []int
}

// Summarise writes into dst (PerSource values) one source's statistics at
// one pixel: vals holds its value on each date (NaN where the date does
// not count), masks each date's seasons (SeasonMask). The values are not
// shifted: that is the stack's encoding, not the statistic.
func (t *Temporal) Summarise(dst, vals []float32, masks []uint32, s *Scratch) {
	if cap(s.v) < len(vals) {
		s.v, s.d, s.sub = make([]float32, len(vals)), make([]int, len(vals)), make([]float32, len(vals))
	}
	v, d := s.v[:len(vals)], s.d[:len(vals)]
	k := 0
	for di, x := range vals {
		if x != x {
			continue
		}
		// Insertion sort, stable: dates are tens, a year's at most ~150.
		j := k
		for j > 0 && v[j-1] > x {
			v[j], d[j] = v[j-1], d[j-1]
			j--
		}
		v[j], d[j] = x, di
		k++
	}
	for i, p := range t.Percentiles {
		if k == 0 {
			dst[i] = nan32
			continue
		}
		dst[i] = v[(p*k+99)/100-1]
	}
	for j := range t.Seasons {
		sub := s.sub[:0]
		for i := range k {
			if masks[d[i]]>>j&1 != 0 {
				sub = append(sub, v[i])
			}
		}
		dst[len(t.Percentiles)+j] = medianSorted(sub)
	}
}

var nan32 = math.Float32frombits(0x7fc00000)

// quantiseOne is Quantise for one value.
func quantiseOne(v float32, scale, offset float64) uint16 {
	if v != v {
		return 0
	}
	return uint16(max(1, min(65535, math.Round((float64(v)-offset)/scale))))
}

// temporalPlanes computes a window's temporal planes into out (one per
// plane, in Planes order) from the dates' masked reflectances
// (band → date → pixels) and season masks.
func (t *Temporal) temporalPlanes(out [][]uint16, refl [][][]float32, masks []uint32, qscale, qoffset float64) {
	nd, per := len(masks), t.PerSource()
	parallel(len(out[0]), func(lo, hi int) {
		var s Scratch
		vals := make([]float32, nd)
		in := make([]float32, 4)
		stats := make([]float32, per)
		for i := lo; i < hi; i++ {
			for si := range t.Sources {
				src, pos := &t.Sources[si], t.Inputs[si]
				for d := range nd {
					for k, b := range pos {
						in[k] = refl[b][d][i]
					}
					vals[d] = src.Value(in[:len(pos)])
				}
				t.Summarise(stats, vals, masks, &s)
				shift := t.Shifted(si)
				for j, x := range stats {
					if shift && x == x {
						x += features.TemporalShift
					}
					out[si*per+j][i] = quantiseOne(x, qscale, qoffset)
				}
			}
		}
	})
}
