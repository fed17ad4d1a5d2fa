// Package composite builds cloud-free mosaics: per pixel, the temporal
// median of the valid observations of each band, the number of valid
// observations, and optionally temporal planes, percentiles and seasonal
// medians of bands and indices over the dates (temporal.go).
//
// It is pure Go with no cgo. These CPU functions are the specification that
// the GPU twins in package cuda must match bit for bit, so every rule is
// spelled out:
//
//   - An observation is invalid when its value is NaN. Callers turn nodata
//     and masked pixels into NaN first (see Mask).
//   - Values are ordered by float32 comparison. With k valid values sorted
//     ascending as v[0..k-1], the median is v[k/2] for odd k and
//     float32(v[k/2-1]+v[k/2]) * 0.5 for even k (the sum rounded to float32
//     first, then halved exactly). With k = 0 the result is NaN.
//   - Values that compare equal (−0 and +0) keep their date order (a stable
//     sort), so even their sign is reproducible.
//   - Bands that arrive compressed (Date.Raw) are decoded by package decode,
//     then bands that arrive at a coarser resolution (Date.Coarse) are
//     resampled by package resample's integer bilinear rule, before
//     anything else.
package composite

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/resample"
)

// Median writes into dst[i] the median of the non-NaN values dates[d][i]
// over d. All slices must have len(dst) elements. Work is split over all
// CPUs in contiguous chunks.
func Median(dst []float32, dates [][]float32) error {
	for d, v := range dates {
		if len(v) != len(dst) {
			return fmt.Errorf("composite: date %d has %d pixels, want %d", d, len(v), len(dst))
		}
	}
	parallel(len(dst), func(lo, hi int) {
		buf := make([]float32, len(dates))
		for i := lo; i < hi; i++ {
			k := 0
			for _, v := range dates {
				x := v[i]
				if x != x { // NaN: not observed
					continue
				}
				// Insertion sort: dates are few (tens at most).
				j := k
				for j > 0 && buf[j-1] > x {
					buf[j] = buf[j-1]
					j--
				}
				buf[j] = x
				k++
			}
			dst[i] = medianSorted(buf[:k])
		}
	})
	return nil
}

func medianSorted(v []float32) float32 {
	k := len(v)
	switch {
	case k == 0:
		return float32(math.NaN())
	case k%2 == 1:
		return v[k/2]
	default:
		m := (v[k/2-1] + v[k/2]) * 0.5
		if m != m { // ∞ + −∞: the canonical NaN, as the GPU twin gives
			return float32(math.NaN())
		}
		return m
	}
}

// Count writes into dst[i] the number of dates whose valid[d][i] is true.
func Count(dst []uint8, valid [][]bool) error {
	if len(valid) > 255 {
		return fmt.Errorf("composite: %d dates exceed the 255 a uint8 count holds", len(valid))
	}
	for d, v := range valid {
		if len(v) != len(dst) {
			return fmt.Errorf("composite: date %d has %d pixels, want %d", d, len(v), len(dst))
		}
	}
	parallel(len(dst), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var n uint8
			for _, v := range valid {
				if v[i] {
					n++
				}
			}
			dst[i] = n
		}
	})
	return nil
}

// DefaultDropSCL are the Sentinel-2 scene classes masked by default: nodata
// (0), saturated or defective (1), cloud shadow (3), medium and high
// probability cloud (8, 9) and thin cirrus (10).
var DefaultDropSCL = []uint8{0, 1, 3, 8, 9, 10}

// Mask marks a date's pixels valid where the scene class is not dropped
// and no band is nodata, and sets every band to NaN where invalid. scl has
// one class per pixel; bands hold reflectances with NaN for nodata.
func Mask(valid []bool, scl []uint8, bands [][]float32, drop []uint8) error {
	var dropped [256]bool
	for _, c := range drop {
		dropped[c] = true
	}
	if len(scl) != len(valid) {
		return fmt.Errorf("composite: scl has %d pixels, want %d", len(scl), len(valid))
	}
	for b, v := range bands {
		if len(v) != len(valid) {
			return fmt.Errorf("composite: band %d has %d pixels, want %d", b, len(v), len(valid))
		}
	}
	parallel(len(valid), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ok := !dropped[scl[i]]
			for _, v := range bands {
				if v[i] != v[i] {
					ok = false
				}
			}
			valid[i] = ok
			if !ok {
				for _, v := range bands {
					v[i] = float32(math.NaN())
				}
			}
		}
	})
	return nil
}

// parallel splits [0, n) into contiguous chunks over all CPUs.
func parallel(n int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 1<<14 || workers == 1 {
		f(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		wg.Go(func() { f(lo, min(n, lo+chunk)) })
	}
	wg.Wait()
}

// Reflectance converts digital numbers to reflectance, float32(dn)×scale +
// offset, with NaN where dn equals nodata.
func Reflectance(dn []uint16, nodata uint16, scale, offset float32) []float32 {
	out := make([]float32, len(dn))
	for i, v := range dn {
		if v == nodata {
			out[i] = float32(math.NaN())
			continue
		}
		// The explicit conversion rounds the product, so no platform fuses
		// it into an FMA and the GPU twin can match.
		out[i] = float32(float32(v)*scale) + offset
	}
	return out
}

// Quantise encodes reflectance as UInt16 digital numbers, DN =
// round((r − offset) / scale) clamped to 1…65535, with NaN as 0 (nodata).
func Quantise(dst []uint16, r []float32, scale, offset float64) {
	for i, v := range r {
		if v != v {
			dst[i] = 0
			continue
		}
		dst[i] = uint16(max(1, min(65535, math.Round((float64(v)-offset)/scale))))
	}
}

// Date is one acquisition over a window: each band's digital numbers with
// its nodata value and DN → reflectance scaling, and the scene classes.
type Date struct {
	DN     [][]uint16 // band → pixels
	NoData []uint16   // per band
	Scale  []float64  // per band
	Offset []float64  // per band
	SCL    []uint8
	// Coarse, when set, holds bands still at their source resolution
	// (band → plane, nil for bands already in DN, whose DN is then nil):
	// Resample fills DN from them on the CPU; the GPU twin resamples them
	// on the device.
	Coarse []*resample.Coarse
	// Raw, when set, holds bands not yet decoded (band → the compressed
	// tiles of the band's rectangle, nil for bands already decoded): a
	// coarse band's plane (Coarse[b] then has the plane's geometry and no
	// pixels) or the window itself (DN[b] is then nil). Resample decodes
	// them with package decode on the CPU; the GPU twin decodes them on the
	// device.
	Raw []*decode.Rect
	// Time is when the date was acquired: the seasons of temporal planes
	// go by it.
	Time time.Time
}

// Decode fills every date's DN and coarse planes from its raw bands with
// package decode and clears Raw.
func Decode(dates []Date) error {
	for di := range dates {
		d := &dates[di]
		for b, r := range d.Raw {
			if r == nil {
				continue
			}
			px, err := r.Uint16()
			if err != nil {
				return fmt.Errorf("composite: date %d band %d: %w", di, b, err)
			}
			if d.Coarse != nil && d.Coarse[b] != nil {
				d.Coarse[b].Plane.Pix = px
			} else {
				d.DN[b] = px
			}
		}
		d.Raw = nil
	}
	return nil
}

// Resample decodes every date's raw bands (Decode), fills DN from its
// coarse bands with resample.Bilinear and clears Coarse, leaving dates
// Window can take.
func Resample(dates []Date) error {
	if err := Decode(dates); err != nil {
		return err
	}
	for di := range dates {
		d := &dates[di]
		for b, c := range d.Coarse {
			if c == nil {
				continue
			}
			dn, err := c.Bilinear()
			if err != nil {
				return fmt.Errorf("composite: date %d band %d: %w", di, b, err)
			}
			d.DN[b] = dn
		}
		d.Coarse = nil
	}
	return nil
}

// Window composites a window as ingest does: per date, reflectance with
// NaN at nodata and every band NaN where the scene class is dropped or
// any band is nodata; per band, the median over the valid dates, quantised
// to DNs with qscale/qoffset (0 where no date is valid); the valid dates'
// count per pixel. out has one plane per band.
func Window(dates []Date, drop []uint8, qscale, qoffset float64, out [][]uint16, count []uint8) error {
	return WindowTemporal(dates, Spec{Drop: drop, Scale: qscale, Offset: qoffset}, out, count)
}

// Spec is how a window's dates are composited: the scene classes dropped,
// the temporal planes computed after the bands' medians (nil: none), and
// the quantisation of reflectance to DNs (DN = (reflectance − Offset) /
// Scale, rounded).
type Spec struct {
	Drop          []uint8
	Temporal      *Temporal
	Scale, Offset float64
}

// WindowTemporal is Window that also computes s.Temporal's planes (nil:
// none), quantised like the medians: out holds the bands' planes, then
// s.Temporal.Planes(). Seasons go by each date's Time.
func WindowTemporal(dates []Date, s Spec, out [][]uint16, count []uint8) error {
	drop, tp, qscale, qoffset := s.Drop, s.Temporal, s.Scale, s.Offset
	if len(dates) == 0 {
		return fmt.Errorf("composite: no dates")
	}
	n, nb := len(count), len(out)-len(tp.Planes())
	if nb < 1 {
		return fmt.Errorf("composite: %d output planes for %d temporal planes", len(out), len(tp.Planes()))
	}
	valid := make([][]bool, len(dates))
	stacks := make([][][]float32, nb) // band → date → pixels
	for b := range stacks {
		stacks[b] = make([][]float32, len(dates))
	}
	for di, d := range dates {
		if len(d.DN) != nb || len(d.NoData) != nb || len(d.Scale) != nb || len(d.Offset) != nb {
			return fmt.Errorf("composite: date %d has %d bands, want %d", di, len(d.DN), nb)
		}
		if d.Coarse != nil || d.Raw != nil {
			return fmt.Errorf("composite: date %d has coarse or raw bands: Resample them first", di)
		}
		bands := make([][]float32, nb)
		for b := range nb {
			if len(d.DN[b]) != n {
				return fmt.Errorf("composite: date %d band %d has %d pixels, want %d", di, b, len(d.DN[b]), n)
			}
			bands[b] = Reflectance(d.DN[b], d.NoData[b], float32(d.Scale[b]), float32(d.Offset[b]))
		}
		valid[di] = make([]bool, n)
		if err := Mask(valid[di], d.SCL, bands, drop); err != nil {
			return err
		}
		for b := range nb {
			stacks[b][di] = bands[b]
		}
	}
	med := make([]float32, n)
	for b := range nb {
		if len(out[b]) != n {
			return fmt.Errorf("composite: output band %d has %d pixels, want %d", b, len(out[b]), n)
		}
		if err := Median(med, stacks[b]); err != nil {
			return err
		}
		Quantise(out[b], med, qscale, qoffset)
	}
	if tp != nil {
		for k, o := range out[nb:] {
			if len(o) != n {
				return fmt.Errorf("composite: temporal plane %d has %d pixels, want %d", k, len(o), n)
			}
		}
		masks := make([]uint32, len(dates))
		for di, d := range dates {
			masks[di] = tp.SeasonMask(d.Time)
		}
		tp.temporalPlanes(out[nb:], stacks, masks, qscale, qoffset)
	}
	return Count(count, valid)
}
