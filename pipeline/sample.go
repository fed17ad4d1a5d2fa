package pipeline

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/cuda"
	"github.com/lulc/lulc/features"
	"github.com/lulc/lulc/internal/rng"
	"github.com/lulc/lulc/landcover"
	"github.com/lulc/lulc/raster"
	"github.com/lulc/lulc/samples"
)

// trainInput is one labelled image: the stack (or raster) and its labels.
type trainInput struct {
	image, labels string
	bands         []string
	scale, offset float64
	nodata        *float64
}

// inputs resolves the config's input section into images with their band
// order and scaling.
func (c TrainConfig) inputs() ([]trainInput, error) {
	if c.Input.Stack == "" {
		var out []trainInput
		for _, r := range c.Input.Rasters {
			out = append(out, trainInput{image: r.Image, labels: r.Labels, bands: c.Input.Bands,
				scale: c.Input.Scale, offset: c.Input.Offset, nodata: c.Input.NoData})
		}
		return out, nil
	}
	manifests, _ := filepath.Glob(filepath.Join(c.Input.Stack, "*", "manifest.json"))
	if len(manifests) == 0 {
		return nil, fmt.Errorf("input.stack: %s holds no tile manifests (*/manifest.json): is it a lulc ingest output?", c.Input.Stack)
	}
	slices.Sort(manifests)
	var out []trainInput
	for _, p := range manifests {
		body, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		var m manifest
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("input.stack: %s: %w", p, err)
		}
		dir := filepath.Dir(p)
		nd := m.NoData
		out = append(out, trainInput{image: filepath.Join(dir, "stack.tif"), labels: filepath.Join(dir, "labels.tif"),
			bands: m.Bands, scale: m.Scale, offset: m.Offset, nodata: &nd})
	}
	return out, nil
}

// candidate is a sampled pixel: its priority key and features.
type candidate struct {
	key   uint64
	pixel uint64
	x     []float32
}

// maxHeap keeps the cap smallest keys.
type maxHeap []candidate

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i].key > h[j].key }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// stripRows is how many image rows sampling reads at once.
const sampleStrip = 512

// sample draws stratified samples: for every class and split, the pixels
// with the smallest seeded hashes (a uniform sample without replacement,
// independent of read order), up to max_per_class. Validation pixels are
// those whose block_size×block_size block hashes below the validation
// fraction, so that neighbours never straddle the split.
func sample(cfg TrainConfig, ins []trainInput, scheme landcover.Scheme, gpu *cuda.Device) (*samples.Set, *features.Set, error) {
	var set *features.Set
	classIndex := map[uint8]int{}
	for i, c := range scheme.Classes {
		classIndex[c.Code] = i
	}
	k := len(scheme.Classes)
	heaps := make([]maxHeap, 2*k) // class*2 + split
	s := cfg.Sampling
	var sources []string
	for ii, in := range ins {
		fs, err := features.NewSet(cfg.Features, in.bands)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", in.image, err)
		}
		if set != nil && !slices.Equal(set.Bands, fs.Bands) {
			return nil, nil, fmt.Errorf("%s: bands [%s] differ from the first input's [%s]", in.image, strings.Join(fs.Bands, ", "), strings.Join(set.Bands, ", "))
		}
		set = fs
		sources = append(sources, in.image)
		img, err := raster.Open(in.image)
		if err != nil {
			return nil, nil, err
		}
		lab, err := raster.Open(in.labels)
		if err != nil {
			img.Close()
			return nil, nil, err
		}
		var comp features.Computer = features.CPU{Set: set}
		if gpu != nil {
			g, gerr := cuda.NewFeatures(gpu, set)
			if gerr != nil {
				img.Close()
				lab.Close()
				return nil, nil, gerr
			}
			defer g.Close()
			comp = g // the same bits as features.CPU
		}
		err = sampleInput(uint64(ii), in, img, lab, set, comp, classIndex, heaps, s.Seed, s.BlockSize, s.ValidationFraction, s.MaxPerClass)
		img.Close()
		lab.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	// Optional balancing: every class at the rarest present class's count.
	if s.Balance {
		for split := range 2 {
			least := math.MaxInt
			for c := range k {
				if n := heaps[c*2+split].Len(); n > 0 {
					least = min(least, n)
				}
			}
			for c := range k {
				h := &heaps[c*2+split]
				for h.Len() > least {
					heap.Pop(h)
				}
			}
		}
	}
	out := &samples.Set{Header: samples.Header{Features: set.Names(), Classes: scheme.Codes(), Sources: sources, Seed: s.Seed}}
	for split := range 2 {
		for c := range k {
			h := slices.Clone(heaps[c*2+split])
			slices.SortFunc(h, func(a, b candidate) int { return cmp.Compare(a.key, b.key) })
			for _, cand := range h {
				out.X = append(out.X, cand.x...)
				out.Y = append(out.Y, uint8(c))
				out.Split = append(out.Split, uint8(split))
				out.Pixel = append(out.Pixel, cand.pixel)
			}
		}
	}
	return out, set, nil
}

// sampleInput keeps, per class and split, the capacity pixels of an input
// with the lowest keys.
func sampleInput(ii uint64, in trainInput, img, lab *raster.Source, set *features.Set, comp features.Computer, classIndex map[uint8]int,
	heaps []maxHeap, seed uint64, block int, valFrac float64, capacity int) error {
	return scanInput(ii, in, img, lab, set, comp, classIndex, seed, block, valFrac, func(px Pixel) {
		hp := &heaps[px.class*2+px.split]
		if hp.Len() >= capacity && px.key >= (*hp)[0].key {
			return
		}
		x := make([]float32, len(px.feats))
		for f := range px.feats {
			x[f] = px.feats[f][px.i]
		}
		heap.Push(hp, candidate{key: px.key, pixel: px.id, x: x})
		if hp.Len() > capacity {
			heap.Pop(hp)
		}
	})
}

// Pixel is one labelled pixel with all bands present, as a scan visits
// it: its class index, split (0 training, 1 validation), sampling key and
// id, and its features at feats[f][i]. It is valid only during the visit:
// the features belong to the strip being scanned.
type Pixel struct {
	class, split int
	key, id      uint64
	feats        [][]float32
	i            int
}

// Class is the pixel's class: its index in the train config's scheme.
func (px Pixel) Class() int { return px.class }

// Validation reports whether the pixel lies in a validation block.
func (px Pixel) Validation() bool { return px.split == 1 }

// AppendFeatures appends the pixel's features, in the config's order, to
// dst.
func (px Pixel) AppendFeatures(dst []float32) []float32 {
	for f := range px.feats {
		dst = append(dst, px.feats[f][px.i])
	}
	return dst
}

// PixelScan reads every labelled pixel of a train config's inputs.
type PixelScan struct {
	cfg TrainConfig
	ins []trainInput
}

// NewPixelScan resolves the inputs of cfg, which must be valid (the
// stack's tile manifests, or its raster pairs), so that a missing input
// fails before any output is prepared.
func NewPixelScan(cfg TrainConfig) (*PixelScan, error) {
	ins, err := cfg.inputs()
	if err != nil {
		return nil, err
	}
	return &PixelScan{cfg: cfg, ins: ins}, nil
}

// Run visits every pixel of the inputs, in input then raster order, whose
// label is in the scheme and whose bands are all present, with the config's
// features (computed on gpu when it is not nil) and its split by the
// config's sampling seed, block size and validation fraction.
func (s *PixelScan) Run(ctx context.Context, gpu *cuda.Device, visit func(Pixel)) error {
	cfg := s.cfg
	scheme, err := cfg.Scheme()
	if err != nil {
		return err
	}
	classIndex := map[uint8]int{}
	for i, c := range scheme.Classes {
		classIndex[c.Code] = i
	}
	for ii, in := range s.ins {
		set, err := features.NewSet(cfg.Features, in.bands)
		if err != nil {
			return fmt.Errorf("%s: %w", in.image, err)
		}
		var comp features.Computer = features.CPU{Set: set}
		if gpu != nil {
			g, err := cuda.NewFeatures(gpu, set)
			if err != nil {
				return err
			}
			defer g.Close()
			comp = g
		}
		img, err := raster.Open(in.image)
		if err != nil {
			return err
		}
		lab, err := raster.Open(in.labels)
		if err != nil {
			img.Close()
			return err
		}
		err = scanInput(uint64(ii), in, img, lab, set, comp, classIndex, cfg.Sampling.Seed, cfg.Sampling.BlockSize, cfg.Sampling.ValidationFraction, visit)
		img.Close()
		lab.Close()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// scanInput computes the features of an input strip by strip and visits
// every pixel whose label is in the scheme and whose bands are all
// present, in raster order. Splits go by blocks of block × block pixels (a
// fraction valFrac of them to validation); keys are seeded hashes of the
// pixel, so taking the lowest keys is a seeded random choice. Strips are
// read and their features computed by several workers, each with its own
// GDAL handles, a few strips ahead of the visits.
func scanInput(ii uint64, in trainInput, img, lab *raster.Source, set *features.Set, comp features.Computer, classIndex map[uint8]int,
	seed uint64, block int, valFrac float64, visit func(Pixel)) error {
	if img.Width != lab.Width || img.Height != lab.Height || img.Transform != lab.Transform {
		return fmt.Errorf("%s: labels %s are not on the image's grid", in.image, in.labels)
	}
	nb := len(in.bands)
	if got := bandCount(in.image); got != nb {
		return fmt.Errorf("%s has %d bands, the config or manifest lists %d (%s)", in.image, got, nb, strings.Join(in.bands, ", "))
	}
	var class [256]int
	for i := range class {
		class[i] = -1
	}
	for code, c := range classIndex {
		class[code] = c
	}
	w := img.Width
	strips := (img.Height + sampleStrip - 1) / sampleStrip
	workers := max(1, min(strips, runtime.GOMAXPROCS(0)/2, 8))
	results := make([]chan strip, strips)
	for k := range results {
		results[k] = make(chan strip, 1)
	}
	// tokens bound the strips in flight: a worker takes one before reading
	// a strip, the visiting loop returns it when done with the strip.
	tokens := make(chan struct{}, workers+1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// On any return the workers stop and are waited for: they use comp,
	// which the caller closes after.
	defer wg.Wait()
	defer close(stop)
	var next atomic.Int64
	var compute sync.Mutex // a features.Computer serves one strip at a time
	for range workers {
		wg.Go(func() {
			var wimg, wlab *raster.Source
			defer func() {
				if wimg != nil {
					wimg.Close()
				}
				if wlab != nil {
					wlab.Close()
				}
			}()
			for {
				select {
				case tokens <- struct{}{}:
				case <-stop:
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				k := int(next.Add(1) - 1)
				if k >= strips {
					return
				}
				var st strip
				if wimg == nil {
					if wimg, st.err = raster.Open(in.image); st.err == nil {
						wlab, st.err = raster.Open(in.labels)
					}
				}
				if st.err == nil {
					st = readStrip(in, wimg, wlab, set, comp, &compute, k*sampleStrip)
				}
				results[k] <- st
				if st.err != nil {
					return
				}
			}
		})
	}
	for k := range strips {
		st := <-results[k]
		if st.err != nil {
			return st.err
		}
		r0, h := k*sampleStrip, len(st.labels)/w
		splits := make([]int, (w+block-1)/block)
		for r := range h {
			row := uint64(r0 + r)
			if r == 0 || row%uint64(block) == 0 {
				for b := range splits {
					splits[b] = 0
					if rng.Unit(rng.Hash(seed, 0x7a1, ii, row/uint64(block), uint64(b))) < valFrac {
						splits[b] = 1
					}
				}
			}
			for col := range w {
				i := r*w + col
				c := class[st.labels[i]]
				if c < 0 {
					continue
				}
				missing := false
				for b := range nb {
					if st.planes[b][i] != st.planes[b][i] {
						missing = true
					}
				}
				if missing {
					continue
				}
				visit(Pixel{class: c, split: splits[col/block], key: rng.Hash(seed, 0x5a4, ii, row, uint64(col)), id: ii<<40 | row<<20 | uint64(col), feats: st.feats, i: i})
			}
		}
		<-tokens
	}
	return nil
}

// strip is one strip of an input: labels, reflectance planes and features.
type strip struct {
	labels []uint8
	planes [][]float32
	feats  [][]float32
	err    error
}

// readStrip reads the strip of sampleStrip rows from r0 and computes its
// features.
func readStrip(in trainInput, img, lab *raster.Source, set *features.Set, comp features.Computer, compute *sync.Mutex, r0 int) strip {
	w, nb := img.Width, len(in.bands)
	h := min(sampleStrip, img.Height-r0)
	win := raster.Grid{EPSG: img.EPSG, Width: w, Height: h,
		Transform: [6]float64{img.Transform[0], img.Transform[1], 0, img.Transform[3] + float64(r0)*img.Transform[5], 0, img.Transform[5]}}
	st := strip{labels: make([]uint8, w*h), planes: make([][]float32, nb), feats: make([][]float32, len(set.Features))}
	if st.err = lab.Read(win, "nearest", st.labels); st.err != nil {
		return st
	}
	for b := range nb {
		vals := make([]float32, w*h)
		if st.err = raster.ReadBandWindowInto(img, b+1, 0, r0, w, h, vals); st.err != nil {
			return st
		}
		for i, v := range vals {
			if in.nodata != nil && float64(v) == *in.nodata {
				vals[i] = float32(math.NaN())
			} else {
				vals[i] = float32(float32(v)*float32(in.scale)) + float32(in.offset)
			}
		}
		st.planes[b] = vals
	}
	for f := range st.feats {
		st.feats[f] = make([]float32, w*h)
	}
	compute.Lock()
	st.err = comp.Compute(st.feats, st.planes)
	compute.Unlock()
	return st
}

func bandCount(path string) int {
	info, err := raster.Inspect(path)
	if err != nil {
		return -1
	}
	return info.Bands
}
