package synth

import "math"

// nBands is the number of L2A reflectance bands the model computes, in the
// order of features.Sentinel2: B01 B02 B03 B04 B05 B06 B07 B08 B8A B09 B11 B12.
const nBands = 12

type spectrum [nBands]float32

// classModel is a class's surface reflectance: a dry (or leaf-off, or bare)
// spectrum, a green one, and the seasonal curve that mixes them.
type classModel struct {
	dry, green spectrum
	curve      curve
	// base and season give the cosine curve's greenness
	// g = base + season·cos(2π(t − 196 − phase)/365), peaking in mid July
	// (phenological day t, see phenDay).
	base, season float64
	vegetated    bool // SCL reports it as vegetation (4) when green enough
}

// curve names a class's seasonal greenness model (docs/synth.md, "Phenology").
type curve uint8

const (
	// curveFlat: no season. Water, built-up and permanent snow and ice
	// look the same on every date.
	curveFlat curve = iota
	// curveCosine: a mild yearly cycle around base, shifted per patch by
	// its phase and vigour (grassland, shrubland, wetland, …).
	curveCosine
	// curveForest: each tree patch is a share of deciduous canopy, leafless
	// between leaf fall and budburst, and of evergreen needleleaf canopy.
	curveForest
	// curveCrop: each parcel's crop calendar, a double logistic that is
	// bare soil out of season (winter cereals keep a thin winter cover).
	curveCrop
)

// Typical surface reflectances, from the shapes of published spectral
// libraries (vegetation red edge, soil brightening into the SWIR, water
// absorbing in the NIR, snow dark in the SWIR), rounded.
var (
	greenLeaf = spectrum{0.030, 0.035, 0.075, 0.035, 0.110, 0.300, 0.380, 0.410, 0.420, 0.400, 0.200, 0.090}
	soil      = spectrum{0.080, 0.095, 0.135, 0.175, 0.205, 0.225, 0.245, 0.260, 0.270, 0.270, 0.330, 0.270}
	dryGrass  = spectrum{0.060, 0.075, 0.115, 0.135, 0.175, 0.215, 0.240, 0.255, 0.262, 0.255, 0.300, 0.220}
	// leafOff is a deciduous canopy in winter: branches over understory
	// and litter (NDVI about 0.4).
	leafOff = spectrum{0.045, 0.050, 0.070, 0.080, 0.110, 0.160, 0.180, 0.195, 0.200, 0.195, 0.240, 0.170}
	// straw is a ripe cereal or its stubble after harvest: dry stalks,
	// brighter than dry grass and strong in SWIR 1 (cellulose).
	straw = spectrum{0.070, 0.085, 0.125, 0.160, 0.200, 0.240, 0.265, 0.280, 0.290, 0.285, 0.360, 0.270}
	// needleLeaf is a closed evergreen conifer canopy: darker than
	// broadleaf in the visible, the NIR and the SWIR.
	needleLeaf = spectrum{0.020, 0.022, 0.040, 0.022, 0.060, 0.170, 0.210, 0.225, 0.230, 0.220, 0.110, 0.050}
)

// classModels is indexed by class code; the generator's inner loops look
// models up per pixel, where a map lookup would dominate.
var classModels = [256]classModel{
	10: { // tree cover: broadleaf in leaf (green) or bare (dry: leafOff); needleLeaf for the evergreen share
		dry:   leafOff,
		green: spectrum{0.025, 0.028, 0.055, 0.025, 0.085, 0.240, 0.300, 0.320, 0.330, 0.315, 0.150, 0.065},
		curve: curveForest, base: 0.85, season: 0.1, vegetated: true,
	},
	20: { // shrubland: sparse woody cover over bright soil
		dry:   spectrum{0.060, 0.070, 0.100, 0.120, 0.160, 0.190, 0.210, 0.225, 0.235, 0.230, 0.280, 0.210},
		green: spectrum{0.040, 0.048, 0.080, 0.070, 0.130, 0.220, 0.260, 0.280, 0.290, 0.280, 0.230, 0.140},
		curve: curveCosine, base: 0.5, season: 0.15, vegetated: true,
	},
	30: {dry: dryGrass, green: greenLeaf, curve: curveCosine, base: 0.55, season: 0.25, vegetated: true},
	40: {dry: soil, green: greenLeaf, curve: curveCrop, vegetated: true},
	50: { // built-up: flat, moderately bright, some SWIR
		dry:   spectrum{0.090, 0.100, 0.115, 0.125, 0.145, 0.160, 0.170, 0.180, 0.185, 0.180, 0.210, 0.190},
		green: spectrum{0.090, 0.100, 0.115, 0.125, 0.145, 0.160, 0.170, 0.180, 0.185, 0.180, 0.210, 0.190},
	},
	60: { // bare / sparse vegetation: bright soil and rock
		dry:   spectrum{0.120, 0.150, 0.205, 0.260, 0.290, 0.310, 0.330, 0.345, 0.355, 0.355, 0.410, 0.350},
		green: spectrum{0.100, 0.125, 0.175, 0.210, 0.250, 0.300, 0.330, 0.345, 0.355, 0.350, 0.380, 0.310},
		curve: curveCosine, base: 0.1, season: 0.1,
	},
	70: { // snow and ice: bright in the visible, dark in the SWIR
		dry:   spectrum{0.850, 0.840, 0.820, 0.790, 0.770, 0.750, 0.730, 0.710, 0.700, 0.600, 0.080, 0.060},
		green: spectrum{0.850, 0.840, 0.820, 0.790, 0.770, 0.750, 0.730, 0.710, 0.700, 0.600, 0.080, 0.060},
	},
	80: { // water: absorbs from the red edge on
		dry:   spectrum{0.060, 0.055, 0.048, 0.030, 0.022, 0.014, 0.011, 0.009, 0.008, 0.005, 0.003, 0.002},
		green: spectrum{0.060, 0.055, 0.060, 0.035, 0.040, 0.030, 0.025, 0.022, 0.020, 0.010, 0.004, 0.003},
	},
	90: { // herbaceous wetland: vegetation over wet soil, low SWIR
		dry:   spectrum{0.045, 0.050, 0.070, 0.070, 0.100, 0.130, 0.150, 0.160, 0.165, 0.155, 0.140, 0.080},
		green: spectrum{0.035, 0.040, 0.070, 0.040, 0.100, 0.220, 0.270, 0.290, 0.295, 0.280, 0.140, 0.060},
		curve: curveCosine, base: 0.55, season: 0.25, vegetated: true,
	},
	95: { // mangroves: dense evergreen canopy over water
		dry:   spectrum{0.030, 0.030, 0.050, 0.030, 0.080, 0.200, 0.250, 0.265, 0.270, 0.255, 0.110, 0.045},
		green: spectrum{0.030, 0.030, 0.050, 0.030, 0.080, 0.200, 0.250, 0.265, 0.270, 0.255, 0.110, 0.045},
		curve: curveCosine, base: 0.9, vegetated: true,
	},
	100: { // moss and lichen: dull, between vegetation and rock
		dry:   spectrum{0.060, 0.070, 0.095, 0.110, 0.140, 0.175, 0.195, 0.205, 0.210, 0.205, 0.220, 0.150},
		green: spectrum{0.050, 0.060, 0.090, 0.085, 0.135, 0.200, 0.230, 0.245, 0.250, 0.240, 0.200, 0.120},
		curve: curveCosine, base: 0.3, season: 0.1, vegetated: true,
	},
}

// cloudSpectrum is thick cloud top reflectance: nearly flat, lower in the
// SWIR where ice and water droplets absorb.
var cloudSpectrum = spectrum{0.46, 0.45, 0.45, 0.46, 0.46, 0.47, 0.47, 0.48, 0.48, 0.40, 0.33, 0.22}

// phen is a patch's or a parcel's seasonal curve: the parameters its class's
// curve reads. Days are phenological days (see phenDay).
type phen struct {
	vigour float32 // greenness shift (cosine, forest): a dry meadow, a lush one
	phase  float32 // cosine curves: days of offset of the yearly cycle
	// up and down are the days of the double logistic's rise and fall:
	// green-up and senescence of a crop, budburst and leaf fall of a
	// deciduous canopy.
	up, down float32
	peak     float32 // cropland: greenness at the top of the season
	till     float32 // cropland: day the stubble is ploughed in, back to bare soil
	cover    float32 // cropland: greenness of a winter cereal's winter cover (0: none)
	decid    float32 // tree cover: deciduous share of the canopy
}

// Logistic widths (days) of the double-logistic curves: green-up is
// gradual, harvest quicker; budburst quicker than leaf fall.
const (
	cropRise, cropFall = 9, 6
	leafRise, leafFall = 6, 9
)

// phenDay maps a day of year to the phenological day the curves are
// written in: the day itself in the northern hemisphere, half a year later
// in the southern one (lat < 0), whose seasons are the same curves shifted.
func phenDay(doy, lat float64) float64 {
	if lat < 0 {
		return math.Mod(doy+182.5, 365)
	}
	return doy
}

// sigmoid is the logistic function 1 / (1 + e^−x).
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// doubleLogistic is σ((t − up)/kUp) − σ((t − down)/kDown) on a 365-day
// circle: about 1 between up and down, about 0 outside, rising and falling
// over widths kUp and kDown (days). Day t is taken on the lap nearest the
// season's middle, so a season may run across new year.
func doubleLogistic(t, up, down, kUp, kDown float64) float64 {
	mid := (up + down) / 2
	dt := math.Mod(t-mid, 365)
	if dt < -182.5 {
		dt += 365
	} else if dt >= 182.5 {
		dt -= 365
	}
	t = mid + dt
	return max(0, sigmoid((t-up)/kUp)-sigmoid((t-down)/kDown))
}

// clamp01 limits g to [0, 1].
func clamp01(g float64) float64 { return max(0, min(1, g)) }

// surfaceSpectrum is the reflectance of a surface on phenological day t,
// before brightness, texture and noise, and its greenness (the green
// fraction SCL's vegetation test reads). It is evaluated once per run of
// pixels of one patch or parcel, so the curves cost nothing per pixel.
func surfaceSpectrum(sf *surface, t float64) (spectrum, float64) {
	m := &classModels[sf.class]
	p := &sf.phen
	var g float64
	switch m.curve {
	case curveFlat:
		return m.dry, 0
	case curveCosine:
		g = m.base + m.season*math.Cos(2*math.Pi*(t-196-float64(p.phase))/365)
		g = clamp01(g + float64(p.vigour))
	case curveCrop:
		g = float64(p.peak) * doubleLogistic(t, float64(p.up), float64(p.down), cropRise, cropFall)
		if p.cover > 0 {
			// A winter cereal emerges about 20 days after autumn sowing
			// and holds a thin cover until spring green-up takes over.
			g = max(g, float64(p.cover)*doubleLogistic(t, float64(p.up)-135, float64(p.up), cropRise, cropRise))
		}
		// Under the green canopy: bare soil, turning to straw as the crop
		// ripens (the fall of g) and staying straw (stubble) until the
		// field is ploughed.
		st := float32(0.8 * doubleLogistic(t, float64(p.down), float64(p.till), cropFall, cropFall))
		var s spectrum
		for b := range nBands {
			under := m.dry[b] + st*(straw[b]-m.dry[b])
			s[b] = under + float32(g)*(m.green[b]-under)
		}
		return s, g
	case curveForest:
		// The evergreen share mixes leafOff into needleLeaf, the
		// deciduous share into the broadleaf (green) spectrum.
		v := float64(p.vigour)
		ge := clamp01(m.base + m.season*math.Cos(2*math.Pi*(t-196-float64(p.phase))/365) + v)
		gd := clamp01(doubleLogistic(t, float64(p.up), float64(p.down), leafRise, leafFall) * (1 + v))
		d := float64(p.decid)
		var s spectrum
		for b := range nBands {
			ev := m.dry[b] + float32(ge)*(needleLeaf[b]-m.dry[b])
			de := m.dry[b] + float32(gd)*(m.green[b]-m.dry[b])
			s[b] = float32(1-d)*ev + float32(d)*de
		}
		return s, (1-d)*ge + d*gd
	}
	var s spectrum
	for b := range nBands {
		s[b] = m.dry[b] + float32(g)*(m.green[b]-m.dry[b])
	}
	return s, g
}

// confusion gives, for each class, the class a labeller most plausibly
// mistakes it for: the source of the label noise.
var confusion = map[uint8][2]uint8{
	10:  {20, 95},
	20:  {30, 10},
	30:  {40, 20},
	40:  {30, 60},
	50:  {60, 40},
	60:  {50, 20},
	70:  {60, 100},
	80:  {90, 60},
	90:  {30, 80},
	95:  {10, 90},
	100: {60, 30},
}
