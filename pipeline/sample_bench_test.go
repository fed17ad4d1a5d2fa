package pipeline

import (
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/stack"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// benchTile is a synthetic tile in memory, built once per process: its
// side is LULC_SAMPLE_BENCH_SIZE pixels (10980, a full Sentinel-2 tile,
// when unset).
var benchTile = sync.OnceValue(func() *stack.Tile {
	side := 10980
	if s, err := strconv.Atoi(os.Getenv("LULC_SAMPLE_BENCH_SIZE")); err == nil && s > 0 {
		side = s
	}
	return syntheticTile(side, side, 1)
})

// syntheticTile is a w×h tile of the ten stack bands with patchy labels:
// every WorldCover class, in patches of 16 to 256 pixels, about 5 % of
// pixels unlabelled and a few with codes outside the scheme, cloud-sized
// holes with no valid observation (DN 0 in every band) and scattered
// pixels missing one band.
func syntheticTile(w, h int, seed uint64) *stack.Tile {
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	t := stack.New("bench", geo.Grid{EPSG: 32631, Width: w, Height: h,
		Transform: [6]float64{600000, 10, 0, 5000000, 0, -10}}, bands, stage.StackScale, stage.StackOffset)
	codes := []uint8{10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 100}
	// Patches: the class of a cell of a coarse grid whose cell size varies
	// by region, so that classes have very different pixel counts.
	var wg sync.WaitGroup
	parts := 64
	for p := range parts {
		wg.Go(func() {
			for r := p * h / parts; r < (p+1)*h/parts; r++ {
				for c := range w {
					i := r*w + c
					region := rng.Hash2(seed, uint64(r/1024), uint64(c/1024))
					cell := uint64(16) << (region % 5)
					cls := rng.Hash(seed, 1, uint64(r)/cell, uint64(c)/cell)
					// Skewed class frequencies, from 30 % of the patches
					// to 0.2 %.
					k := int((cls >> 32) % 1000)
					code := codes[sort.SearchInts(classPerMille, k+1)]
					switch {
					case cls%100 < 5:
						code = 0
					case cls%1000 == 5:
						code = 254 // outside the scheme
					}
					t.Labels[i] = code
					cloud := rng.Hash2(seed+2, uint64(r/200), uint64(c/200))%20 == 0
					px := rng.Hash2(seed+3, uint64(r), uint64(c))
					for b := range t.DN {
						dn := uint16(1000 + (px>>(b*5))%3000 + uint64(code)*10)
						if cloud || (px%997 == 0 && int(px>>40)%len(t.DN) == b) {
							dn = 0
						}
						t.DN[b][i] = dn
					}
					t.Count[i] = 6
				}
			}
		})
	}
	wg.Wait()
	return t
}

// classPerMille are the synthetic classes' cumulative patch frequencies.
var classPerMille = []int{300, 500, 650, 770, 850, 910, 950, 975, 990, 998, 1000}

// benchTrainConfig is configs/train-full.yaml's sampling: what lulc run
// with configs/run-full-tile.yaml draws.
func benchTrainConfig(b *testing.B) config.TrainConfig {
	b.Helper()
	raw, err := configs.Read("train-full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.ParseTrainConfig(raw)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Input.Stack = ""
	return cfg
}

// BenchmarkSampleTile draws the full-tile job's samples from one tile in
// memory, as lulc run does: add (the draw, timed per tile in the run's
// report) and finish (features of the kept pixels, on the CPU).
func BenchmarkSampleTile(b *testing.B) {
	tile := benchTile()
	cfg := benchTrainConfig(b)
	scheme, _ := cfg.Scheme()
	zero := 0.0
	in := train.Input{Image: tile.Name, Labels: tile.Name, Bands: tile.Bands, Scale: tile.Scale, Offset: tile.Offset,
		Nodata: &zero, Mem: tile, InMemory: true}
	si, err := in.SampleInput()
	if err != nil {
		b.Fatal(err)
	}
	// CPU time as well as wall time: on a shared host the wall time
	// depends on the neighbours.
	var add, finish, addCPU, finishCPU time.Duration
	n := 0
	for b.Loop() {
		t0, c0 := time.Now(), cpuTime()
		sp := sampling.New(cfg.Sampling, cfg.Features, scheme, stage.Options{}.Engine().Features)
		if err := sp.Add(si); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), cpuTime()
		set, _, err := sp.Finish()
		if err != nil {
			b.Fatal(err)
		}
		add, addCPU = add+t1.Sub(t0), addCPU+c1-c0
		finish, finishCPU = finish+time.Since(t1), finishCPU+cpuTime()-c1
		n++
		b.ReportMetric(float64(set.N()), "samples")
	}
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(n) }
	b.ReportMetric(ms(add), "add-ms")
	b.ReportMetric(ms(addCPU), "add-cpu-ms")
	b.ReportMetric(ms(finish), "finish-ms")
	b.ReportMetric(ms(finishCPU), "finish-cpu-ms")
	b.ReportMetric(float64(tile.Grid.Width*tile.Grid.Height)/1e6, "Mpx")
}
