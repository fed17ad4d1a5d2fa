package synth

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// The scene model works in ground coordinates relative to the tile's
// upper-left corner: u metres east, v metres south. Everything it returns is
// a pure function of (seed, u, v) and, for the atmosphere, the date, so any
// part of the world can be evaluated in any order: the 10 m pixels, the 20 m
// SCL and the EPSG:4326 label grid all see the same landscape.

// Seed offsets keep the independent random streams apart.
const (
	seedElev uint64 = iota + 1
	seedMoist
	seedUrban
	seedWarpU
	seedWarpV
	seedTexture
	seedCells
	seedPixel
	seedBlob
	seedLabel
	seedDate
	seedPoints
	seedDEM
	seedRadar
)

// cell is one landscape patch: a jittered Voronoi seed with its class and
// the traits shared by its pixels.
type cell struct {
	su, sv float64 // seed position
	class  uint8
	bright float32 // brightness factor around 1
	phen   phen    // seasonal curve (cropland parcels draw their own)
	// cropland only: parcel grid orientation and size in metres
	theta, pw, ph float32
}

// surface is what a pixel's ground looks like, before the atmosphere.
type surface struct {
	class  uint8
	key    uint64 // patch or parcel identity: neighbours with other keys mix
	bright float32
	phen   phen
}

type scene struct {
	cfg       Config
	seed      uint64
	size      float64 // cell size (m)
	i0, j0    int     // cell index of cells[0]
	ni, nj    int
	cells     []cell
	warpU     *field
	warpV     *field
	texture   *field
	blob      *field
	blobThr   float64
	codes     []uint8
	weights   []float64
	confusion map[uint8][2]uint8 // label errors, limited to configured classes
	sceneExt  float64            // scene side in metres
}

// newScene builds the landscape over the scene and over extra, another
// (u0, v0, u1, v1) box that must also be evaluated (the label grid's
// footprint).
func newScene(cfg Config, extra [4]float64) *scene {
	s := &scene{cfg: cfg, seed: cfg.Seed, size: cfg.PatchSize, sceneExt: float64(cfg.Size) * 10}
	for _, code := range landcoverCodes(cfg) {
		s.codes = append(s.codes, code)
		s.weights = append(s.weights, cfg.Classes[int(code)])
	}
	s.confusion = map[uint8][2]uint8{}
	for _, code := range s.codes {
		alt := confusion[code]
		for k := range alt {
			if cfg.Classes[int(alt[k])] == 0 {
				alt[k] = alt[1-k]
			}
		}
		for k := range alt {
			if cfg.Classes[int(alt[k])] == 0 {
				alt[k] = code // no plausible confusion among the configured classes
			}
		}
		s.confusion[code] = alt
	}
	margin := 3 * s.size
	u0 := min(0, extra[0]) - margin
	v0 := min(0, extra[1]) - margin
	u1 := max(s.sceneExt, extra[2]) + margin
	v1 := max(s.sceneExt, extra[3]) + margin

	s.i0, s.j0 = int(math.Floor(u0/s.size)), int(math.Floor(v0/s.size))
	s.ni = int(math.Ceil(u1/s.size)) - s.i0 + 1
	s.nj = int(math.Ceil(v1/s.size)) - s.j0 + 1
	s.cells = make([]cell, s.ni*s.nj)
	parallelRows(s.nj, func(j int) {
		for i := range s.ni {
			s.cells[j*s.ni+i] = s.makeCell(s.i0+i, s.j0+j)
		}
	})

	// Domain warping turns the Voronoi polygons into irregular patches.
	warpScale := 0.8 * s.size
	step := min(40, s.size/8)
	s.warpU = newField(u0, v0, u1, v1, step, func(u, v float64) float64 {
		return fbm(s.seed+seedWarpU, u, v, warpScale, 3)
	})
	s.warpV = newField(u0, v0, u1, v1, step, func(u, v float64) float64 {
		return fbm(s.seed+seedWarpV, u, v, warpScale, 3)
	})
	s.texture = newField(-20, -20, s.sceneExt+20, s.sceneExt+20, 20, func(u, v float64) float64 {
		return fbm(s.seed+seedTexture, u, v, 120, 3)
	})
	// Label errors come in small blobs, as in real products where a
	// classifier gets a field or a hedge wrong.
	s.blob = newField(u0, v0, u1, v1, 20, func(u, v float64) float64 {
		return fbm(s.seed+seedBlob, u, v, 60, 2)
	})
	s.blobThr = quantile(s.blob.val, 1-2*cfg.LabelNoise/3)
	return s
}

// landcoverCodes returns the configured class codes in ascending order.
func landcoverCodes(cfg Config) []uint8 {
	var codes []uint8
	for code := range cfg.Classes {
		codes = append(codes, uint8(code))
	}
	slices.Sort(codes)
	return codes
}

// makeCell derives a patch from its grid index alone.
func (s *scene) makeCell(i, j int) cell {
	h := func(k int64) uint64 { return hash(s.seed+seedCells, int64(i), int64(j), k) }
	c := cell{
		su: (float64(i) + 0.1 + 0.8*unit(h(0))) * s.size,
		sv: (float64(j) + 0.1 + 0.8*unit(h(1))) * s.size,
	}
	// Landscape drivers vary over several patches, so that classes cluster:
	// water and wetland in lows, snow, bare rock and moss on highs,
	// built-up around town centres, forest where it is moist.
	e := fbm(s.seed+seedElev, c.su, c.sv, 9*s.size, 3)
	m := fbm(s.seed+seedMoist, c.su, c.sv, 5*s.size, 3)
	urb := fbm(s.seed+seedUrban, c.su, c.sv, 4*s.size, 2)
	score := func(code uint8) float64 {
		switch code {
		case 10:
			return 1.2*m + 0.3*e
		case 20:
			return -0.8*m + 0.4*e
		case 30:
			return 0.3*e - 0.2*m
		case 40:
			return -0.8*math.Abs(e) - 0.3*urb
		case 50:
			return 2*urb - 0.6*math.Abs(e) - 0.5
		case 60:
			return 1.5*e - 1.2*m
		case 70:
			return 5*e - 1.5
		case 80:
			return -4*e + 0.5*m - 0.4
		case 90:
			return -2*e + 1.5*m
		case 95:
			return -2.5*e + m
		case 100:
			return 3*e - 0.5
		}
		return 0
	}
	total := 0.0
	w := make([]float64, len(s.codes))
	for k, code := range s.codes {
		w[k] = s.weights[k] * math.Exp(1.6*score(code))
		total += w[k]
	}
	r := unit(h(2)) * total
	c.class = s.codes[len(s.codes)-1]
	for k := range w {
		if r < w[k] {
			c.class = s.codes[k]
			break
		}
		r -= w[k]
	}
	c.bright = float32(1 + 0.12*gauss(h(3)))
	// Patches of one class differ in vigour (a dry meadow, a lush one):
	// this is what makes neighbouring vegetation classes overlap.
	c.phen.vigour = float32(0.25 * gauss(h(8)))
	c.phen.phase = float32(20 * signed(h(4)))
	if c.class == 10 {
		// Tree patches are broadleaf deciduous, evergreen needleleaf or
		// mixed stands. Budburst comes late April, give or take ten days,
		// and leaf fall in mid October.
		switch r := unit(h(9)); {
		case r < 0.45:
			c.phen.decid = float32(0.8 + 0.2*unit(h(10)))
		case r < 0.75:
			c.phen.decid = float32(0.2 * unit(h(10)))
		default:
			c.phen.decid = float32(0.3 + 0.4*unit(h(10)))
		}
		c.phen.up = float32(118 + 10*signed(h(11)))
		c.phen.down = float32(290 + 10*signed(h(12)))
	}
	if c.class == 40 {
		c.theta = float32(math.Pi * unit(h(5)))
		c.pw = float32(max(60, s.size*(0.2+0.3*unit(h(6)))))
		c.ph = float32(max(60, s.size*(0.2+0.3*unit(h(7)))))
	}
	return c
}

// cellAt returns the index into s.cells of the patch covering (u, v).
func (s *scene) cellAt(u, v float64) int {
	// Warp amplitude under half a cell keeps the 3×3 search exact.
	wu := u + 0.4*s.size*s.warpU.at(u, v)
	wv := v + 0.4*s.size*s.warpV.at(u, v)
	ci := int(math.Floor(wu/s.size)) - s.i0
	cj := int(math.Floor(wv/s.size)) - s.j0
	best, bestD := -1, math.Inf(1)
	for dj := -1; dj <= 1; dj++ {
		j := cj + dj
		if j < 0 || j >= s.nj {
			continue
		}
		for di := -1; di <= 1; di++ {
			i := ci + di
			if i < 0 || i >= s.ni {
				continue
			}
			k := j*s.ni + i
			du, dv := s.cells[k].su-wu, s.cells[k].sv-wv
			if d := du*du + dv*dv; d < bestD {
				best, bestD = k, d
			}
		}
	}
	return best
}

// classAt is the true land-cover class at (u, v).
func (s *scene) classAt(u, v float64) uint8 { return s.cells[s.cellAt(u, v)].class }

// surfaceAt describes the ground at (u, v). Cropland patches are cut into
// straight-edged parcels, each with its own crop calendar.
func (s *scene) surfaceAt(u, v float64) surface {
	k := s.cellAt(u, v)
	c := &s.cells[k]
	sf := surface{class: c.class, key: uint64(k), bright: c.bright, phen: c.phen}
	if c.class == 40 {
		sin, cos := math.Sincos(float64(c.theta))
		pu := math.Floor((u*cos + v*sin) / float64(c.pw))
		pv := math.Floor((-u*sin + v*cos) / float64(c.ph))
		h := hash(s.seed+seedCells, int64(k), int64(pu), int64(pv))
		sf.key = h
		// Crop calendars cluster: winter cereals green up in early
		// spring and are harvested in July, summer crops (maize,
		// sunflower) green up in June and are harvested in September,
		// a few others (vegetables, second crops) grow at any time.
		// Days are the middle of the rise and of the fall.
		p := &sf.phen
		switch r := unit(h); {
		case r < 0.45:
			p.up = float32(88 + 8*gauss(mix(h+3)))
			p.down = p.up + float32(95+8*gauss(mix(h+4)))
			p.cover = 0.3
		case r < 0.85:
			p.up = float32(170 + 10*gauss(mix(h+3)))
			p.down = p.up + float32(90+8*gauss(mix(h+4)))
		default:
			p.up = float32(365 * unit(mix(h+3)))
			p.down = p.up + float32(60+60*unit(mix(h+4)))
		}
		p.peak = float32(0.6 + 0.4*unit(mix(h+1)))
		// Stubble stays a month or three before ploughing.
		p.till = p.down + float32(30+60*unit(mix(h+5)))
		sf.bright = c.bright * float32(1+0.06*gauss(mix(h+2)))
	}
	return sf
}

// quantile returns the q-quantile of a sample of vals (every 7th value
// suffices for a smooth field and keeps the sort cheap).
func quantile(vals []float32, q float64) float64 {
	sample := make([]float32, 0, len(vals)/7+1)
	for i := 0; i < len(vals); i += 7 {
		sample = append(sample, vals[i])
	}
	slices.Sort(sample)
	k := int(q * float64(len(sample)))
	k = max(0, min(k, len(sample)-1))
	return float64(sample[k])
}

// parallelRows runs f(0..n-1) on all CPUs, handing out rows dynamically.
func parallelRows(n int, f func(row int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r := next.Add(1) - 1
				if r >= int64(n) {
					return
				}
				f(int(r))
			}
		})
	}
	wg.Wait()
}
