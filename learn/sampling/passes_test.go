package sampling

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/pixel/stack"
)

// pixelPasses are the device passes written pixel by pixel from the
// DeviceRule alone, as the CUDA kernels (draw_count, draw_collect) are:
// what a device must do for the draw to be the CPU's. Collect gives its
// candidates shuffled, as a device's atomics may.
type pixelPasses struct {
	tile    *stack.Tile
	shuffle uint64
}

// candidate returns pixel i's reservoir and key, ok false when it is no
// candidate.
func (p pixelPasses) candidate(r *DeviceRule, i int) (k uint16, key uint64, ok bool) {
	w := p.tile.Grid.Width
	k = r.Reservoir[p.tile.Labels[i]]
	if k == drawNone {
		return 0, 0, false
	}
	for _, plane := range p.tile.DN {
		if v := plane[i]; r.Missing[v>>5]>>(v&31)&1 != 0 {
			return 0, 0, false
		}
	}
	row, col := uint64(i/w), uint64(i%w)
	if p.validation(r, int(row/uint64(r.Block)), int(col/uint64(r.Block))) {
		k |= 1
	} else if p.buffered(r, int(row), int(col)) {
		return k, 0, false
	}
	return k, rng.Extend(rng.Extend(r.KeyBase, row), col), true
}

// validation reports whether block (br, bc) goes to validation.
func (p pixelPasses) validation(r *DeviceRule, br, bc int) bool {
	return rng.Unit(rng.Extend(rng.Extend(r.SplitBase, uint64(br)), uint64(bc))) < r.ValidationFraction
}

// buffered reports whether the pixel at (row, col), in a training block,
// lies within the buffer of one of its block's eight neighbours that the
// tile has and that goes to validation, as a kernel tests it.
func (p pixelPasses) buffered(r *DeviceRule, row, col int) bool {
	b, buf := r.Block, r.Buffer
	w, h := p.tile.Grid.Width, p.tile.Grid.Height
	br, bc, dr, dc := row/b, col/b, row%b, col%b
	reach := func(d, at, off, size int) bool {
		switch d {
		case -1:
			return off < buf && at > 0
		case 1:
			return off >= b-buf && (at+1)*b < size
		}
		return true
	}
	for dy := -1; dy <= 1; dy++ {
		for dx := -1; dx <= 1; dx++ {
			if (dy != 0 || dx != 0) && reach(dy, br, dr, h) && reach(dx, bc, dc, w) && p.validation(r, br+dy, bc+dx) {
				return true
			}
		}
	}
	return false
}

func (p pixelPasses) Count(r *DeviceRule, nres int, hist []uint32, off *[256]int64, buffered *int64) error {
	w := p.tile.Grid.Width
	for i, code := range p.tile.Labels {
		if r.Reservoir[code] == drawNone {
			off[code]++
			continue
		}
		if k, key, ok := p.candidate(r, i); ok {
			hist[int(k)<<r.Bits|int(key>>(64-r.Bits))]++
		} else if p.present(r, i) && !p.validation(r, i/w/r.Block, i%w/r.Block) {
			*buffered++
		}
	}
	return nil
}

// present reports whether every band of pixel i has data.
func (p pixelPasses) present(r *DeviceRule, i int) bool {
	for _, plane := range p.tile.DN {
		if v := plane[i]; r.Missing[v>>5]>>(v&31)&1 != 0 {
			return false
		}
	}
	return true
}

func (p pixelPasses) Collect(r *DeviceRule, bound []uint64, count []int) (Collected, error) {
	var c Collected
	w := p.tile.Grid.Width
	for i := range p.tile.Labels {
		k, key, ok := p.candidate(r, i)
		if !ok || key > bound[k] {
			continue
		}
		c.Key = append(c.Key, key)
		c.ID = append(c.ID, r.Input<<40|uint64(i/w)<<20|uint64(i%w))
		c.Reservoir = append(c.Reservoir, k)
		for _, plane := range p.tile.DN {
			c.DN = append(c.DN, plane[i])
		}
	}
	nb := len(p.tile.DN)
	rand.New(rand.NewPCG(p.shuffle, 1)).Shuffle(len(c.Key), func(a, b int) {
		c.Key[a], c.Key[b] = c.Key[b], c.Key[a]
		c.ID[a], c.ID[b] = c.ID[b], c.ID[a]
		c.Reservoir[a], c.Reservoir[b] = c.Reservoir[b], c.Reservoir[a]
		for j := range nb {
			c.DN[a*nb+j], c.DN[b*nb+j] = c.DN[b*nb+j], c.DN[a*nb+j]
		}
	})
	return c, nil
}

// TestDrawOnDeviceRule checks that a draw whose passes follow the
// DeviceRule pixel by pixel, collecting in any order, gives the samples
// of the draw on every core, byte for byte: the rule carries all a
// device needs.
func TestDrawOnDeviceRule(t *testing.T) {
	t.Parallel()
	for trial := range uint64(24) {
		c := randomDrawCase(t, 500+trial, trial >= 20)
		want, _, wantBuffered := drawBuffered(t, c, c.ins)
		ins := make([]Input, len(c.ins))
		for i, in := range c.ins {
			in.Passes = pixelPasses{tile: in.Tile, shuffle: trial}
			ins[i] = in
		}
		got, _, buffered := drawBuffered(t, c, ins)
		if !bytes.Equal(got, want) || buffered != wantBuffered {
			t.Errorf("trial %d: %s", trial, fmt.Sprintf("the draw through the device rule differs from the CPU's (%d inputs, buffer %d: %d buffered, the CPU %d)",
				len(ins), c.cfg.Buffer, buffered, wantBuffered))
		}
	}
}

// TestDrawTilesAtOnce checks that tiles added from several goroutines at
// once (as lulc run's lanes do, one per GPU) give the samples of adding
// them one after the other, byte for byte.
func TestDrawTilesAtOnce(t *testing.T) {
	t.Parallel()
	for trial := range uint64(12) {
		c := randomDrawCase(t, 700+trial, trial >= 10)
		want, _ := drawSamples(t, c, c.ins)
		sp := New(c.cfg, c.names, c.scheme, cpu)
		errs := make([]error, len(c.ins))
		var wg sync.WaitGroup
		for i := len(c.ins) - 1; i >= 0; i-- {
			in := c.ins[i]
			if i%2 == 1 {
				in.Passes = pixelPasses{tile: in.Tile, shuffle: trial}
			}
			wg.Go(func() { errs[i] = sp.AddAt(in, i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		set, _, err := sp.Finish()
		if err != nil {
			t.Fatal(err)
		}
		got, err := set.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("trial %d: %d tiles drawn at once differ from one after the other", trial, len(c.ins))
		}
	}
}

// TestDrawRemap checks that remapping a code outside the scheme onto a
// class draws what relabelling those pixels would: the same samples, byte
// for byte, from memory and strip by strip.
func TestDrawRemap(t *testing.T) {
	t.Parallel()
	for trial := range uint64(8) {
		c := randomDrawCase(t, 900+trial, false)
		to := c.scheme.Classes[int(trial)%len(c.scheme.Classes)].Code
		relabelled := make([]Input, len(c.ins))
		for i, in := range c.ins {
			tile := *in.Tile
			tile.Labels = slices.Clone(tile.Labels)
			for j, code := range tile.Labels {
				if code == 5 {
					tile.Labels[j] = to
				}
			}
			in.Tile = &tile
			relabelled[i] = in
		}
		want, wantWarn := drawSamples(t, c, relabelled)
		remapped := c
		remapped.cfg.Remap = map[uint8]uint8{5: to}
		for _, ins := range [][]Input{c.ins, stripInputs(c.ins)} {
			got, warn := drawSamples(t, remapped, ins)
			if !bytes.Equal(got, want) || !slices.Equal(warn, wantWarn) {
				t.Errorf("trial %d: remapping 5 onto %d differs from relabelling (warnings %q, %q)", trial, to, warn, wantWarn)
			}
		}
	}
}

// TestSplitByFeatures checks the split by features on the randomized
// cases that use it: every group's samples lie on one side, across
// inputs too, both sides are drawn, and a tile without group ids is
// refused, from memory and strip by strip.
func TestSplitByFeatures(t *testing.T) {
	t.Parallel()
	cases, both := 0, 0
	defer func() {
		if both < 3 {
			t.Errorf("%d of %d cases drew both sides", both, cases)
		}
	}()
	for trial := uint64(0); cases < 6; trial++ {
		c := randomDrawCase(t, 1500+trial, false)
		if c.cfg.Split != SplitFeatures {
			continue
		}
		cases++
		groupOf := map[uint64]uint32{}
		for ii, in := range c.ins {
			w := in.Tile.Grid.Width
			for i, g := range in.Groups {
				groupOf[uint64(ii)<<40|uint64(i/w)<<20|uint64(i%w)] = g
			}
		}
		sp := New(c.cfg, c.names, c.scheme, cpu)
		for _, in := range c.ins {
			if err := sp.Add(in); err != nil {
				t.Fatal(err)
			}
		}
		set, _, err := sp.Finish()
		if err != nil {
			t.Fatal(err)
		}
		side := map[uint32]uint8{}
		var n [2]int
		for i, p := range set.Pixel {
			g := groupOf[p]
			if s, ok := side[g]; ok && s != set.Split[i] {
				t.Fatalf("trial %d: group %d on both sides of the split", trial, g)
			}
			side[g] = set.Split[i]
			n[set.Split[i]]++
		}
		if n[0] > 0 && n[1] > 0 {
			both++
		}
		bare := c.ins[0]
		bare.Groups = nil
		for _, in := range []Input{bare, stripInputs([]Input{bare})[0]} {
			if err := New(c.cfg, c.names, c.scheme, cpu).Add(in); err == nil || !strings.Contains(err.Error(), "group id") {
				t.Errorf("trial %d: an input without group ids: %v", trial, err)
			}
		}
	}
}
