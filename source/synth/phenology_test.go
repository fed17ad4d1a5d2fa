package synth

import (
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
)

// ndviOf is the NDVI of a surface spectrum.
func ndviOf(s spectrum) float64 {
	return float64(s[iB08]-s[iB04]) / float64(s[iB08]+s[iB04])
}

// yearNDVI is a surface's NDVI on every day of the year.
func yearNDVI(sf *surface) []float64 {
	out := make([]float64, 365)
	for d := range out {
		s, _ := surfaceSpectrum(sf, float64(d+1))
		out[d] = ndviOf(s)
	}
	return out
}

// sceneSurfaces samples the surfaces of a tiny scene every 50 m, one per
// patch or parcel.
func sceneSurfaces(t *testing.T) []surface {
	cfg := tinyConfig(t)
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)
	seen := map[uint64]bool{}
	var out []surface
	for v := 25.0; v < sc.sceneExt; v += 50 {
		for u := 25.0; u < sc.sceneExt; u += 50 {
			sf := sc.surfaceAt(u, v)
			if !seen[sf.key] {
				seen[sf.key] = true
				out = append(out, sf)
			}
		}
	}
	return out
}

// TestPhenologyCurves checks the per-class curves (docs/synth.md,
// "Phenology") on the patches and parcels of the tiny scene.
func TestPhenologyCurves(t *testing.T) {
	count := map[string]int{}
	var cropRange []float64
	for _, sf := range sceneSurfaces(t) {
		year := yearNDVI(&sf)
		lo, hi := slices.Min(year), slices.Max(year)
		jan, jul := year[14], year[195]
		switch c := sf.class; {
		case c == 50 || c == 70 || c == 80:
			// Flat classes: the same spectrum every day.
			s0, g0 := surfaceSpectrum(&sf, 1)
			for d := 2.0; d <= 365; d++ {
				if s, g := surfaceSpectrum(&sf, d); s != s0 || g != g0 {
					t.Fatalf("class %d changes on day %v", c, d)
				}
			}
			count["flat"]++
		case c == 40:
			// A crop greens up and is harvested: bare (or stubble) out of
			// season, green at its peak.
			if hi-lo < 0.3 || lo > 0.3 {
				t.Errorf("cropland parcel %+v: NDVI %.2f–%.2f over the year", sf.phen, lo, hi)
			}
			cropRange = append(cropRange, hi-lo)
			mid := (sf.phen.up + sf.phen.down) / 2
			if s, _ := surfaceSpectrum(&sf, float64(mid)); ndviOf(s) < 0.5 {
				t.Errorf("cropland parcel %+v: NDVI %.2f mid-season", sf.phen, ndviOf(s))
			}
			count["crop"]++
		case c == 30:
			// Grassland's cycle is milder than a crop's.
			if hi-lo > 0.3 {
				t.Errorf("grassland patch %+v: NDVI %.2f–%.2f over the year", sf.phen, lo, hi)
			}
			count["grass"]++
		case c == 10 && sf.phen.decid >= 0.8:
			// Deciduous stands lose their leaves in winter.
			if jul-jan < 0.2 {
				t.Errorf("deciduous stand %+v: NDVI %.2f in January, %.2f in July", sf.phen, jan, jul)
			}
			count["deciduous"]++
		case c == 10 && sf.phen.decid <= 0.2:
			// Evergreen stands stay green.
			if math.Abs(jul-jan) > 0.15 || jan < 0.5 {
				t.Errorf("evergreen stand %+v: NDVI %.2f in January, %.2f in July", sf.phen, jan, jul)
			}
			count["evergreen"]++
		}
	}
	if m := median(cropRange); m < 0.45 {
		t.Errorf("cropland parcels: median yearly NDVI range %.2f", m)
	}
	for _, k := range []string{"flat", "crop", "grass", "deciduous", "evergreen"} {
		if count[k] < 3 {
			t.Errorf("only %d %s surfaces in the tiny scene: %v", count[k], k, count)
		}
	}
}

// TestDoubleLogisticWraps checks a season across new year (a winter
// cereal's winter cover, a southern-hemisphere crop).
func TestDoubleLogisticWraps(t *testing.T) {
	for _, c := range []struct{ t, want float64 }{{330, 1}, {10, 1}, {15, 1}, {180, 0}, {250, 0}} {
		if got := doubleLogistic(c.t, 300, 400, 5, 5); math.Abs(got-c.want) > 0.02 {
			t.Errorf("season 300–400 on day %v: %.3f, want %v", c.t, got, c.want)
		}
	}
	if got := doubleLogistic(300, 300, 400, 5, 5); math.Abs(got-0.5) > 0.01 {
		t.Errorf("on the rise's middle: %.3f, want 0.5", got)
	}
}

// TestSouthernHemisphere checks that a scene south of the equator runs its
// curves half a year later: its January is the north's July.
func TestSouthernHemisphere(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.EPSG = 32734 // UTM 34S: about 36° S at this northing
	cfg.Origin = [2]float64{499980, 6000000}
	cfg.Dates = cfg.Dates[:1]
	cfg.Dates[0].Datetime = time.Date(2024, 1, 15, 10, 0, 0, 0, time.UTC)
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if geo.centerLat > -30 {
		t.Fatalf("scene centre at latitude %.2f", geo.centerLat)
	}
	sc := newScene(cfg, geo.labelUV)
	a := newAcquisition(sc, 0, geo.centerLat)
	if a.doy != 15 || a.phenDay != 197.5 {
		t.Errorf("15 January south: day of year %v, phenological day %v, want 15 and 197.5", a.doy, a.phenDay)
	}
	if d := phenDay(15, 45); d != 15 {
		t.Errorf("15 January north: phenological day %v", d)
	}
}

// TestPhenologyTrajectories generates a 12-date growing season and checks
// what the phenology exists for: class-specific NDVI trajectories, flat
// water and built-up, and cropland that a temporal feature (the spread of a
// pixel's NDVI over the dates) tells from grassland better than its median
// NDVI does. It also checks that the scene does not depend on the number
// of threads.
func TestPhenologyTrajectories(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Size = 480
	raw, err := configs.Read("synth-full-12dates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c12, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dates = c12.Dates
	geo, err := newGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)
	gen := func() []*acquisition {
		acqs := make([]*acquisition, len(cfg.Dates))
		for i := range cfg.Dates {
			acqs[i] = newAcquisition(sc, i, geo.centerLat)
		}
		sc.generate(acqs, nil)
		return acqs
	}
	acqs := gen()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	again := gen()
	for i := range acqs {
		for _, b := range bands10m {
			if !slices.Equal(acqs[i].dns[b], again[i].dns[b]) {
				t.Fatalf("date %d, %s: one thread gives other DNs", i, bandNames[b])
			}
		}
		if !slices.Equal(acqs[i].scl, again[i].scl) {
			t.Fatalf("date %d: one thread gives another SCL", i)
		}
	}

	n := cfg.Size
	type px struct {
		ndvi      []float64 // clear dates only
		red, nir  []float64 // per date, NaN when not clear
		class     uint8
		deciduous bool
		interior  bool // the pixel and the pixels 20 m around it share a surface
	}
	var pixels []px
	for r := 0; r < n; r += 2 {
		for c := 0; c < n; c += 2 {
			u, v := (float64(c)+0.5)*10, (float64(r)+0.5)*10
			sf := sc.surfaceAt(u, v)
			p := px{class: sf.class, deciduous: sf.class == 10 && sf.phen.decid >= 0.8, interior: true}
			for _, o := range [][2]float64{{-20, 0}, {20, 0}, {0, -20}, {0, 20}} {
				if sc.surfaceAt(u+o[0], v+o[1]).key != sf.key {
					p.interior = false
				}
			}
			for _, a := range acqs {
				red, nir := math.NaN(), math.NaN()
				// Clear: SCL's vegetation, bare or water, and no faint
				// shadow (SCL flags only the darker ones).
				u2, v2 := (float64(c/2)+0.5)*20, (float64(r/2)+0.5)*20
				if s := a.scl[(r/2)*(n/2)+c/2]; s >= sclVegetation && s <= sclWater && a.skyAt(u2, v2).shadow == 0 {
					red = float64(a.dns[iB04][r*n+c])*dnScale + dnOffset
					nir = float64(a.dns[iB08][r*n+c])*dnScale + dnOffset
					p.ndvi = append(p.ndvi, (nir-red)/(nir+red))
				}
				p.red, p.nir = append(p.red, red), append(p.nir, nir)
			}
			if len(p.ndvi) >= 6 {
				pixels = append(pixels, p)
			}
		}
	}

	// Water and built-up stay flat: away from their edges (where mixed
	// pixels see their neighbours' seasons), a pixel's reflectance departs
	// from its own mean over the dates by haze and noise alone. (Means
	// over the class would move with which patches clouds hide.)
	for _, class := range []uint8{50, 80} {
		for _, band := range []string{"red", "nir"} {
			anomaly := make([]float64, len(acqs))
			count := make([]int, len(acqs))
			for _, p := range pixels {
				if p.class != class || !p.interior {
					continue
				}
				x := p.red
				if band == "nir" {
					x = p.nir
				}
				mean, k := 0.0, 0
				for _, v := range x {
					if !math.IsNaN(v) {
						mean += v
						k++
					}
				}
				mean /= float64(k)
				for d, v := range x {
					if !math.IsNaN(v) {
						anomaly[d] += v - mean
						count[d]++
					}
				}
			}
			for d := range anomaly {
				if a := anomaly[d] / float64(count[d]); count[d] < 100 || math.Abs(a) > 0.005 {
					t.Errorf("class %d, date %d: %s reflectance %+.4f from its mean over %d pixels", class, d, band, a, count[d])
				}
			}
		}
	}

	// Class NDVI trajectories: the median over pixels of each date's NDVI.
	traj := func(keep func(p px) bool) []float64 {
		var out []float64
		for d := range acqs {
			var vals []float64
			for _, p := range pixels {
				if keep(p) && !math.IsNaN(p.red[d]) {
					vals = append(vals, (p.nir[d]-p.red[d])/(p.nir[d]+p.red[d]))
				}
			}
			out = append(out, median(vals))
		}
		return out
	}
	dec := traj(func(p px) bool { return p.deciduous })
	// Dates 0 and 6 are 8 April and 17 July: leaf-off, then full leaf.
	if dec[6]-dec[0] < 0.2 {
		t.Errorf("deciduous NDVI %.2f on 8 April, %.2f on 17 July", dec[0], dec[6])
	}
	built := traj(func(p px) bool { return p.class == 50 })
	if lo, hi := slices.Min(built), slices.Max(built); hi-lo > 0.05 {
		t.Errorf("built-up NDVI %.2f–%.2f across dates", lo, hi)
	}

	// Per pixel: median NDVI, and its spread (90th − 10th percentile)
	// over the clear dates.
	stats := func(class uint8) (med, spread []float64) {
		for _, p := range pixels {
			if p.class == class {
				v := slices.Clone(p.ndvi)
				slices.Sort(v)
				med = append(med, median(v))
				spread = append(spread, v[len(v)*9/10]-v[len(v)/10])
			}
		}
		return med, spread
	}
	cropMed, cropSpread := stats(40)
	grassMed, grassSpread := stats(30)
	if m := median(cropSpread); m < 0.3 {
		t.Errorf("cropland: median NDVI spread %.3f over the season", m)
	}
	if c, g := median(cropSpread), median(grassSpread); g > c-0.2 {
		t.Errorf("median NDVI spread: grassland %.3f, cropland %.3f", g, c)
	}
	byMedian, bySpread := separability(cropMed, grassMed), separability(cropSpread, grassSpread)
	t.Logf("cropland vs grassland, balanced accuracy of one threshold: median NDVI %.3f, NDVI spread %.3f", byMedian, bySpread)
	if bySpread < 0.9 || bySpread < byMedian+0.06 {
		t.Errorf("cropland vs grassland: a threshold on median NDVI separates %.3f, on NDVI spread %.3f", byMedian, bySpread)
	}
}

// median is the median of vals (NaN when empty).
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return math.NaN()
	}
	v := slices.Clone(vals)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// separability is the best balanced accuracy of a single threshold that
// tells sample a from sample b.
func separability(a, b []float64) float64 {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	best := 0.5
	for k := 1; k < 200; k++ {
		thr := all[k*len(all)/200]
		below := func(s []float64) float64 {
			c := 0
			for _, x := range s {
				if x < thr {
					c++
				}
			}
			return float64(c) / float64(len(s))
		}
		acc := 0.5 * (below(a) + 1 - below(b))
		best = max(best, acc, 1-acc)
	}
	return best
}
