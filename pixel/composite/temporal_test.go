package composite

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func day(m time.Month, d int) time.Time { return time.Date(2023, m, d, 10, 30, 0, 0, time.UTC) }

func TestSeasonContains(t *testing.T) {
	t.Parallel()
	summer := Season{"summer", MonthDay{time.June, 1}, MonthDay{time.August, 31}}
	winter := Season{"winter", MonthDay{time.December, 1}, MonthDay{time.February, 28}}
	for _, c := range []struct {
		s    Season
		at   time.Time
		want bool
	}{
		{summer, day(time.June, 1), true},
		{summer, day(time.August, 31), true},
		{summer, day(time.May, 31), false},
		{summer, day(time.September, 1), false},
		{winter, day(time.December, 24), true},
		{winter, day(time.January, 15), true},
		{winter, day(time.February, 28), true},
		{winter, day(time.March, 1), false},
		{winter, day(time.November, 30), false},
		// A time late on a day east of UTC is the day before in UTC.
		{summer, time.Date(2023, 6, 1, 1, 0, 0, 0, time.FixedZone("UTC+2", 7200)), false},
	} {
		if got := c.s.Contains(c.at); got != c.want {
			t.Errorf("%s contains %s = %v, want %v", c.s.Name, c.at, got, c.want)
		}
	}
	if md, err := ParseMonthDay("02-29"); err != nil || md != (MonthDay{time.February, 29}) {
		t.Errorf("02-29: %v %v", md, err)
	}
	for _, bad := range []string{"13-01", "2023-06-01", "06/01", "06-32", ""} {
		if _, err := ParseMonthDay(bad); err == nil {
			t.Errorf("ParseMonthDay(%q) accepted", bad)
		}
	}
}

// nearestRank is the textbook nearest-rank percentile, in float64 and
// with a library sort, against which Summarise's integer rule is checked.
func nearestRank(sorted []float32, p int) float32 {
	if len(sorted) == 0 {
		return nan
	}
	r := int(math.Ceil(float64(p) / 100 * float64(len(sorted))))
	return sorted[max(r, 1)-1]
}

func same(a, b float32) bool { return a == b || a != a && b != b }

// TestSummariseAgainstDefinition draws random series with gaps, ties and
// seasons and checks every percentile and seasonal median against the
// definitions computed another way.
func TestSummariseAgainstDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	tp := &Temporal{Percentiles: []int{1, 10, 25, 50, 75, 90, 99}, Seasons: []Season{
		{"a", MonthDay{time.March, 1}, MonthDay{time.May, 31}},
		{"b", MonthDay{time.November, 1}, MonthDay{time.February, 28}},
		{"c", MonthDay{time.January, 1}, MonthDay{time.December, 31}},
	}}
	var s Scratch
	for trial := range 5000 {
		nd := 1 + r.IntN(80)
		vals := make([]float32, nd)
		masks := make([]uint32, nd)
		for d := range vals {
			vals[d] = float32(r.IntN(20)) / 10
			if r.IntN(4) == 0 {
				vals[d] = nan
			}
			masks[d] = tp.SeasonMask(time.Date(2020+r.IntN(3), time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC))
		}
		got := make([]float32, tp.PerSource())
		tp.Summarise(got, vals, masks, &s)
		var valid []float32
		for _, v := range vals {
			if v == v {
				valid = append(valid, v)
			}
		}
		sort.Slice(valid, func(i, j int) bool { return valid[i] < valid[j] })
		for i, p := range tp.Percentiles {
			if want := nearestRank(valid, p); !same(got[i], want) {
				t.Fatalf("trial %d: p%d of %v = %v, want %v", trial, p, vals, got[i], want)
			}
		}
		for j := range tp.Seasons {
			var in [][]float32
			for d, v := range vals {
				if masks[d]>>j&1 != 0 {
					in = append(in, []float32{v})
				}
			}
			want := []float32{nan}
			if len(in) > 0 {
				if err := Median(want, in); err != nil {
					t.Fatal(err)
				}
			}
			if g := got[len(tp.Percentiles)+j]; !same(g, want[0]) {
				t.Fatalf("trial %d: season %s of %v = %v, want %v", trial, tp.Seasons[j].Name, vals, g, want[0])
			}
		}
	}
}

// TestWindowTemporal composites a window whose pixels have known NDVI
// and B08 series, with a cloudy date, a nodata date and a date whose NDVI
// is undefined, and checks the planes' digital numbers.
func TestWindowTemporal(t *testing.T) {
	t.Parallel()
	bands := []string{"B04", "B08"}
	tp, err := NewTemporal([]string{"ndvi", "B08"}, bands, []int{10, 90}, []Season{
		{"summer", MonthDay{time.June, 1}, MonthDay{time.August, 31}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(tp.Planes(), " "), "p10(ndvi) p90(ndvi) season(ndvi,summer) p10(B08) p90(B08) season(B08,summer)"; got != want {
		t.Fatalf("planes %q, want %q", got, want)
	}
	// Per date: red and NIR DNs (reflectance = DN/10000), SCL, month.
	type obs struct {
		red, nir uint16
		scl      uint8
		m        time.Month
	}
	series := []obs{
		{1000, 3000, 4, time.March},   // ndvi 0.5
		{500, 4500, 4, time.June},     // 0.8
		{600, 5400, 9, time.July},     // cloud: not counted
		{0, 5000, 4, time.July},       // red nodata: the date is invalid
		{800, 4000, 4, time.August},   // 2/3
		{2000, 2000, 4, time.October}, // 0
		{1, 1, 4, time.November},      // 0 (tiny, but defined)
	}
	dates := make([]Date, len(series))
	for d, o := range series {
		dates[d] = Date{DN: [][]uint16{{o.red}, {o.nir}}, NoData: []uint16{0, 0}, Scale: []float64{1e-4, 1e-4},
			Offset: []float64{0, 0}, SCL: []uint8{o.scl}, Time: day(o.m, 15)}
	}
	out := make([][]uint16, len(bands)+len(tp.Planes()))
	for i := range out {
		out[i] = make([]uint16, 1)
	}
	count := make([]uint8, 1)
	if err := WindowTemporal(dates, Spec{Drop: DefaultDropSCL, Temporal: tp, Scale: 1e-4, Offset: -0.1}, out, count); err != nil {
		t.Fatal(err)
	}
	if count[0] != 5 {
		t.Errorf("count %d, want 5", count[0])
	}
	refl := func(dn uint16) float32 { return float32(float32(dn)*float32(1e-4)) + 0 }
	ndvi := func(o obs) float32 { r, n := refl(o.red), refl(o.nir); return (n - r) / (n + r) }
	q := func(v float32) uint16 { return quantiseOne(v, 1e-4, -0.1) }
	// Valid NDVIs sorted: 0 (Oct), 0 (Nov), 0.5, 2/3, 0.8: k = 5, p10 is
	// rank 1, p90 rank 5; summer holds June and August (2 values).
	s0, s1 := ndvi(series[1]), ndvi(series[4])
	summer := (min(s0, s1) + max(s0, s1)) * 0.5
	want := []uint16{
		q(ndvi(series[5]) + 1), q(ndvi(series[1]) + 1), q(summer + 1),
		q(refl(1)), q(refl(4500)), q((refl(4000) + refl(4500)) * 0.5),
	}
	for i, w := range want {
		if out[len(bands)+i][0] != w {
			t.Errorf("%s: DN %d, want %d", tp.Planes()[i], out[len(bands)+i][0], w)
		}
	}
	// The medians are what Window alone gives.
	plain := [][]uint16{{0}, {0}}
	if err := Window(dates, DefaultDropSCL, 1e-4, -0.1, plain, count); err != nil {
		t.Fatal(err)
	}
	if plain[0][0] != out[0][0] || plain[1][0] != out[1][0] {
		t.Errorf("medians %v with temporal planes, %v without", out[:2], plain)
	}
}

func TestNewTemporalErrors(t *testing.T) {
	t.Parallel()
	bands := []string{"B04", "B08", "B11"}
	summer := Season{"summer", MonthDay{time.June, 1}, MonthDay{time.August, 31}}
	for _, c := range []struct {
		of      []string
		pcts    []int
		seasons []Season
		want    string
	}{
		{nil, []int{10}, nil, "no features"},
		{[]string{"ndvi"}, nil, nil, "set percentiles, seasons or both"},
		{[]string{"ndwi"}, []int{10}, nil, "needs band B03"},
		{[]string{"mean(B08,7)"}, []int{10}, nil, "not a band, an index or an nd"},
		{[]string{"ndvi", "ndvi"}, []int{10}, nil, "listed twice"},
		{[]string{"foo"}, []int{10}, nil, "unknown feature"},
		{[]string{"ndvi"}, []int{0}, nil, "outside 1–99"},
		{[]string{"ndvi"}, []int{100}, nil, "outside 1–99"},
		{[]string{"ndvi"}, []int{50, 50}, nil, "50 listed twice"},
		{[]string{"ndvi"}, nil, []Season{summer, summer}, "summer listed twice"},
		{[]string{"ndvi"}, nil, []Season{{"9x", summer.From, summer.To}}, "starting with a letter"},
		{[]string{"ndvi"}, nil, []Season{{"s", MonthDay{0, 1}, summer.To}}, "not a day of the year"},
	} {
		_, err := NewTemporal(c.of, bands, c.pcts, c.seasons)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewTemporal(%v, %v, %v): %v, want an error with %q", c.of, c.pcts, c.seasons, err, c.want)
		}
	}
	if _, err := NewTemporal([]string{"nd(B08,B11)", "red"}, bands, []int{50}, nil); err != nil {
		t.Errorf("nd and an asset key: %v", err)
	}
	if !slices.Equal((*Temporal)(nil).Planes(), nil) {
		t.Error("a nil Temporal has planes")
	}
}
