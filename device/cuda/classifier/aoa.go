package classifier

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/pixel/features"
)

// AOA computes the dissimilarity index of package aoa on the GPU (the
// aoa_near and aoa_finish kernels): every pixel compared with every
// training point, in
// float64 with each operation rounded on its own, the same bits as
// aoa.Index and aoa.Reference.DI.
type AOA struct {
	Dev                 *cuda.Device
	ref                 *aoa.Reference
	points, mean, scale driver.Buffer
	// maxChunk, when set, is the pixels per chunk instead of
	// predictChunk's (tests).
	maxChunk int
}

// NewAOA uploads a Reference's points, means and scales once.
func NewAOA(dev *cuda.Device, ref *aoa.Reference) (*AOA, error) {
	nf := ref.Features()
	if nf < 1 || nf > 64 {
		return nil, fmt.Errorf("cuda aoa: %d features (1 to 64)", nf)
	}
	a := &AOA{Dev: dev, ref: ref}
	err := dev.Do(func() error {
		var err error
		if a.points, err = driver.Upload(ref.Points); err != nil {
			return err
		}
		if a.mean, err = driver.Upload(ref.Mean); err != nil {
			return err
		}
		a.scale, err = driver.Upload(ref.Scale)
		return err
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// DI computes the DI of the pixels of feature planes (one per feature, n
// pixels each) into di (n values).
func (a *AOA) DI(feats [][]float32, di []float32) error {
	nf, n := a.ref.Features(), len(di)
	if len(feats) != nf {
		return fmt.Errorf("cuda aoa: %d feature planes for %d features", len(feats), nf)
	}
	for _, p := range feats {
		if len(p) != n {
			return fmt.Errorf("cuda aoa: planes of %d and %d pixels", len(p), n)
		}
	}
	if n == 0 {
		return nil
	}
	return a.Dev.Do(func() error {
		m := a.Dev.Pool()
		var st driver.Staging
		in := st.Buf(m.Get("aoa.in", uint64(n*nf)*4))
		out := st.Buf(m.Get("aoa.out", uint64(n)*4))
		if st.Err != nil {
			return st.Err
		}
		for f, plane := range feats {
			if err := driver.PutAt(in.Ptr+uint64(f*n*4), plane); err != nil {
				return err
			}
		}
		if err := a.run(in.Ptr, int64(n), 0, int64(n), out.Ptr); err != nil {
			return err
		}
		return driver.Download(di, out)
	})
}

// DIFromDN computes the DI of some pixels of a window from the
// digital-number planes of its block (rect: the window with its halo, as
// features.Halo gives it; the window itself without context features).
// Nodata DNs become NaN reflectance, so NaN DIs. Reflectance and features
// are computed on the device by fe, as Predictor.PredictDN (in chunks of
// pixels) and PredictDNContext (the whole block) compute them. pixels
// are indices into the window (its inner rectangle), ascending; di
// receives their DIs.
func (a *AOA) DIFromDN(fe *Features, b features.DN, pixels []int32, di []float32) error {
	dn, rect, nodata, scale, offset := b.Planes, b.Rect, b.NoData, b.Scale, b.Offset
	nb, nf := len(dn), a.ref.Features()
	if nb != len(fe.Set.Bands) || len(fe.Set.Features) != nf {
		return fmt.Errorf("cuda aoa: %d band planes for %d bands, %d features for %d", nb, len(fe.Set.Bands), len(fe.Set.Features), nf)
	}
	w, h, iw, ih := rect.Width, rect.Height, rect.InnerW, rect.InnerH
	if rect.X < 0 || rect.Y < 0 || rect.X+iw > w || rect.Y+ih > h {
		return fmt.Errorf("cuda aoa: inner block %+v outside its halo", rect)
	}
	context := fe.Set.Radius() > 0
	if !context && (iw != w || ih != h) {
		return errors.New("cuda aoa: a halo around a window without context features")
	}
	for _, b := range dn {
		if len(b) != w*h {
			return fmt.Errorf("cuda aoa: band planes of %d pixels for a block of %d", len(b), w*h)
		}
	}
	n := iw * ih
	if err := checkPixels(pixels, n, len(di)); err != nil {
		return err
	}
	if len(pixels) == 0 {
		return nil
	}
	dn = usedPlanes(fe, dn)
	nb = len(dn)
	if context {
		b.Planes = dn // the planes the set uses
		return a.fromBlock(fe, b, pixels, di)
	}
	chunk := min(n, predictChunk(a.maxChunk))
	return a.Dev.Do(func() error {
		prog, err := fe.program()
		if err != nil {
			return err
		}
		m := a.Dev.Pool()
		var st driver.Staging
		ddn := st.Buf(m.Get("aoa.dn", uint64(chunk*nb)*2))
		bands := st.Buf(m.Get("aoa.bands", uint64(chunk*nb)*4))
		feats := st.Buf(m.Get("aoa.feats", uint64(chunk*nf)*4))
		idx := st.Buf(m.Get("aoa.pixels", uint64(len(pixels))*4))
		out := st.Buf(m.Get("aoa.out", uint64(len(pixels))*4))
		if st.Err != nil {
			return st.Err
		}
		local := make([]int32, len(pixels))
		for k, lo := 0, 0; lo < n; lo += chunk {
			hi := min(n, lo+chunk)
			k0 := k
			for k < len(pixels) && int(pixels[k]) < hi {
				local[k] = pixels[k] - int32(lo)
				k++
			}
			if k == k0 {
				continue // no wanted pixel in this chunk
			}
			c := hi - lo
			for b, plane := range dn {
				if err := driver.PutAt(ddn.Ptr+uint64(b*c*2), plane[lo:hi]); err != nil {
					return err
				}
			}
			if err := driver.PutAt(idx.Ptr+uint64(k0*4), local[k0:k]); err != nil {
				return err
			}
			if err := a.Dev.Launch("reflectance", int64(c*nb), ddn.Ptr, int64(c*nb), int32(nodata), scale, offset, bands.Ptr); err != nil {
				return err
			}
			if err := a.Dev.Launch(fe.kernel(), int64(c), bands.Ptr, int32(nb), int64(c), prog, int32(nf), feats.Ptr); err != nil {
				return err
			}
			if err := a.run(feats.Ptr, int64(c), idx.Ptr+uint64(k0*4), int64(k-k0), out.Ptr+uint64(k0*4)); err != nil {
				return err
			}
		}
		return driver.Download(di, out)
	})
}

// fromBlock is DIFromDN for a set with context features: the window's
// features from its whole block (Features.contextPass, the pass
// PredictDNContext makes), then aoa_near and aoa_finish at the pixels.
func (a *AOA) fromBlock(fe *Features, b features.DN, pixels []int32, di []float32) error {
	dn, rect := b.Planes, b.Rect
	nb, nf := len(dn), a.ref.Features()
	ph, n := rect.Width*rect.Height, rect.InnerW*rect.InnerH
	return a.Dev.Do(func() error {
		prog, err := fe.program()
		if err != nil {
			return err
		}
		m := a.Dev.Pool()
		var st driver.Staging
		ddn := st.Buf(m.Get("aoa.dn", uint64(ph*nb)*2))
		feats := st.Buf(m.Get("aoa.feats", uint64(n*nf)*4))
		idx := st.Buf(m.Get("aoa.pixels", uint64(len(pixels))*4))
		out := st.Buf(m.Get("aoa.out", uint64(len(pixels))*4))
		if st.Err != nil {
			return st.Err
		}
		for b, plane := range dn {
			if err := driver.PutAt(ddn.Ptr+uint64(b*ph*2), plane); err != nil {
				return err
			}
		}
		if err := driver.PutAt(idx.Ptr, pixels); err != nil {
			return err
		}
		// The pass and the measure queue on the null stream; run waits for
		// the device.
		if err := fe.contextPass(0, ddn.Ptr, b, prog, feats.Ptr, true); err != nil {
			return err
		}
		if err := a.run(feats.Ptr, int64(n), idx.Ptr, int64(len(pixels)), out.Ptr); err != nil {
			return err
		}
		return driver.Download(di, out)
	})
}

// run measures n pixels of feature planes of stride pixels at in (owner
// goroutine), on the null stream; pixels 0 means the first n of each
// plane.
func (a *AOA) run(in uint64, stride int64, pixels uint64, n int64, out uint64) error {
	best, err := a.Dev.Pool().Get("aoa.best", uint64(n)*8)
	if err != nil {
		return err
	}
	if err := a.begin(0, best.Ptr, n); err != nil {
		return err
	}
	if err := a.queue(0, in, stride, pixels, n, best.Ptr, out); err != nil {
		return err
	}
	return driver.Synchronize() // and report what the kernels met
}

// begin readies n nearest distances at best, all-ones (none measured
// yet); the memset is queued on stream s, where the measure will follow
// it (owner goroutine).
func (a *AOA) begin(s uintptr, best uint64, n int64) error {
	return driver.Memset32On(best, ^uint32(0), uint64(n)*2, s)
}

// queue queues on stream s the measure of n pixels into best (begin's)
// and their DIs into out. aoa_near splits the training points into as
// many shares as keep about four blocks on every multiprocessor (a
// window has some thousands of pixels to measure, a few dozen blocks'
// worth), each share's nearest joining the pixel's by atomicMin;
// aoa_finish turns the nearest into the DI.
func (a *AOA) queue(s uintptr, in uint64, stride int64, pixels uint64, n int64, best, out uint64) error {
	r := a.ref
	blocks := min((n+aoaBlock-1)/aoaBlock, int64(a.Dev.SMs*32))
	shares := max(1, min((int64(4*a.Dev.SMs)+blocks-1)/blocks, int64(r.N+aoaMinShare-1)/aoaMinShare))
	if a.Dev.Options().AOAUnsplit {
		shares = 1
	}
	if err := a.Dev.LaunchGrid(s, "aoa_near", [3]uint32{uint32(blocks), uint32(shares), 1}, aoaBlock, 0,
		in, int32(r.Features()), stride, pixels, n, a.points.Ptr, int32(r.N), a.mean.Ptr, a.scale.Ptr, best); err != nil {
		return err
	}
	return a.Dev.LaunchAsync(s, "aoa_finish", n, best, n, int64(math.Float64bits(r.MeanDistance)), out)
}

// checkPixels verifies pixels index a window of n pixels in ascending
// order, one DI each.
func checkPixels(pixels []int32, n, dis int) error {
	if dis != len(pixels) {
		return fmt.Errorf("cuda aoa: %d pixels and %d DIs", len(pixels), dis)
	}
	for k, p := range pixels {
		if p < 0 || int(p) >= n || (k > 0 && p <= pixels[k-1]) {
			return fmt.Errorf("cuda aoa: pixel %d (%d of a window of %d) out of order or range", k, p, n)
		}
	}
	return nil
}

const (
	aoaBlock    = 256 // AOA_BLOCK
	aoaMinShare = 256 // the fewest training points worth a share of their own
)

// Close frees the device copies.
func (a *AOA) Close() {
	a.Dev.Do(func() error {
		for _, b := range []*driver.Buffer{&a.points, &a.mean, &a.scale} {
			if b.Ptr != 0 {
				b.Free()
				*b = driver.Buffer{}
			}
		}
		return nil
	})
}

// AOAPairs is aoa.CPUPairs on the GPU (the aoa_pairs kernel: one point a
// thread, every other point measured in float64 with each operation
// rounded on its own): the same sum, row by row in row order, and the
// same minima, bit for bit. p is n × nf transformed points, fold one per
// point.
func AOAPairs(ctx context.Context, dev *cuda.Device, p []float64, nf int, fold []uint64) (float64, []float64, error) {
	n := len(fold)
	if nf < 1 || len(p) != n*nf {
		return 0, nil, fmt.Errorf("cuda aoa pairs: %d values for %d points of %d features", len(p), n, nf)
	}
	if n > math.MaxInt32 {
		return 0, nil, fmt.Errorf("cuda aoa pairs: %d points", n)
	}
	rows, cv := make([]float64, n), make([]float64, n)
	err := dev.Do(func() error {
		var bufs []driver.Buffer
		defer func() {
			for i := range bufs {
				bufs[i].Free()
			}
		}()
		keep := func(b driver.Buffer, err error) (driver.Buffer, error) {
			if err == nil {
				bufs = append(bufs, b)
			}
			return b, err
		}
		dp, err := keep(driver.Upload(p))
		if err != nil {
			return err
		}
		df, err := keep(driver.Upload(fold))
		if err != nil {
			return err
		}
		// The outputs' initial values are overwritten by every thread.
		dr, err := keep(driver.Alloc(uint64(8 * n)))
		if err != nil {
			return err
		}
		dc, err := keep(driver.Alloc(uint64(8 * n)))
		if err != nil {
			return err
		}
		if err := dev.Launch("aoa_pairs", int64(n), dp.Ptr, int32(nf), int32(n), df.Ptr, dr.Ptr, dc.Ptr); err != nil {
			return err
		}
		if err := driver.Download(rows, dr); err != nil {
			return err
		}
		return driver.Download(cv, dc)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("cuda aoa pairs: %w", err)
	}
	return aoa.SumRows(rows), cv, ctx.Err()
}
