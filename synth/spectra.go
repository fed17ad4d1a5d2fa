package synth

import "math"

// nBands is the number of L2A reflectance bands the model computes, in the
// order of features.Sentinel2: B01 B02 B03 B04 B05 B06 B07 B08 B8A B09 B11 B12.
const nBands = 12

type spectrum [nBands]float32

// classModel is a class's surface reflectance: a dry (or leaf-off, or bare)
// spectrum, a green one, and how green the class is through the year.
type classModel struct {
	dry, green spectrum
	// base and season give greenness g = base + season·cos(2π(doy−196)/365),
	// the northern-hemisphere cycle that peaks in mid July. Cropland instead
	// follows each parcel's own crop calendar (see greenness).
	base, season float64
	vegetated    bool // SCL reports it as vegetation (4) when green enough
}

// Typical surface reflectances, from the shapes of published spectral
// libraries (vegetation red edge, soil brightening into the SWIR, water
// absorbing in the NIR, snow dark in the SWIR), rounded.
var (
	greenLeaf = spectrum{0.030, 0.035, 0.075, 0.035, 0.110, 0.300, 0.380, 0.410, 0.420, 0.400, 0.200, 0.090}
	soil      = spectrum{0.080, 0.095, 0.135, 0.175, 0.205, 0.225, 0.245, 0.260, 0.270, 0.270, 0.330, 0.270}
	dryGrass  = spectrum{0.060, 0.075, 0.115, 0.135, 0.175, 0.215, 0.240, 0.255, 0.262, 0.255, 0.300, 0.220}
)

// classModels is indexed by class code; the generator's inner loops look
// models up per pixel, where a map lookup would dominate.
var classModels = [256]classModel{
	10: { // tree cover: dark in the visible, bright NIR, darker SWIR than crops
		dry:   spectrum{0.030, 0.032, 0.050, 0.040, 0.080, 0.160, 0.190, 0.205, 0.210, 0.200, 0.150, 0.080},
		green: spectrum{0.025, 0.028, 0.055, 0.025, 0.085, 0.240, 0.300, 0.320, 0.330, 0.315, 0.150, 0.065},
		base:  0.75, season: 0.25, vegetated: true,
	},
	20: { // shrubland: sparse woody cover over bright soil
		dry:   spectrum{0.060, 0.070, 0.100, 0.120, 0.160, 0.190, 0.210, 0.225, 0.235, 0.230, 0.280, 0.210},
		green: spectrum{0.040, 0.048, 0.080, 0.070, 0.130, 0.220, 0.260, 0.280, 0.290, 0.280, 0.230, 0.140},
		base:  0.5, season: 0.2, vegetated: true,
	},
	30: {dry: dryGrass, green: greenLeaf, base: 0.55, season: 0.3, vegetated: true},
	40: {dry: soil, green: greenLeaf, vegetated: true},
	50: { // built-up: flat, moderately bright, some SWIR
		dry:   spectrum{0.090, 0.100, 0.115, 0.125, 0.145, 0.160, 0.170, 0.180, 0.185, 0.180, 0.210, 0.190},
		green: spectrum{0.090, 0.100, 0.115, 0.125, 0.145, 0.160, 0.170, 0.180, 0.185, 0.180, 0.210, 0.190},
	},
	60: { // bare / sparse vegetation: bright soil and rock
		dry:   spectrum{0.120, 0.150, 0.205, 0.260, 0.290, 0.310, 0.330, 0.345, 0.355, 0.355, 0.410, 0.350},
		green: spectrum{0.100, 0.125, 0.175, 0.210, 0.250, 0.300, 0.330, 0.345, 0.355, 0.350, 0.380, 0.310},
		base:  0.1, season: 0.1,
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
		base:  0.55, season: 0.25, vegetated: true,
	},
	95: { // mangroves: dense evergreen canopy over water
		dry:   spectrum{0.030, 0.030, 0.050, 0.030, 0.080, 0.200, 0.250, 0.265, 0.270, 0.255, 0.110, 0.045},
		green: spectrum{0.030, 0.030, 0.050, 0.030, 0.080, 0.200, 0.250, 0.265, 0.270, 0.255, 0.110, 0.045},
		base:  0.9, vegetated: true,
	},
	100: { // moss and lichen: dull, between vegetation and rock
		dry:   spectrum{0.060, 0.070, 0.095, 0.110, 0.140, 0.175, 0.195, 0.205, 0.210, 0.205, 0.220, 0.150},
		green: spectrum{0.050, 0.060, 0.090, 0.085, 0.135, 0.200, 0.230, 0.245, 0.250, 0.240, 0.200, 0.120},
		base:  0.3, season: 0.1, vegetated: true,
	},
}

// cloudSpectrum is thick cloud top reflectance: nearly flat, lower in the
// SWIR where ice and water droplets absorb.
var cloudSpectrum = spectrum{0.46, 0.45, 0.45, 0.46, 0.46, 0.47, 0.47, 0.48, 0.48, 0.40, 0.33, 0.22}

// greenness is the green fraction of a surface on day-of-year doy. Cropland
// parcels peak at their own day (phase) with their own amplitude and are bare
// soil out of season, so the same parcel looks different on each date.
// Other vegetated patches shift their greenness by ampl − 1 (vigour).
func greenness(class uint8, doy, phase, ampl float64) float64 {
	m := classModels[class]
	if class == 40 {
		d := math.Abs(doy - phase)
		d = min(d, 365-d)
		return ampl * math.Exp(-(d/50)*(d/50))
	}
	g := m.base + m.season*math.Cos(2*math.Pi*(doy-196-phase)/365)
	if m.base > 0 || m.season > 0 {
		g += ampl - 1 // the patch's vigour
	}
	return max(0, min(1, g))
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
