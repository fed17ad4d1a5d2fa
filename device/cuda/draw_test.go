package cuda

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// drawTile is a random tile for the draw: patchy labels with codes
// outside the scheme, DNs with nodata holes.
type drawTile struct {
	w, h   int
	labels []uint8
	dn     [][]uint16
}

func randomDrawTile(r *rand.Rand, w, h, nb int) drawTile {
	t := drawTile{w: w, h: h, labels: make([]uint8, w*h), dn: make([][]uint16, nb)}
	for b := range t.dn {
		t.dn[b] = make([]uint16, w*h)
	}
	codes := []uint8{0, 10, 20, 30, 50, 80, 5}
	for i := range t.labels {
		t.labels[i] = codes[(i/w/7+i%w/5+r.IntN(2))%len(codes)]
		for b := range t.dn {
			v := uint16(r.IntN(10000))
			if r.IntN(50) == 0 {
				v = 0
			}
			t.dn[b][i] = v
		}
	}
	return t
}

// drawRule is a rule over the WorldCover-like codes of randomDrawTile,
// with nodata DNs 0 and 7.
func drawRule(seed, input uint64, block, buffer int, valFrac float64, bits uint) *sampling.DeviceRule {
	r := &sampling.DeviceRule{SplitBase: rng.Extend(rng.Extend(rng.Start(seed), 0x7a1), input),
		KeyBase: rng.Extend(rng.Extend(rng.Start(seed), 0x5a4), input), Input: input, Block: block, Buffer: buffer,
		ValidationFraction: valFrac, Missing: new([2048]uint32), Bits: bits}
	for c := range r.Reservoir {
		r.Reservoir[c] = DrawNone
	}
	for i, c := range []uint8{10, 20, 30, 50, 80} {
		r.Reservoir[c] = uint16(2 * i)
	}
	r.Missing[0] |= 1 | 1<<7
	return r
}

// referenceDraw is the passes' specification, pixel by pixel: the
// histogram, outside and buffered counts of the first pass, and the
// candidates under the bounds of the second, sorted by id. A training
// pixel is buffered when a pixel of the tile within r.Buffer of it
// (Chebyshev) lies in a validation block.
func referenceDraw(t drawTile, r *sampling.DeviceRule, nres int, bound []uint64) (hist []uint32, off [256]int64, buffered int64, d sampling.Collected) {
	validation := func(row, col int) bool {
		return rng.Unit(rng.Extend(rng.Extend(r.SplitBase, uint64(row/r.Block)), uint64(col/r.Block))) < r.ValidationFraction
	}
	hist = make([]uint32, nres<<r.Bits)
	for i, code := range t.labels {
		k := r.Reservoir[code]
		if k == DrawNone {
			off[code]++
			continue
		}
		missing := false
		for _, p := range t.dn {
			missing = missing || r.Missing[p[i]>>5]>>(p[i]&31)&1 != 0
		}
		if missing {
			continue
		}
		row, col := uint64(i/t.w), uint64(i%t.w)
		if validation(int(row), int(col)) {
			k |= 1
		} else {
			near := false
			for y := max(0, int(row)-r.Buffer); y <= min(t.h-1, int(row)+r.Buffer); y++ {
				for x := max(0, int(col)-r.Buffer); x <= min(t.w-1, int(col)+r.Buffer); x++ {
					near = near || validation(y, x)
				}
			}
			if near {
				buffered++
				continue
			}
		}
		key := rng.Extend(rng.Extend(r.KeyBase, row), col)
		hist[int(k)<<r.Bits|int(key>>(64-r.Bits))]++
		if bound != nil && key <= bound[k] {
			d.Key, d.ID, d.Reservoir = append(d.Key, key), append(d.ID, r.Input<<40|row<<20|col), append(d.Reservoir, k)
			for _, p := range t.dn {
				d.DN = append(d.DN, p[i])
			}
		}
	}
	return hist, off, buffered, d
}

// sortedByID returns the candidates in id order.
func sortedByID(d sampling.Collected, nb int) sampling.Collected {
	idx := make([]int, len(d.ID))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(d.ID[a], d.ID[b]) })
	var s sampling.Collected
	for _, i := range idx {
		s.Key, s.ID, s.Reservoir = append(s.Key, d.Key[i]), append(s.ID, d.ID[i]), append(s.Reservoir, d.Reservoir[i])
		s.DN = append(s.DN, d.DN[i*nb:(i+1)*nb]...)
	}
	return s
}

// TestDrawPassesBitExact checks draw_count and draw_collect on a mirrored
// tile against the pixel-by-pixel specification: the same histogram,
// outside counts and candidates (in any order), for several block sizes,
// validation fractions and bounds.
func TestDrawPassesBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(21, 22))
	const nb, nres = 3, 10
	for trial, c := range []struct {
		w, h, block, buffer int
		frac                float64
		bits                uint
	}{{257, 131, 1, 0, 0.3, 12}, {1000, 777, 64, 0, 0.25, 12}, {64, 2000, 7, 0, 0, 8}, {513, 300, 512, 0, 1, 10},
		{257, 131, 5, 4, 0.3, 12}, {1000, 777, 64, 8, 0.25, 12}, {301, 203, 10, 1, 0.5, 10}} {
		tile := randomDrawTile(r, c.w, c.h, nb)
		m, err := NewMirror(d, c.w, c.h, nb)
		if err != nil {
			t.Fatal(err)
		}
		// Two windows, as a composite's sink writes them.
		top := c.h / 3
		for _, win := range [][2]int{{0, top}, {top, c.h}} {
			planes := make([][]uint16, nb)
			for b := range planes {
				planes[b] = tile.dn[b][win[0]*c.w : win[1]*c.w]
			}
			if err := m.Write(0, win[0], c.w, win[1]-win[0], planes, tile.labels[win[0]*c.w:win[1]*c.w]); err != nil {
				t.Fatal(err)
			}
		}
		rule := drawRule(uint64(trial), uint64(trial+3), c.block, c.buffer, c.frac, c.bits)
		wantHist, wantOff, wantBuffered, _ := referenceDraw(tile, rule, nres, nil)
		if (wantBuffered > 0) != (c.buffer > 0 && c.frac > 0) {
			t.Fatalf("trial %d buffers %d pixels", trial, wantBuffered)
		}
		hist := make([]uint32, nres<<c.bits)
		var off [256]int64
		var buffered int64
		if err := m.DrawCount(rule, nres, hist, &off, &buffered); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%d × %d, block %d, buffer %d, fraction %g", c.w, c.h, c.block, c.buffer, c.frac)
		if !slices.Equal(hist, wantHist) || off != wantOff || buffered != wantBuffered {
			t.Fatalf("%s: the first pass differs from the specification (%d buffered, the specification %d)", name, buffered, wantBuffered)
		}
		// Bounds: all of reservoir 0, none of 1, a bin's top elsewhere.
		bound := make([]uint64, nres)
		count := make([]int, nres)
		for k := range bound {
			switch k {
			case 0:
				bound[k] = ^uint64(0)
			case 1:
				bound[k] = 0
			default:
				bound[k] = uint64(r.IntN(1<<c.bits)+1)<<(64-c.bits) - 1
			}
		}
		_, _, _, want := referenceDraw(tile, rule, nres, bound)
		for _, k := range want.Reservoir {
			count[k]++
		}
		got, err := m.DrawCollect(rule, bound, count)
		if err != nil {
			t.Fatal(err)
		}
		got, want = sortedByID(got, nb), sortedByID(want, nb)
		if !slices.Equal(got.Key, want.Key) || !slices.Equal(got.ID, want.ID) || !slices.Equal(got.Reservoir, want.Reservoir) || !slices.Equal(got.DN, want.DN) {
			t.Fatalf("%s: the second pass collected %d candidates, the specification %d, or others", name, len(got.ID), len(want.ID))
		}
		count[2]++
		if _, err := m.DrawCollect(rule, bound, count); err == nil {
			t.Errorf("%s: a wrong count was not noticed", name)
		}
		m.Close()
	}
}

// TestCompositeMirrored checks that the device composite places each
// window's output and labels into the tile's mirror: the mirror holds the
// bytes the windows came back with. A planes mirror (the predictor's)
// holds the planes alone, and blocks of it (Mirror.Block) and windows'
// validity (Mirror.Valid) come back as the host would cut and mark them.
func TestCompositeMirrored(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	for _, labeled := range []bool{true, false} {
		r := rand.New(rand.NewPCG(31, 32))
		const w, h, nb, nd = 300, 200, 3, 2
		newMirror := NewPlanesMirror
		if labeled {
			newMirror = NewMirror
		}
		m, err := newMirror(d, w, h, nb)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		wantDN := make([]uint16, nb*w*h)
		wantLab := make([]uint8, w*h)
		for _, win := range [][4]int{{0, 0, 128, 200}, {128, 0, 172, 120}, {128, 120, 172, 80}} {
			x, y, ww, wh := win[0], win[1], win[2], win[3]
			n := ww * wh
			dates := make([]composite.Date, nd)
			for di := range dates {
				cd := composite.Date{SCL: make([]uint8, n)}
				for range nb {
					dn := make([]uint16, n)
					for i := range dn {
						dn[i] = uint16(r.IntN(12000))
					}
					cd.DN, cd.NoData = append(cd.DN, dn), append(cd.NoData, 0)
					cd.Scale, cd.Offset = append(cd.Scale, 0.0001), append(cd.Offset, -0.1)
				}
				for i := range cd.SCL {
					cd.SCL[i] = uint8(r.IntN(12))
				}
				dates[di] = cd
			}
			var labels []uint8
			if labeled {
				labels = make([]uint8, n)
				for i := range labels {
					labels[i] = uint8(r.IntN(256))
				}
			}
			out := make([][]uint16, nb)
			for b := range out {
				out[b] = make([]uint16, n)
			}
			count := make([]uint8, n)
			if err := CompositeMirrored(d, dates, composite.Spec{Drop: composite.DefaultDropSCL, Scale: 0.0001, Offset: -0.1}, out, count, &MirrorWindow{Mirror: m, X: x, Y: y, Width: ww, Labels: labels}); err != nil {
				t.Fatal(err)
			}
			for row := range wh {
				for col := range ww {
					at := (y+row)*w + x + col
					if labeled {
						wantLab[at] = labels[row*ww+col]
					}
					for b := range nb {
						wantDN[b*w*h+at] = out[b][row*ww+col]
					}
				}
			}
		}
		gotDN, gotLab := make([]uint16, nb*w*h), make([]uint8, w*h)
		if err := d.Do(func() error {
			if err := driver.Download(gotDN, m.dn); err != nil {
				return err
			}
			if !labeled {
				return nil
			}
			return driver.Download(gotLab, m.labels)
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotDN, wantDN) || !slices.Equal(gotLab, wantLab) {
			t.Errorf("labeled %v: the mirror does not hold the windows' composite and labels", labeled)
		}
		// A window outside the tile is refused.
		err = m.Write(w-10, 0, 20, 1, [][]uint16{make([]uint16, 20), make([]uint16, 20), make([]uint16, 20)}, make([]uint8, 20))
		if err == nil {
			t.Error("a window past the tile's edge was accepted")
		}
		if labeled {
			continue
		}
		// A block of planes 0 and 2 across the windows' seams, and the
		// validity of a window with DNs of 0 in one plane.
		const bx, by, bw, bh = 100, 90, 70, 60
		for i := range 300 {
			wantDN[w*h+(by+i/bw)*w+bx+i%bw] = 0 // plane 1
		}
		if err := m.Write(0, 0, w, h, [][]uint16{wantDN[:w*h], wantDN[w*h : 2*w*h], wantDN[2*w*h:]}, nil); err != nil {
			t.Fatal(err)
		}
		gotBlock, gotValid := make([]uint16, 2*bw*bh), make([]uint8, bw*bh)
		if err := d.Do(func() error {
			var st driver.Staging
			blk := st.Buf(driver.Alloc(uint64(len(gotBlock)) * 2))
			val := st.Buf(driver.Alloc(uint64(len(gotValid))))
			if st.Err != nil {
				return st.Err
			}
			defer blk.Free()
			defer val.Free()
			if err := m.Block(0, blk.Ptr, []int{0, 2}, bx, by, bw, bh); err != nil {
				return err
			}
			if err := m.Valid(0, val.Ptr, nb, bx, by, bw, bh); err != nil {
				return err
			}
			if err := driver.Download(gotBlock, blk); err != nil {
				return err
			}
			return driver.Download(gotValid, val)
		}); err != nil {
			t.Fatal(err)
		}
		zeros := 0
		for i := range bw * bh {
			at := (by+i/bw)*w + bx + i%bw
			if gotBlock[i] != wantDN[at] || gotBlock[bw*bh+i] != wantDN[2*w*h+at] {
				t.Fatalf("block pixel %d: %d, %d, want %d, %d", i, gotBlock[i], gotBlock[bw*bh+i], wantDN[at], wantDN[2*w*h+at])
			}
			want := uint8(1)
			if wantDN[at] == 0 || wantDN[w*h+at] == 0 || wantDN[2*w*h+at] == 0 {
				want = 0
				zeros++
			}
			if gotValid[i] != want {
				t.Fatalf("validity of pixel %d: %d, want %d", i, gotValid[i], want)
			}
		}
		if zeros < 300 {
			t.Fatalf("%d invalid pixels, fewer than the 300 made", zeros)
		}
		if err := d.Do(func() error { return m.Block(0, 0, []int{2, 0}, bx, by, bw, bh) }); err == nil {
			t.Error("planes out of order were accepted")
		}
		if err := d.Do(func() error { return m.Valid(0, 0, nb, w-bw+1, by, bw, bh) }); err == nil {
			t.Error("a window past the tile's edge was marked")
		}
	}
}

// TestMirrorContextBitExact checks the context features of chosen pixels
// of a tile held on the device (Mirror.Context, context_at) against
// features.Set.ContextAt: pixels everywhere, corners and edges included,
// with nodata and clamped values.
func TestMirrorContextBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	bands := []string{"B02", "B03", "B04", "B08", "B11"}
	names := []string{"B04", "mean(B08,15)", "std(B08,15)", "range(B08,15)", "std(ndvi,7)", "mean(ndwi,3)",
		"range(evi,5)", "mean(bsi,9)", "std(nd(B03,B11),31)", "ndvi"}
	set, err := features.NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	const w, h = 301, 257
	r := rand.New(rand.NewPCG(51, 52))
	planes := make([][]uint16, len(bands))
	for b := range planes {
		planes[b] = make([]uint16, w*h)
		for i := range planes[b] {
			planes[b][i] = uint16(800 + (i/w/11+i%w/13+b)%5*900 + r.IntN(700))
			switch r.IntN(200) {
			case 0, 1, 2:
				planes[b][i] = 0
			case 3:
				planes[b][i] = 65535
			}
		}
	}
	var refl [65536]float32
	for v := range refl {
		refl[v] = float32(float32(v)*1e-4) + -0.1
	}
	refl[0] = float32(math.NaN())
	m, err := NewMirror(d, w, h, len(bands))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Write(0, 0, w, h, planes, make([]uint8, w*h)); err != nil {
		t.Fatal(err)
	}
	xs, ys := []int{0, w - 1, 0, w - 1}, []int{0, 0, h - 1, h - 1}
	for range 5000 {
		xs, ys = append(xs, r.IntN(w)), append(ys, r.IntN(h))
	}
	k := len(set.ContextFeatures())
	want, got := make([]float32, len(xs)*k), make([]float32, len(xs)*k)
	if err := set.ContextAt(want, xs, ys, w, h, func(b, i int) float32 { return refl[planes[b][i]] }); err != nil {
		t.Fatal(err)
	}
	if err := m.Context(set, &refl, xs, ys, got); err != nil {
		t.Fatal(err)
	}
	if i := sameBits(want, got); i >= 0 {
		t.Fatalf("pixel (%d, %d), %s: CPU %v, GPU %v", xs[i/k], ys[i/k], set.Features[set.ContextFeatures()[i%k]].Name, want[i], got[i])
	}
	if err := m.Context(set, &refl, []int{w}, []int{0}, got[:k]); err == nil {
		t.Error("a pixel outside the tile was accepted")
	}
}
