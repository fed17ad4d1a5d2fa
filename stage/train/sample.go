package train

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/pixel/stack"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// Input is one labelled image: the stack (or raster) and its labels.
type Input struct {
	Image, Labels string
	// groups is the labels' group ids (groups.tif), read for a split by
	// features; "" otherwise.
	groups string
	// weights is the pixels' weights (weights.tif), read when ingest
	// burned them; "" otherwise (every pixel weighs 1).
	weights       string
	Bands         []string
	Layers        []features.Layer // the stack's layers (manifest)
	Scale, Offset float64
	Nodata        *float64
	// mem, when set, is the input in memory (lulc run): strips come from
	// it rather than from image and labels, which only name it.
	Mem *stack.Tile
	// InMemory says the input was sampled from memory, with no files to
	// checksum (mem is dropped once the samples are drawn).
	InMemory bool
	// draw, when set, is a sample phase's draw (image and labels both name
	// its file), merged rather than sampled.
	draw *sampleset.Set
	// Darks are the dark levels (package radiometry) of the tiles behind
	// the input, when known: a stack's manifest, the run's composite, a
	// draw's tiles.
	Darks []radiometry.Levels
	// LabelScheme is the class scheme the input's labels carry, when
	// recorded (a stack's manifest).
	LabelScheme *landcover.Scheme
}

// InputsOf resolves the config's input section into images with their band
// order and scaling.
func InputsOf(c config.TrainConfig) ([]Input, error) {
	if len(c.Input.Samples) > 0 {
		return drawInputsOf(c)
	}
	if c.Input.Stack == "" {
		if c.Sampling.Split == sampling.SplitFeatures {
			return nil, fmt.Errorf("sampling.split: %s needs the group ids that ingest burns from vector labels (%s in a stack); input.rasters have none", sampling.SplitFeatures, stage.GroupsFile)
		}
		var out []Input
		for _, r := range c.Input.Rasters {
			out = append(out, Input{Image: r.Image, Labels: r.Labels, Bands: c.Input.Bands,
				Scale: c.Input.Scale, Offset: c.Input.Offset, Nodata: c.Input.NoData})
		}
		return out, nil
	}
	manifests, _ := filepath.Glob(filepath.Join(c.Input.Stack, "*", "manifest.json"))
	if len(manifests) == 0 {
		return nil, fmt.Errorf("input.stack: %s holds no tile manifests (*/manifest.json): is it a lulc ingest output?", c.Input.Stack)
	}
	slices.Sort(manifests)
	var out []Input
	for _, p := range manifests {
		body, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		m, err := stage.ParseManifest(body)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %s: %w", p, err)
		}
		dir := filepath.Dir(p)
		if err := stage.HasCOGStack(dir, m, "train"); err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		nd := m.NoData
		ls, err := m.LabelScheme.Scheme()
		if err != nil {
			return nil, fmt.Errorf("input.stack: %s: %w", p, err)
		}
		in := Input{Image: filepath.Join(dir, "stack.tif"), Labels: filepath.Join(dir, "labels.tif"),
			Bands: m.Bands, Layers: m.FeatureLayers(), Scale: m.Scale, Offset: m.Offset, Nodata: &nd, Darks: []radiometry.Levels{m.Dark}, LabelScheme: ls}
		if c.Sampling.Split == sampling.SplitFeatures {
			in.groups = filepath.Join(dir, stage.GroupsFile)
			if !atomicfs.Exists(in.groups) {
				return nil, fmt.Errorf("input.stack: tile %s has no %s: sampling.split %s needs labels ingested from a vector layer (source.label_field)", m.Tile, stage.GroupsFile, sampling.SplitFeatures)
			}
		}
		// Pixel weights, when ingest burned them, always key the draw.
		if w := filepath.Join(dir, stage.WeightsFile); atomicfs.Exists(w) {
			in.weights = w
		}
		out = append(out, in)
	}
	return out, nil
}

// drawInputsOf finds the draws that input.samples names (draw files, or
// directories searched for them), in path order, and reads them.
func drawInputsOf(c config.TrainConfig) ([]Input, error) {
	var paths []string
	for _, p := range c.Input.Samples {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("input.samples: %w", err)
		}
		if !info.IsDir() {
			paths = append(paths, p)
			continue
		}
		n := len(paths)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			// Staging (.partial) and replaced (.old) outputs hold draws
			// that are not, or no longer, a task's.
			if err == nil && d.IsDir() && path != p && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if err == nil && !d.IsDir() && d.Name() == stage.DrawFile {
				paths = append(paths, path)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("input.samples: %w", err)
		}
		if len(paths) == n {
			return nil, fmt.Errorf("input.samples: %s holds no %s: is it the output of lulc run --phase sample?", p, stage.DrawFile)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var out []Input
	for _, p := range paths {
		d, err := ReadDraw(p)
		if err != nil {
			return nil, fmt.Errorf("input.samples: %w", err)
		}
		// A draw's values are its bands, then any context features.
		bands, _ := features.SplitValues(d.Features)
		in := Input{Image: p, Labels: p, Bands: bands, Layers: d.Draw.Layers, Scale: d.Draw.Scale, Offset: d.Draw.Offset, Nodata: d.Draw.NoData, draw: d}
		for _, l := range d.Draw.Dark {
			in.Darks = append(in.Darks, l)
		}
		out = append(out, in)
	}
	return out, nil
}

// Sample draws stratified samples from every input (see sampling.Sampler)
// and returns what the draw has to say about the labels. Draws (a job's
// sample phase) are merged, after checking that they were drawn for this
// config.
func Sample(cfg config.TrainConfig, ins []Input, scheme landcover.Scheme, e stage.Engine, bar progress.Bar) (*sampleset.Set, DrawNotes, error) {
	defer bar.Finish()
	if err := drawsAgree(ins); err != nil {
		return nil, DrawNotes{}, err
	}
	sp := sampling.New(cfg.SamplingConfig(), cfg.Features, scheme, e.Features)
	for _, in := range ins {
		if in.draw != nil {
			if in.draw.Config != cfg.SampleKey() {
				return nil, DrawNotes{}, fmt.Errorf("%s: drawn for another train config (features, classes, sampling or input scaling differ)", in.Image)
			}
			if err := sp.Merge(in.draw); err != nil {
				return nil, DrawNotes{}, fmt.Errorf("%s: %w", in.Image, err)
			}
			bar.Add(1)
			continue
		}
		si, err := in.SampleInput()
		if err != nil {
			return nil, DrawNotes{}, err
		}
		if err := sp.Add(si); err != nil {
			return nil, DrawNotes{}, err
		}
		bar.Add(1)
	}
	// The last step: the kept pixels' features.
	set, _, err := sp.Finish()
	bar.Add(1)
	census := sp.Census()
	return set, DrawNotes{warnings: sp.Warnings(), census: &census}, err
}

// SampleInput is the input as the draw takes it: the tile in memory, or
// the files' strips, once the files are checked (labels on the image's
// grid, the band count).
func (in Input) SampleInput() (sampling.Input, error) {
	si := sampling.Input{Name: in.Image, Bands: in.Bands, Layers: in.Layers, Scale: in.Scale, Offset: in.Offset, NoData: in.Nodata, Tile: in.Mem}
	if in.Mem != nil {
		si.Groups, si.Weights = in.Mem.Groups, in.Mem.Weights
		return si, nil
	}
	img, err := raster.Open(in.Image)
	if err != nil {
		return si, err
	}
	defer img.Close()
	lab, err := raster.Open(in.Labels)
	if err != nil {
		return si, err
	}
	defer lab.Close()
	if img.Width != lab.Width || img.Height != lab.Height || img.Transform != lab.Transform {
		return si, fmt.Errorf("%s: labels %s are not on the image's grid", in.Image, in.Labels)
	}
	for _, plane := range []struct{ path, what string }{{in.groups, "group ids"}, {in.weights, "pixel weights"}} {
		if plane.path == "" {
			continue
		}
		src, err := raster.Open(plane.path)
		if err != nil {
			return si, err
		}
		same := img.Width == src.Width && img.Height == src.Height && img.Transform == src.Transform
		src.Close()
		if !same {
			return si, fmt.Errorf("%s: %s %s are not on the image's grid", in.Image, plane.what, plane.path)
		}
	}
	if got, nb := bandCount(in.Image), len(in.Bands); got != nb {
		return si, fmt.Errorf("%s has %d bands, the config or manifest lists %d (%s)", in.Image, got, nb, strings.Join(in.Bands, ", "))
	}
	open := func() (func(int, int) sampling.Strip, func(), error) {
		wimg, err := raster.Open(in.Image)
		if err != nil {
			return nil, nil, err
		}
		wlab, err := raster.Open(in.Labels)
		if err != nil {
			wimg.Close()
			return nil, nil, err
		}
		var wgrp, wwt *raster.Source
		closeAll := func() {
			for _, src := range []*raster.Source{wimg, wlab, wgrp, wwt} {
				if src != nil {
					src.Close()
				}
			}
		}
		if in.groups != "" {
			if wgrp, err = raster.Open(in.groups); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
		if in.weights != "" {
			if wwt, err = raster.Open(in.weights); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
		read := func(r0, h int) sampling.Strip { return fileStrip(si, wimg, wlab, wgrp, wwt, r0, h) }
		return read, closeAll, nil
	}
	si.Source = sampling.Source{Width: img.Width, Height: img.Height, Open: open}
	return si, nil
}

// PixelScan reads every labelled pixel of a train config's inputs.
type PixelScan struct {
	cfg config.TrainConfig
	ins []Input
}

// NewPixelScan resolves the inputs of cfg, which must be valid (the
// stack's tile manifests, or its raster pairs), so that a missing input
// fails before any output is prepared.
func NewPixelScan(cfg config.TrainConfig) (*PixelScan, error) {
	ins, err := InputsOf(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.ResolveLabels(inputSchemes(ins)); err != nil {
		return nil, err
	}
	return &PixelScan{cfg: cfg, ins: ins}, nil
}

// inputSchemes are the class schemes of the inputs' labels, nil where one
// has none on record.
func inputSchemes(ins []Input) []*landcover.Scheme {
	out := make([]*landcover.Scheme, len(ins))
	for i, in := range ins {
		out[i] = in.LabelScheme
	}
	return out
}

// Run visits every pixel of the inputs, in input then raster order, whose
// label is in the scheme and whose bands are all present, with the config's
// features (computed by the options' engine) and its split by the config's
// sampling seed, block size and validation fraction.
func (s *PixelScan) Run(ctx context.Context, opt stage.Options, visit func(sampling.Pixel)) error {
	cfg := s.cfg
	scheme, err := cfg.Scheme()
	if err != nil {
		return err
	}
	for ii, in := range s.ins {
		set, err := features.NewSet(cfg.Features, in.Bands, in.Layers...)
		if err != nil {
			return fmt.Errorf("%s: %w", in.Image, err)
		}
		comp, closeComp, err := opt.Engine().Features(set)
		if err != nil {
			return err
		}
		si, err := in.SampleInput()
		if err == nil {
			err = sampling.Scan(uint64(ii), si, set, comp, scheme, cfg.Sampling, visit)
		}
		closeComp()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// fileStrip reads the h rows from r0 of an input's files (groups and
// weights when not nil).
func fileStrip(in sampling.Input, img, lab, groups, weights *raster.Source, r0, h int) sampling.Strip {
	w, nb := img.Width, len(in.Bands)
	win := geo.Grid{EPSG: img.EPSG, Width: w, Height: h,
		Transform: [6]float64{img.Transform[0], img.Transform[1], 0, img.Transform[3] + float64(r0)*img.Transform[5], 0, img.Transform[5]}}
	st := sampling.Strip{Labels: make([]uint8, w*h), Planes: make([][]float32, nb)}
	if st.Err = lab.Read(win, "nearest", st.Labels); st.Err != nil {
		return st
	}
	if groups != nil {
		st.Groups = make([]uint32, w*h)
		if st.Err = raster.ReadBandWindowInto(groups, 1, 0, r0, w, h, st.Groups); st.Err != nil {
			return st
		}
	}
	if weights != nil {
		st.Weights = make([]uint8, w*h)
		if st.Err = raster.ReadBandWindowInto(weights, 1, 0, r0, w, h, st.Weights); st.Err != nil {
			return st
		}
	}
	for b := range nb {
		vals := make([]float32, w*h)
		if st.Err = raster.ReadBandWindowInto(img, b+1, 0, r0, w, h, vals); st.Err != nil {
			return st
		}
		in.Reflectance(vals)
		st.Planes[b] = vals
	}
	return st
}

func bandCount(path string) int {
	info, err := raster.Inspect(path)
	if err != nil {
		return -1
	}
	return info.Bands
}

// drawsAgree refuses draws that are not of one job: made from another
// ingest config, plan, tile list or task count than the first draw (their
// merge would not be the samples one process draws), or by a lulc that
// did not record these (which cannot be told apart). It names both draws
// and what differs.
func drawsAgree(ins []Input) error {
	var first *Input
	for i := range ins {
		in := &ins[i]
		if in.draw == nil {
			continue
		}
		d := in.draw.Draw
		if d.Ingest == "" || d.Tiles == "" {
			return fmt.Errorf("%s: the draw records no ingest config or tile list (drawn by an older lulc), so it cannot be told to be of this job's: draw it again with lulc run --phase sample", in.Image)
		}
		if first == nil {
			first = in
			continue
		}
		f := first.draw.Draw
		differ := func(what, a, b string) error {
			return fmt.Errorf("draws %s and %s are not of one job: their %s differ (%s and %s); merge only the draws of one lulc run --phase sample job", first.Image, in.Image, what, a, b)
		}
		switch {
		case d.Ingest != f.Ingest:
			return differ("ingest configs", short(f.Ingest), short(d.Ingest))
		case d.Plan != f.Plan:
			return differ("plans", orNone(short(f.Plan)), orNone(short(d.Plan)))
		case d.Tiles != f.Tiles:
			return differ("tile lists", short(f.Tiles), short(d.Tiles))
		case d.Tasks != f.Tasks:
			return differ("task counts", fmt.Sprint(f.Tasks), fmt.Sprint(d.Tasks))
		}
	}
	return nil
}

// short is a hash's first 12 digits, as messages name it.
func short(h string) string { return h[:min(12, len(h))] }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ReadDraw reads a sample phase's draw, refusing a damaged file or a
// training set.
func ReadDraw(path string) (*sampleset.Set, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := sampleset.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Draw == nil {
		return nil, fmt.Errorf("%s: a training set, not a sample phase's draw", path)
	}
	return d, nil
}
