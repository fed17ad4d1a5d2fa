package synth

import (
	"math"

	"github.com/lulc/lulc/internal/rng"
)

// Randomness in the generator is counter-based: every value is a hash of the
// seed and of what it belongs to (a cell, a pixel, a date), never a draw from
// a shared stream. Results therefore do not depend on how work is split
// across goroutines.

func mix(z uint64) uint64 { return rng.Mix(z) }

// hash combines a seed with integer keys (rng.Hash on their bits).
func hash(seed uint64, keys ...int64) uint64 {
	h := rng.Hash(seed)
	for _, k := range keys {
		h = rng.Mix(h ^ (uint64(k) + 0x9e3779b97f4a7c15))
	}
	return h
}

// hash2 is hash(seed, a, b) without the variadic slice, for inner loops.
func hash2(seed uint64, a, b int64) uint64 { return rng.Hash2(seed, uint64(a), uint64(b)) }

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return rng.Unit(h) }

// signed maps a hash to [-1, 1).
func signed(h uint64) float64 { return 2*unit(h) - 1 }

// gauss maps a hash to an approximately standard normal value (sum of four
// uniforms, variance-corrected): cheap and bounded, which suits pixel noise.
func gauss(h uint64) float64 {
	s := float64(h&0xffff) + float64(h>>16&0xffff) + float64(h>>32&0xffff) + float64(h>>48)
	return (s/65536 - 2) * math.Sqrt(3)
}

// gaussPair maps a hash to two approximately standard normal values, each
// the variance-corrected sum of two 16-bit uniforms (a triangular
// distribution): half the hashing of two gauss calls, for per-band noise.
func gaussPair(h uint64) (float64, float64) {
	const k = 2.449489742783178 / 65536 // sqrt(6) / 2^16
	a := float64(h&0xffff) + float64(h>>16&0xffff) - 65535
	b := float64(h>>32&0xffff) + float64(h>>48) - 65535
	return a * k, b * k
}

// valueNoise is smooth lattice noise in [-1, 1] with unit feature size.
func valueNoise(seed uint64, x, y float64) float64 {
	fx, fy := math.Floor(x), math.Floor(y)
	ix, iy := int64(fx), int64(fy)
	tx, ty := x-fx, y-fy
	sx := tx * tx * (3 - 2*tx)
	sy := ty * ty * (3 - 2*ty)
	v00 := signed(hash2(seed, ix, iy))
	v10 := signed(hash2(seed, ix+1, iy))
	v01 := signed(hash2(seed, ix, iy+1))
	v11 := signed(hash2(seed, ix+1, iy+1))
	a := v00 + sx*(v10-v00)
	b := v01 + sx*(v11-v01)
	return a + sy*(b-a)
}

// fbm sums octaves of value noise; scale is the feature size of the first
// octave in the units of x and y. The result lies roughly in [-1, 1].
func fbm(seed uint64, x, y, scale float64, octaves int) float64 {
	sum, amp, norm := 0.0, 1.0, 0.0
	f := 1 / scale
	for o := range octaves {
		sum += amp * valueNoise(seed+uint64(o)*0x632be59bd9b4e019, x*f, y*f)
		norm += amp
		amp *= 0.5
		f *= 2.03 // not exactly 2, so octave lattices do not line up
	}
	return sum / norm
}

// field is a smooth scalar field sampled on a regular lattice and read back
// with bilinear interpolation: far cheaper than evaluating fbm per pixel.
type field struct {
	u0, v0, step float64
	nu, nv       int
	val          []float32
}

// newField samples f over [u0, u1] × [v0, v1] every step metres, in parallel
// over lattice rows.
func newField(u0, v0, u1, v1, step float64, f func(u, v float64) float64) *field {
	fl := &field{u0: u0, v0: v0, step: step}
	fl.nu = int(math.Ceil((u1-u0)/step)) + 2
	fl.nv = int(math.Ceil((v1-v0)/step)) + 2
	fl.val = make([]float32, fl.nu*fl.nv)
	parallelRows(fl.nv, func(j int) {
		v := v0 + float64(j)*step
		row := fl.val[j*fl.nu : (j+1)*fl.nu]
		for i := range row {
			row[i] = float32(f(u0+float64(i)*step, v))
		}
	})
	return fl
}

// at interpolates the field at (u, v), clamping outside the lattice.
func (f *field) at(u, v float64) float64 {
	x := (u - f.u0) / f.step
	y := (v - f.v0) / f.step
	x = max(0, min(x, float64(f.nu-1)-1e-9))
	y = max(0, min(y, float64(f.nv-1)-1e-9))
	i, j := int(x), int(y)
	tx, ty := x-float64(i), y-float64(j)
	k := j*f.nu + i
	a := float64(f.val[k]) + tx*float64(f.val[k+1]-f.val[k])
	b := float64(f.val[k+f.nu]) + tx*float64(f.val[k+f.nu+1]-f.val[k+f.nu])
	return a + ty*(b-a)
}
