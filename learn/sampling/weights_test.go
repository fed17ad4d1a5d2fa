package sampling

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/stack"
)

// withWeights gives every input of c pixel weights: mostly small, some 0
// (never drawn), a few large, by patches as a vector layer's features
// would burn them.
func withWeights(c drawCase, seed uint64) drawCase {
	r := rand.New(rand.NewPCG(seed, 7))
	patch := 1 + r.IntN(6)
	for k := range c.ins {
		in := &c.ins[k]
		w, h := in.Tile.Grid.Width, in.Tile.Grid.Height
		in.Weights = make([]uint8, w*h)
		for i := range in.Weights {
			p := rng.Hash(seed, uint64(k), uint64(i/w/patch), uint64(i%w/patch))
			switch {
			case p%10 == 0:
				in.Weights[i] = 0
			case p%10 == 1:
				in.Weights[i] = uint8(1 + p>>8%255)
			default:
				in.Weights[i] = uint8(1 + p>>8%4)
			}
		}
	}
	return c
}

// TestWeightedDrawMatchesReference checks that with pixel weights every
// path draws the reference's samples, byte for byte: tiles in memory
// (whatever GOMAXPROCS is, and with device passes given, which a tile
// with weights does not use), strips, shards' draws merged; and that a
// scan visits each pixel with its weighted key and skips weight 0.
func TestWeightedDrawMatchesReference(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	keyed := 0
	defer func() {
		if keyed == 0 {
			t.Error("no shard's draw carried its keys: the weighted merge goes untested")
		}
	}()
	for trial := range uint64(20) {
		c := withWeights(randomDrawCase(t, 3000+trial, trial%8 == 7), trial)
		want, wantWarn, wantBuffered := referenceSamples(t, c.cfg, c.names, c.scheme, c.ins)
		wantBytes, err := want.Encode()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("trial %d (%d inputs, max_per_class %d, split %q, buffer %d, %d samples)", trial, len(c.ins),
			c.cfg.MaxPerClass, c.cfg.Split, c.cfg.Buffer, want.N())
		for _, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			got, warn, buffered := drawBuffered(t, c, c.ins)
			if !bytes.Equal(got, wantBytes) || !slices.Equal(warn, wantWarn) || buffered != wantBuffered {
				t.Errorf("%s, GOMAXPROCS %d: samples differ from the reference", name, procs)
			}
		}
		if got, _, _ := drawBuffered(t, c, stripInputs(c.ins)); !bytes.Equal(got, wantBytes) {
			t.Errorf("%s: samples drawn strip by strip differ from the reference", name)
		}
		// Device passes key pixels unweighted: a tile with weights must
		// be drawn on the host.
		dev := slices.Clone(c.ins)
		for i := range dev {
			dev[i].Passes = pixelPasses{tile: dev[i].Tile, shuffle: trial}
		}
		if got, _, _ := drawBuffered(t, c, dev); !bytes.Equal(got, wantBytes) {
			t.Errorf("%s: samples with device passes given differ from the reference", name)
		}
		if len(c.ins) >= 2 {
			got, k := mergedDraws(t, c)
			keyed += k
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("%s: merged draws differ from the reference", name)
			}
		}
		scanKeys(t, c, want, name)
	}
}

// mergedDraws draws c's inputs as two shards (odd inputs strip by strip),
// through their draw files, and merges them; keyed is how many draws
// carried their keys.
func mergedDraws(t *testing.T, c drawCase) (b []byte, keyed int) {
	t.Helper()
	strips := stripInputs(c.ins)
	var draws []*sampleset.Set
	for shard := range 2 {
		sp := New(c.cfg, c.names, c.scheme, cpu)
		for i, in := range c.ins {
			if i%2 != shard {
				continue
			}
			if shard == 1 {
				in = strips[i]
			}
			if err := sp.AddAt(in, i); err != nil {
				t.Fatal(err)
			}
		}
		d, err := sp.Draw(len(c.ins), 1, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := sampleset.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		if back.Draw.Keys != nil {
			keyed++
		}
		draws = append(draws, back)
	}
	sp := New(c.cfg, c.names, c.scheme, cpu)
	for _, d := range slices.Backward(draws) {
		if err := sp.Merge(d); err != nil {
			t.Fatal(err)
		}
	}
	set, _, err := sp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = set.Encode(); err != nil {
		t.Fatal(err)
	}
	return b, keyed
}

// scanKeys checks that Scan visits pixels of weight 0 never, and every
// other with the smallest of its weight's hashes as its key, and visits
// some pixel of every input the reference drew from.
func scanKeys(t *testing.T, c drawCase, want *sampleset.Set, name string) {
	t.Helper()
	for ii, in := range c.ins {
		set, err := features.NewSet(c.names, in.Bands)
		if err != nil {
			t.Fatal(err)
		}
		w := in.Tile.Grid.Width
		visits := 0
		err = Scan(uint64(ii), in, set, features.CPU{Set: set}, c.scheme, c.cfg, func(px Pixel) {
			visits++
			row, col := px.id>>20&(1<<20-1), px.id&(1<<20-1)
			wt := in.Weights[int(row)*w+int(col)]
			key := rng.Hash(c.cfg.Seed, 0x5a4, uint64(ii), row, col)
			for j := 1; j < int(wt); j++ {
				key = min(key, rng.Hash(c.cfg.Seed, 0x5a4, uint64(ii), row, col, uint64(j)))
			}
			if wt == 0 || px.key != key {
				t.Fatalf("%s: scan visits pixel %#x of weight %d with key %#x, want %#x", name, px.id, wt, px.key, key)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		drawn := slices.ContainsFunc(want.Pixel, func(id uint64) bool { return id>>40 == uint64(ii) })
		if visits == 0 && drawn {
			t.Errorf("%s: scan visited no pixel of %s", name, in.Name)
		}
	}
}

// TestWeightedDrawRatio checks that weights act as multiplicities when the
// cap bites: of a class whose pixels are half weight 1, half weight 3, a
// draw of 1 % of the pixels keeps weight-3 pixels about three times as
// often (1 − (1 − x)³ against x, x ≈ 0.005 the keys' bound: 2.985). Two
// tiles, three seeds: some 1,350 and 4,050 pixels drawn, the ratio's
// standard error about 0.09.
func TestWeightedDrawRatio(t *testing.T) {
	t.Parallel()
	const side, keep = 300, 1800
	scheme := landcover.WorldCover
	code := scheme.Classes[0].Code
	var ins []Input
	for ii := range 2 {
		tile := stack.New(fmt.Sprintf("tile%d", ii), geo.Grid{EPSG: 32631, Width: side, Height: side,
			Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}, []string{"B04", "B08"}, 1e-4, 0)
		weights := make([]uint8, side*side)
		for i := range weights {
			tile.Labels[i] = code
			tile.DN[0][i], tile.DN[1][i] = 1000, 3000
			weights[i] = 1
			if (i/side+i%side)%2 == 0 {
				weights[i] = 3
			}
		}
		ins = append(ins, Input{Name: tile.Name, Bands: tile.Bands, Scale: 1e-4, Tile: tile, Weights: weights})
	}
	var drawn [4]int // by weight
	for seed := range uint64(3) {
		cfg := Config{MaxPerClass: keep, BlockSize: 16, ValidationFraction: 0, Seed: 42 + seed}
		for _, path := range [][]Input{ins, stripInputs(ins)} {
			sp := New(cfg, []string{"B04", "B08"}, scheme, cpu)
			for _, in := range path {
				if err := sp.Add(in); err != nil {
					t.Fatal(err)
				}
			}
			set, _, err := sp.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if set.N() != keep {
				t.Fatalf("seed %d: %d samples, want the cap %d", seed, set.N(), keep)
			}
			if path[0].Tile == nil {
				continue // the same draw, counted once
			}
			for _, id := range set.Pixel {
				drawn[ins[id>>40].Weights[int(id>>20&(1<<20-1))*side+int(id&(1<<20-1))]]++
			}
		}
	}
	ratio := float64(drawn[3]) / float64(drawn[1])
	t.Logf("drawn: %d of weight 1, %d of weight 3: ratio %.3f", drawn[1], drawn[3], ratio)
	if ratio < 2.75 || ratio > 3.2 {
		t.Errorf("weight-3 pixels drawn %.3f times as often as weight-1 ones (%d against %d), want about 3", ratio, drawn[3], drawn[1])
	}
}

// TestMergeRefusesForeignKeys checks that a weighted draw whose key lies
// above its pixel's unweighted key (no weight gives that) is refused.
func TestMergeRefusesForeignKeys(t *testing.T) {
	t.Parallel()
	for trial := uint64(0); ; trial++ {
		c := withWeights(randomDrawCase(t, 4000+trial, false), trial)
		sp := New(c.cfg, c.names, c.scheme, cpu)
		if err := sp.AddAt(c.ins[0], 0); err != nil {
			t.Fatal(err)
		}
		d, err := sp.Draw(1, 1, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Draw.Keys == nil {
			continue
		}
		i := len(d.Draw.Keys) - 1
		d.Draw.Keys[i] = unweightedKey(c.cfg.Seed, d.Pixel[i]) + 1
		if err := New(c.cfg, c.names, c.scheme, cpu).Merge(d); err == nil || !strings.Contains(err.Error(), "above its unweighted key") {
			t.Errorf("a foreign key merged: %v", err)
		}
		return
	}
}
