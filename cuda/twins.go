package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/lulc/lulc/features"
	"github.com/lulc/lulc/forest"
)

var opCodes = map[string]int32{"band": 0, "nd": 1, "evi": 2, "savi": 3, "bsi": 4}

// Features computes a feature set on the GPU in one fused pass; it
// implements features.Computer and gives the same bits as features.CPU.
type Features struct {
	Dev           *Device
	Set           *features.Set
	progCodes     []int32
	in, out, prog Buffer
}

// NewFeatures compiles the set into the kernel's program.
func NewFeatures(dev *Device, set *features.Set) (*Features, error) {
	f := &Features{Dev: dev, Set: set}
	for i, ft := range set.Features {
		op, ok := opCodes[ft.Op]
		if !ok {
			return nil, fmt.Errorf("cuda: feature %s has no GPU operation %q", ft.Name, ft.Op)
		}
		p := [5]int32{op, 0, 0, 0, 0}
		for k, pos := range set.Inputs(i) {
			p[1+k] = int32(pos)
		}
		f.progCodes = append(f.progCodes, p[:]...)
	}
	return f, nil
}

// Compute implements features.Computer: each band plane is copied to the
// device, the kernel runs, each feature plane is copied back into dst.
// Device buffers are kept between calls and grown as needed.
func (f *Features) Compute(dst, src [][]float32) error {
	if len(src) != len(f.Set.Bands) || len(dst) != len(f.Set.Features) {
		return fmt.Errorf("cuda features: %d band planes and %d feature planes for %d bands and %d features", len(src), len(dst), len(f.Set.Bands), len(f.Set.Features))
	}
	if len(src) > 16 || len(dst) > 64 {
		return fmt.Errorf("cuda features: %d bands and %d features (at most 16 and 64)", len(src), len(dst))
	}
	n := len(src[0])
	for _, p := range append(append([][]float32{}, src...), dst...) {
		if len(p) != n {
			return fmt.Errorf("cuda features: planes of %d and %d pixels", n, len(p))
		}
	}
	if n == 0 {
		return nil
	}
	plane := uint64(n) * 4
	return f.Dev.Do(func() error {
		if err := f.reserve(plane*uint64(len(src)), plane*uint64(len(dst))); err != nil {
			return err
		}
		for b, p := range src {
			if err := check(api.memcpyHtoD(f.in.ptr+uint64(b)*plane, unsafe.Pointer(&p[0]), plane), "cuMemcpyHtoD"); err != nil {
				return err
			}
		}
		if err := f.Dev.launch("features", int64(n), f.in.ptr, int32(len(src)), int64(n), f.prog.ptr, int32(len(dst)), f.out.ptr); err != nil {
			return err
		}
		for i, p := range dst {
			if err := check(api.memcpyDtoH(unsafe.Pointer(&p[0]), f.out.ptr+uint64(i)*plane, plane), "cuMemcpyDtoH"); err != nil {
				return err
			}
		}
		return nil
	})
}

// reserve makes the device buffers at least this large (owner goroutine).
func (f *Features) reserve(in, out uint64) error {
	if f.prog.ptr == 0 {
		b, err := upload(f.progCodes)
		if err != nil {
			return err
		}
		f.prog = b
	}
	grow := func(b *Buffer, size uint64) error {
		if b.bytes >= size {
			return nil
		}
		if b.ptr != 0 {
			b.free()
		}
		nb, err := alloc(size)
		*b = nb
		return err
	}
	if err := grow(&f.in, in); err != nil {
		return err
	}
	return grow(&f.out, out)
}

// Close frees the device buffers.
func (f *Features) Close() {
	f.Dev.Do(func() error {
		for _, b := range []Buffer{f.in, f.out, f.prog} {
			if b.ptr != 0 {
				b.free()
			}
		}
		return nil
	})
}

// Median computes composite.Median and the valid counts on the GPU, with
// the same bits.
func Median(dev *Device, dst []float32, count []uint8, dates [][]float32) error {
	n := len(dst)
	if len(dates) > 64 {
		return fmt.Errorf("cuda median: %d dates (at most 64)", len(dates))
	}
	flat := make([]float32, 0, n*len(dates))
	for d, v := range dates {
		if len(v) != n {
			return fmt.Errorf("cuda median: date %d has %d pixels, want %d", d, len(v), n)
		}
		flat = append(flat, v...)
	}
	return dev.Do(func() error {
		in, err := upload(flat)
		if err != nil {
			return err
		}
		defer in.free()
		o, err := alloc(uint64(n) * 4)
		if err != nil {
			return err
		}
		defer o.free()
		c, err := alloc(uint64(n))
		if err != nil {
			return err
		}
		defer c.free()
		if err := dev.launch("median", int64(n), in.ptr, int32(len(dates)), int64(n), o.ptr, c.ptr); err != nil {
			return err
		}
		if err := download(dst, o); err != nil {
			return err
		}
		if count != nil {
			return download(count, c)
		}
		return nil
	})
}

// Bin codes feature planes with the model's edges on the GPU, as
// forest.Bins.Code does, into a column-major Binned.
func Bin(dev *Device, b *forest.Bins, planes [][]float32) (*forest.Binned, error) {
	if len(planes) != len(b.Edges) {
		return nil, fmt.Errorf("cuda bin: %d planes for %d features", len(planes), len(b.Edges))
	}
	n := len(planes[0])
	flat := make([]float32, 0, n*len(planes))
	for _, p := range planes {
		flat = append(flat, p...)
	}
	var edges []float32
	var offsets, lengths []int32
	for _, e := range b.Edges {
		offsets = append(offsets, int32(len(edges)))
		lengths = append(lengths, int32(len(e)))
		edges = append(edges, e...)
	}
	edges = append(edges, float32(math.NaN())) // never empty
	out := &forest.Binned{N: n, F: len(planes), Codes: make([]uint8, n*len(planes))}
	err := dev.Do(func() error {
		bufs := make([]Buffer, 0, 5)
		defer func() {
			for _, x := range bufs {
				x.free()
			}
		}()
		up := func(b Buffer, err error) (uint64, error) {
			bufs = append(bufs, b)
			return b.ptr, err
		}
		x, err := up(upload(flat))
		if err != nil {
			return err
		}
		e, err := up(upload(edges))
		if err != nil {
			return err
		}
		off, err := up(upload(offsets))
		if err != nil {
			return err
		}
		ln, err := up(upload(lengths))
		if err != nil {
			return err
		}
		c, err := up(alloc(uint64(len(out.Codes))))
		if err != nil {
			return err
		}
		if err := dev.launch("bin", int64(n), x, int32(len(planes)), int64(n), e, off, ln, c); err != nil {
			return err
		}
		return download(out.Codes, Buffer{ptr: c, bytes: uint64(len(out.Codes))})
	})
	return out, err
}
