package synth

import (
	"math"
	"sync"
	"sync/atomic"
)

// Band positions in a spectrum (features.Sentinel2 order).
const (
	iB01 = iota
	iB02
	iB03
	iB04
	iB05
	iB06
	iB07
	iB08
	iB8A
	iB09
	iB11
	iB12
)

// bandNames names the spectrum positions.
var bandNames = [nBands]string{"B01", "B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B09", "B11", "B12"}

var (
	bands10m = []int{iB02, iB03, iB04, iB08}
	bands20m = []int{iB05, iB06, iB07, iB8A, iB11, iB12}
	bands60m = []int{iB01, iB09}
)

// SCL classes of the Sentinel-2 L2A scene classification.
const (
	sclNoData      = 0
	sclDark        = 2
	sclShadow      = 3
	sclVegetation  = 4
	sclBare        = 5
	sclWater       = 6
	sclUnclassed   = 7
	sclCloudMedium = 8
	sclCloudHigh   = 9
	sclCirrus      = 10
	sclSnow        = 11
)

// Radiometry of processing baseline 04.00 and later: reflectance = DN ×
// 0.0001 − 0.1, DN 0 is nodata.
const (
	dnScale  = 0.0001
	dnOffset = -0.1
)

// acquisition holds one date's atmosphere and geometry.
type acquisition struct {
	date      Date
	index     int
	doy       float64
	phenDay   float64 // day of the class curves: doy, shifted half a year south of the equator
	cloud     *field
	cloudThr  float64
	cirrus    *field
	cirrusThr float64
	sunAz     float64 // degrees clockwise from north
	sunEl     float64 // degrees above the horizon
	shadowDU  float64 // offset from a pixel to the cloud that shades it
	shadowDV  float64
	edgeNU    float64 // nodata half-plane: nu·u + nv·v > edgeD
	edgeNV    float64
	edgeD     float64
	haze      spectrum
	seed      uint64
	sclCounts [12]atomic.Int64
	dns       [nBands][]uint16 // per band, nil for bands not written
	scl       []uint8
}

// cloudHeight is the height of cloud tops used to cast shadows (m).
const cloudHeight = 1800

func newAcquisition(s *scene, i int, lat float64) *acquisition {
	d := s.cfg.Dates[i]
	a := &acquisition{date: d, index: i, seed: hash(s.seed+seedDate, int64(i), d.Datetime.Unix())}
	a.doy = float64(d.Datetime.UTC().YearDay())
	a.phenDay = phenDay(a.doy, lat)

	// Sun at the Sentinel-2 overpass (10:30 local solar time): a simple
	// declination model is enough for shadow directions.
	decl := 23.44 * math.Sin(2*math.Pi*(a.doy-81)/365)
	a.sunEl = max(15, 90-math.Abs(lat-decl)-12)
	a.sunAz = 152.0
	if lat < decl {
		a.sunAz = 28.0
	}
	shadowLen := cloudHeight / math.Tan(a.sunEl*math.Pi/180)
	az := a.sunAz * math.Pi / 180
	// Toward the sun is (sin az, −cos az) in (east, south) coordinates.
	a.shadowDU, a.shadowDV = shadowLen*math.Sin(az), -shadowLen*math.Cos(az)

	ext := s.sceneExt
	m := shadowLen + 500
	a.cloud = newField(-m, -m, ext+m, ext+m, 60, func(u, v float64) float64 {
		return fbm(a.seed, u, v, 2500, 5)
	})
	a.cloudThr = sceneQuantile(a.cloud, ext, 1-d.CloudCover/100)
	a.cirrus = newField(-m, -m, ext+m, ext+m, 60, func(u, v float64) float64 {
		// Cirrus comes in long streaks: stretch the noise along one axis.
		return fbm(a.seed+1, u*0.35+v*0.2, v, 2000, 4)
	})
	a.cirrusThr = sceneQuantile(a.cirrus, ext, 1-d.Cirrus/100)

	// The swath edge runs about 12° off north-south, on the east or west.
	side := 1.0
	if hash(a.seed, 2)&1 == 0 {
		side = -1
	}
	phi := 12 * math.Pi / 180 * signed(hash(a.seed, 3))
	a.edgeNU, a.edgeNV = side*math.Cos(phi), math.Sin(phi)
	a.edgeD = a.edgeThreshold(ext, d.NoData/100)

	for b := range a.haze {
		// Haze is strongest in the blue and fades into the SWIR.
		a.haze[b] = float32(0.006 * signed(hash(a.seed, 4, int64(b))) / float64(1+b/3))
	}
	return a
}

// sceneQuantile is the q-quantile of f over lattice points inside the scene.
// q ≥ 1 gives +Inf: nothing exceeds it.
func sceneQuantile(f *field, ext, q float64) float64 {
	if q >= 1 {
		return math.Inf(1)
	}
	var vals []float32
	for j := range f.nv {
		v := f.v0 + float64(j)*f.step
		if v < 0 || v > ext {
			continue
		}
		for i := range f.nu {
			u := f.u0 + float64(i)*f.step
			if u >= 0 && u <= ext {
				vals = append(vals, f.val[j*f.nu+i])
			}
		}
	}
	if len(vals) == 0 {
		return math.Inf(1)
	}
	return quantile(vals, q)
}

// edgeThreshold finds the half-plane offset that leaves fraction frac of the
// scene outside the swath, by bisection over a sample of points.
func (a *acquisition) edgeThreshold(ext, frac float64) float64 {
	if frac <= 0 {
		return math.Inf(1)
	}
	const n = 64
	outside := func(d float64) float64 {
		count := 0
		for j := range n {
			for i := range n {
				u, v := (float64(i)+0.5)*ext/n, (float64(j)+0.5)*ext/n
				if a.edgeNU*u+a.edgeNV*v > d {
					count++
				}
			}
		}
		return float64(count) / (n * n)
	}
	lo, hi := -2*ext, 2*ext
	for range 50 {
		mid := (lo + hi) / 2
		if outside(mid) > frac {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func (a *acquisition) nodata(u, v float64) bool { return a.edgeNU*u+a.edgeNV*v > a.edgeD }

// cloudAlpha is cloud opacity in [0, 1]: 0 outside clouds, rising over a
// soft edge to 1 in the cores.
func (a *acquisition) cloudAlpha(u, v float64) float64 {
	c := a.cloud.at(u, v)
	if c <= a.cloudThr {
		return 0
	}
	return min(1, (c-a.cloudThr)/0.12)
}

func (a *acquisition) shadowAlpha(u, v float64) float64 {
	return a.cloudAlpha(u+a.shadowDU, v+a.shadowDV)
}

func (a *acquisition) cirrusBeta(u, v float64) float64 {
	c := a.cirrus.at(u, v)
	if c <= a.cirrusThr {
		return 0
	}
	return min(1, 0.2+(c-a.cirrusThr)/0.1)
}

// dn converts reflectance to a baseline-04 digital number, keeping 0 for
// nodata.
func dn(r float32) uint16 {
	// Round half up in float32: the reflectances are float32 already, and
	// this sits in the innermost loop.
	v := r*(1/dnScale) + (-dnOffset/dnScale + 0.5)
	return uint16(max(1, min(65535, v)))
}

// stripRows is the height of the row strips the generator works in: a
// multiple of 6 so that every strip holds whole 20 m and 60 m pixels.
const stripRows = 30

// generate fills acq.rasters and acq.scl for each acquisition. progress is
// called with the number of 10 m rows finished.
func (s *scene) generate(acqs []*acquisition, progress func(rows int)) {
	n := s.cfg.Size
	for _, a := range acqs {
		for _, b := range bands10m {
			a.dns[b] = make([]uint16, n*n)
		}
		for _, b := range bands20m {
			a.dns[b] = make([]uint16, n*n/4)
		}
		if s.cfg.Bands60m {
			for _, b := range bands60m {
				a.dns[b] = make([]uint16, n*n/36)
			}
		}
		a.scl = make([]uint8, n*n/4)
	}
	// Scratch buffers are reused across strips: allocating them afresh
	// costs more in page faults and GC than the pixels themselves.
	pool := sync.Pool{New: func() any { return newScratch(n) }}
	strips := (n + stripRows - 1) / stripRows
	parallelRows(strips, func(strip int) {
		sc := pool.Get().(*scratch)
		rows := min(stripRows, n-strip*stripRows)
		s.strip(strip*stripRows, rows, acqs, sc)
		pool.Put(sc)
		if progress != nil {
			progress(rows)
		}
	})
}

// scratch holds one strip's working buffers.
type scratch struct {
	surf  []surface
	gain  []float32
	green []float32
	pure  []spectrum
	refl  []spectrum
	sky   []sky
}

func newScratch(n int) *scratch {
	w, h := n+2, stripRows+2
	return &scratch{
		surf:  make([]surface, w*h),
		gain:  make([]float32, w*h),
		green: make([]float32, w*h),
		pure:  make([]spectrum, w*h),
		refl:  make([]spectrum, stripRows*n),
		sky:   make([]sky, stripRows/2*(n/2)),
	}
}

// strip generates rows r0 … r0+rows−1 of every acquisition; rows is a
// multiple of 6.
func (s *scene) strip(r0, rows int, acqs []*acquisition, sc *scratch) {
	n := s.cfg.Size
	w := n + 2 // one pixel of halo each side, for edge mixing
	h := rows + 2
	surf := sc.surf[:w*h]
	gain := sc.gain[:w*h] // brightness × texture × persistent noise
	for rr := range h {
		r := r0 + rr - 1
		v := (float64(r) + 0.5) * 10
		for cc := range w {
			c := cc - 1
			u := (float64(c) + 0.5) * 10
			sf := s.surfaceAt(u, v)
			surf[rr*w+cc] = sf
			t := s.texture.at(u, v)
			pn := 0.035 * gauss(hash2(s.seed+seedPixel, int64(r), int64(c)))
			gain[rr*w+cc] = sf.bright * float32((1+0.1*t)*(1+pn))
		}
	}

	pure := sc.pure[:w*h]
	green := sc.green[:w*h] // greenness on this date, for SCL
	refl := sc.refl[:rows*n]
	n2 := n / 2
	skies := sc.sky[:rows/2*n2]
	for _, a := range acqs {
		// Neighbouring pixels mostly share a patch: the seasonal spectrum
		// (logistics, cosines, mixing) is computed once per run of equal
		// keys, leaving one multiply per band and pixel.
		prevKey := ^uint64(0)
		var spec spectrum
		var g float32
		for k := range pure {
			sf := &surf[k]
			if sf.key != prevKey {
				prevKey = sf.key
				var g64 float64
				spec, g64 = surfaceSpectrum(sf, a.phenDay)
				g = float32(g64)
			}
			green[k] = g
			for b := range nBands {
				pure[k][b] = spec[b] * gain[k]
			}
		}
		// The sky is smooth at 60 m: it is evaluated once per 20 m pixel,
		// and SCL reads the same values, so bands and mask agree exactly.
		for rr2 := range rows / 2 {
			v := (float64((r0+2*rr2)/2) + 0.5) * 20
			for c2 := range n2 {
				skies[rr2*n2+c2] = a.skyAt((float64(c2)+0.5)*20, v)
			}
		}
		for rr := 1; rr <= rows; rr++ {
			r := r0 + rr - 1
			for cc := 1; cc <= n; cc++ {
				c := cc - 1
				k := rr*w + cc
				px := pure[k]
				// A pixel straddling a boundary sees its neighbours too:
				// half its own surface, an eighth of each 4-neighbour.
				key := surf[k].key
				if surf[k-1].key != key || surf[k+1].key != key || surf[k-w].key != key || surf[k+w].key != key {
					for b := range nBands {
						px[b] = 0.5*px[b] + 0.125*(pure[k-1][b]+pure[k+1][b]+pure[k-w][b]+pure[k+w][b])
					}
				}
				a.atmosphere(&px, &skies[(rr-1)/2*n2+c/2], r, c)
				refl[(rr-1)*n+c] = px
			}
		}
		s.writeStrip(a, stripPlanes{r0: r0, rows: rows, w: w, refl: refl, surf: surf, green: green, skies: skies})
	}
}

// sky is the atmosphere over one 20 m pixel.
type sky struct {
	cloud   float32 // cloud opacity, 0 outside clouds
	shadow  float32 // opacity of the cloud casting a shadow here
	cirrus  float32
	texture float32 // cloud-top brightness variation
}

func (a *acquisition) skyAt(u, v float64) sky {
	sk := sky{
		cloud:  float32(a.cloudAlpha(u, v)),
		shadow: float32(a.shadowAlpha(u, v)),
		cirrus: float32(a.cirrusBeta(u, v)),
	}
	if sk.cloud > 0 {
		sk.texture = float32(0.85 + 0.3*a.cloud.at(u*3.1, v*3.1))
	}
	return sk
}

// atmosphere applies cloud shadow, cirrus, cloud, haze and sensor noise to
// the pixel at row r, column c.
func (a *acquisition) atmosphere(px *spectrum, sk *sky, r, c int) {
	if sk.shadow > 0 && sk.cloud == 0 {
		f := 1 - 0.65*min(1, 1.5*sk.shadow)
		for b := range px {
			px[b] *= f
		}
	}
	if sk.cirrus > 0 {
		for b := range px {
			// Thin ice cloud: a near-flat brightening, weaker in the SWIR.
			px[b] += sk.cirrus * 0.05 * (1 - 0.05*float32(b))
		}
	}
	if sk.cloud > 0 {
		op := 0.25 + 0.75*sk.cloud
		for b := range px {
			px[b] = (1-op)*px[b] + op*cloudSpectrum[b]*sk.texture
		}
	}
	h := hash2(a.seed, int64(r), int64(c))
	for b := 0; b < nBands; b += 2 {
		h = mix(h + uint64(b))
		n0, n1 := gaussPair(h)
		px[b] += a.haze[b] + float32(0.004*n0)
		px[b+1] += a.haze[b+1] + float32(0.004*n1)
	}
}

// stripPlanes is a strip of rows [r0, r0+rows) as generated: its 10 m
// reflectances (refl, n a row), and, with a one-pixel border (w a row),
// its surfaces and greenness; its skies per 20 m pixel.
type stripPlanes struct {
	r0, rows, w int
	refl        []spectrum
	surf        []surface
	green       []float32
	skies       []sky
}

// writeStrip quantises a strip of reflectances into the 10, 20 and 60 m
// rasters and classifies it into SCL.
func (s *scene) writeStrip(a *acquisition, st stripPlanes) {
	r0, rows, refl, surf, green, skies, w := st.r0, st.rows, st.refl, st.surf, st.green, st.skies, st.w
	n := s.cfg.Size
	a.quantise(r0, rows, n, refl, 1, bands10m)
	a.quantise(r0, rows, n, refl, 2, bands20m)
	if s.cfg.Bands60m {
		a.quantise(r0, rows, n, refl, 6, bands60m)
	}
	n2 := n / 2
	var counts [12]int64
	for rr := 0; rr < rows; rr += 2 {
		r2 := (r0 + rr) / 2
		v := (float64(r2) + 0.5) * 20
		for c2 := range n2 {
			nd := a.nodata((float64(c2)+0.5)*20, v)
			k := (rr+1)*w + 2*c2 + 1
			cls := a.classify(surf[k].class, green[k], &skies[rr/2*n2+c2], nd, r2, c2)
			a.scl[r2*n2+c2] = cls
			counts[cls]++
		}
	}
	for k, c := range counts {
		a.sclCounts[k].Add(c)
	}
}

// quantise writes the bands of a strip at f×10 m: each output pixel is the
// mean of its f×f block of 10 m reflectances, nodata decided at its centre.
func (a *acquisition) quantise(r0, rows, n int, refl []spectrum, f int, bands []int) {
	nf := n / f
	inv := 1 / float32(f*f)
	res := float64(10 * f)
	for rr := 0; rr < rows; rr += f {
		ro := (r0 + rr) / f
		v := (float64(ro) + 0.5) * res
		for co := range nf {
			nd := a.nodata((float64(co)+0.5)*res, v)
			for _, b := range bands {
				out := a.dns[b]
				if nd {
					out[ro*nf+co] = 0
					continue
				}
				var sum float32
				for dr := range f {
					row := refl[(rr+dr)*n+f*co:]
					for dc := range f {
						sum += row[dc][b]
					}
				}
				out[ro*nf+co] = dn(sum * inv)
			}
		}
	}
}

// classify gives a 20 m pixel its SCL class as Sen2Cor would, from what the model knows
// is there: nodata, cloud probability, shadow, cirrus, then the surface (its
// class and its greenness on this date).
func (a *acquisition) classify(class uint8, g float32, sk *sky, nd bool, r2, c2 int) uint8 {
	switch {
	case nd:
		return sclNoData
	case sk.cloud >= 0.5:
		return sclCloudHigh
	case sk.cloud > 0:
		return sclCloudMedium
	case sk.shadow > 0.25:
		return sclShadow
	case sk.cirrus > 0:
		return sclCirrus
	}
	// Sen2Cor leaves a few pixels unclassified or flags dark ones.
	switch h := unit(hash2(a.seed+7, int64(r2), int64(c2))); {
	case h < 0.002:
		return sclUnclassed
	case h < 0.003:
		return sclDark
	}
	switch class {
	case 80:
		return sclWater
	case 70:
		return sclSnow
	}
	if classModels[class].vegetated && g > 0.3 {
		return sclVegetation
	}
	return sclBare
}
