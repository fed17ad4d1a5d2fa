package chips

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/npy"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// ChipsFile is the description of an export of chips (docs/chips.md).
const ChipsFile = "chips.json"

// Config says how a stack is cut into chips: the train config whose
// features, classes and split the chips carry (its input names the
// stack), and the chips' side and step in pixels.
type Config struct {
	Train  config.TrainConfig
	Size   int
	Stride int
}

// Result summarises an export of chips.
type Result struct {
	Dir     string
	Chips   int
	Planes  int
	Dropped map[string]int // chips with no labelled pixel, by tile
	Elapsed time.Duration
}

// Index is chips.json.
type Index struct {
	Format   string              `json:"format"`
	Planes   []string            `json:"planes"`
	Scheme   string              `json:"scheme"`
	Classes  []chipClass         `json:"classes"`
	Size     int                 `json:"size"`
	Stride   int                 `json:"stride"`
	Split    map[string]int      `json:"split"`
	Sampling sampling.Config     `json:"sampling"`
	Tiles    []chipTile          `json:"tiles"`
	Chips    []chipAt            `json:"chips"`
	Dropped  map[string]int      `json:"dropped"`
	Files    map[string]chipFile `json:"files"`
}

type chipClass struct {
	Index int    `json:"index"`
	Code  uint8  `json:"code"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

type chipTile struct {
	Name      string     `json:"name"`
	EPSG      int        `json:"epsg"`
	Transform [6]float64 `json:"transform"`
	Width     int        `json:"width"`
	Height    int        `json:"height"`
	Planes    string     `json:"planes"`
	Labels    string     `json:"labels"`
	Split     string     `json:"split"`
}

type chipAt struct {
	Tile string `json:"tile"`
	X    int    `json:"x"`
	Y    int    `json:"y"`
}

type chipFile struct {
	Shape  []int  `json:"shape"`
	DType  string `json:"dtype"`
	SHA256 string `json:"sha256"`
}

// chipSource is one tile of the stack, with the chips cut from it.
type chipSource struct {
	in     train.Input
	name   string
	grid   geo.Grid
	index  []uint8 // class index per pixel, 0 none
	split  []uint8 // sampling.SplitPlane, none where index is 0
	chips  [][2]int
	sample int // its input index in the draw
}

// ExportChips cuts the stack the train config names into chips of its
// features, with class indices and the forest's split pixel for pixel
// (sampling.SplitPlane), and writes them with each tile's whole planes as
// .npy files and chips.json (docs/chips.md) into opt.Out, staged.
func ExportChips(ctx context.Context, cc Config, opt stage.Options) (Result, error) {
	opt.Fill()
	start := time.Now()
	cfg := cc.Train
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Input.Stack == "" {
		return Result{}, fmt.Errorf("input.stack: chips are cut from an ingest stack (--stack DIR)")
	}
	if cc.Size < 8 || cc.Stride < 1 || cc.Stride > cc.Size {
		return Result{}, fmt.Errorf("chips: size %d and stride %d: the size is at least 8 pixels and the stride 1 to the size", cc.Size, cc.Stride)
	}
	if err := atomicfs.CheckInputs(opt.Out, append(cfg.Inputs(), opt.Inputs...)...); err != nil {
		return Result{}, err
	}
	inputs, err := train.InputsOf(cfg)
	if err != nil {
		return Result{}, err
	}
	var schemes []*landcover.Scheme
	for _, in := range inputs {
		schemes = append(schemes, in.LabelScheme)
	}
	if err := cfg.ResolveLabels(schemes); err != nil {
		return Result{}, err
	}
	scheme, err := cfg.Scheme()
	if err != nil {
		return Result{}, err
	}
	set, err := features.NewSet(cfg.Features, inputs[0].Bands, inputs[0].Layers...)
	if err != nil {
		return Result{}, fmt.Errorf("features: %w", err)
	}
	srcs, err := chipSources(cfg, cc, inputs, scheme)
	if err != nil {
		return Result{}, err
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "chips "+cfg.Hash()+fmt.Sprintf(" %d %d", cc.Size, cc.Stride))
	if err != nil {
		return Result{}, err
	}
	defer staging.Release()
	idx := newChipsIndex(cfg, cc, set, scheme)
	if err := writeChips(ctx, staging, idx, srcs, set); err != nil {
		return Result{}, err
	}
	res := Result{Dir: staging.Final, Chips: len(idx.Chips), Planes: len(idx.Planes), Dropped: idx.Dropped}
	warnAbsent(idx, srcs, scheme, opt)
	body, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return res, err
	}
	if err := atomicfs.WriteFile(staging.Path(ChipsFile), append(body, '\n')); err != nil {
		return res, err
	}
	if err := staging.Commit(); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// chipSources reads each tile's labels into class indices and its split,
// and lays its chips, keeping those with a labelled pixel.
func chipSources(cfg config.TrainConfig, cc Config, inputs []train.Input, scheme landcover.Scheme) ([]*chipSource, error) {
	index := map[uint8]uint8{}
	for i, c := range scheme.Classes {
		index[c.Code] = uint8(i + 1)
	}
	remap := cfg.Remap()
	var out []*chipSource
	for i, in := range inputs {
		labels, grid, err := raster.ReadBand[uint8](in.Labels, 1)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		// ReadBand gives no CRS: the source's is read from its SRS.
		lab, err := raster.Open(in.Labels)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		grid.EPSG = lab.EPSG
		lab.Close()
		if cc.Size > grid.Width || cc.Size > grid.Height {
			return nil, fmt.Errorf("chips: size %d is larger than tile %s (%d×%d pixels)", cc.Size, filepath.Base(filepath.Dir(in.Labels)), grid.Width, grid.Height)
		}
		split, err := sampling.SplitPlane(cfg.SamplingConfig(), i, labels, grid.Width, grid.Height)
		if err != nil {
			return nil, err
		}
		s := &chipSource{in: in, name: filepath.Base(filepath.Dir(in.Labels)), grid: grid, split: split, sample: i, index: make([]uint8, len(labels))}
		for p, code := range labels {
			if to, ok := remap[code]; ok {
				code = to
			}
			if s.index[p] = index[code]; s.index[p] == 0 {
				split[p] = sampling.PlaneNone
			}
		}
		for _, y := range chipStarts(grid.Height, cc.Size, cc.Stride) {
			for _, x := range chipStarts(grid.Width, cc.Size, cc.Stride) {
				if s.labelled(x, y, cc.Size) {
					s.chips = append(s.chips, [2]int{x, y})
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// chipStarts are the chips' first pixels along a side of n pixels: every
// stride, the last moved back to end at the edge.
func chipStarts(n, size, stride int) []int {
	var out []int
	for x := 0; ; x += stride {
		if x+size >= n {
			return append(out, n-size)
		}
		out = append(out, x)
	}
}

// labelled reports whether the chip at (x, y) holds a labelled pixel.
func (s *chipSource) labelled(x, y, size int) bool {
	for r := y; r < y+size; r++ {
		row := s.index[r*s.grid.Width+x : r*s.grid.Width+x+size]
		if slices.ContainsFunc(row, func(v uint8) bool { return v != 0 }) {
			return true
		}
	}
	return false
}

// newChipsIndex starts chips.json with what the config decides.
func newChipsIndex(cfg config.TrainConfig, cc Config, set *features.Set, scheme landcover.Scheme) *Index {
	idx := &Index{Format: "lulc-chips/1", Planes: set.Names(), Scheme: scheme.Name, Size: cc.Size, Stride: cc.Stride,
		Split:    map[string]int{"none": sampling.PlaneNone, "train": sampling.PlaneTrain, "validation": sampling.PlaneValidation, "buffer": sampling.PlaneBuffer},
		Sampling: cfg.SamplingConfig(), Dropped: map[string]int{}, Files: map[string]chipFile{}}
	for i, c := range scheme.Classes {
		idx.Classes = append(idx.Classes, chipClass{Index: i + 1, Code: c.Code, Name: c.Name, Color: fmt.Sprintf("#%02x%02x%02x", c.Color.R, c.Color.G, c.Color.B)})
	}
	return idx
}

// writeChips computes each tile's feature planes in turn and writes them
// whole and as chips, with the labels and splits, recording each file.
func writeChips(ctx context.Context, staging *atomicfs.Stage, idx *Index, srcs []*chipSource, set *features.Set) error {
	n, c, s := 0, len(idx.Planes), idx.Size
	for _, src := range srcs {
		n += len(src.chips)
	}
	if err := os.MkdirAll(staging.Path("tiles"), 0o755); err != nil {
		return err
	}
	x, err := newNpyFile(staging, "x.npy", "<f4", []int{n, c, s, s})
	if err != nil {
		return err
	}
	y, err := newNpyFile(staging, "y.npy", "|u1", []int{n, s, s})
	if err != nil {
		return err
	}
	sp, err := newNpyFile(staging, "split.npy", "|u1", []int{n, s, s})
	if err != nil {
		return err
	}
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return err
		}
		planes, err := tilePlanes(src, set)
		if err != nil {
			return err
		}
		if err := writeTileArrays(staging, idx, src, planes); err != nil {
			return err
		}
		for _, at := range src.chips {
			idx.Chips = append(idx.Chips, chipAt{Tile: src.name, X: at[0], Y: at[1]})
			for _, p := range planes {
				x.window(p, src.grid.Width, at, s)
			}
			y.window(src.index, src.grid.Width, at, s)
			sp.window(src.split, src.grid.Width, at, s)
		}
		idx.Dropped[src.name] = len(chipStarts(src.grid.Width, s, idx.Stride))*len(chipStarts(src.grid.Height, s, idx.Stride)) - len(src.chips)
	}
	for _, f := range []*npyFile{x, y, sp} {
		if err := f.close(idx); err != nil {
			return err
		}
	}
	return nil
}

// tilePlanes computes a tile's feature planes over the whole tile: its
// bands' reflectance (NaN where no data), its context features, then
// every feature, as training computes them for its samples.
func tilePlanes(src *chipSource, set *features.Set) ([][]float32, error) {
	in, g := src.in, src.grid
	n := g.Width * g.Height
	// Every DN's reflectance, converted as the draw converts it.
	var table [65536]float32
	for v := range table {
		table[v] = float32(v)
	}
	sampling.Input{Scale: in.Scale, Offset: in.Offset, NoData: in.Nodata}.Reflectance(table[:])
	bands := make([][]float32, len(set.Bands))
	for b, name := range set.Bands {
		pos := slices.Index(in.Bands, name)
		dn, _, err := raster.ReadBand[uint16](in.Image, pos+1)
		if err != nil {
			return nil, fmt.Errorf("input.stack: %w", err)
		}
		bands[b] = make([]float32, n)
		for i, v := range dn {
			bands[b][i] = table[v]
		}
	}
	ctxPlanes := make([][]float32, len(set.ContextFeatures()))
	for i := range ctxPlanes {
		ctxPlanes[i] = make([]float32, n)
	}
	if len(ctxPlanes) > 0 {
		if err := set.ContextCompute(ctxPlanes, bands, features.Rect{Width: g.Width, Height: g.Height, InnerW: g.Width, InnerH: g.Height}); err != nil {
			return nil, err
		}
	}
	out := make([][]float32, len(set.Features))
	for i := range out {
		out[i] = make([]float32, n)
	}
	if err := (features.CPU{Set: set}).Compute(out, append(bands, ctxPlanes...)); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTileArrays writes a tile's whole planes, class indices and split.
func writeTileArrays(staging *atomicfs.Stage, idx *Index, src *chipSource, planes [][]float32) error {
	g := src.grid
	t := chipTile{Name: src.name, EPSG: g.EPSG, Transform: g.Transform, Width: g.Width, Height: g.Height,
		Planes: "tiles/" + src.name + ".npy", Labels: "tiles/" + src.name + "_y.npy", Split: "tiles/" + src.name + "_split.npy"}
	f, err := newNpyFile(staging, t.Planes, "<f4", []int{len(planes), g.Height, g.Width})
	if err != nil {
		return err
	}
	for _, p := range planes {
		f.floats(p)
	}
	if err := f.close(idx); err != nil {
		return err
	}
	for _, a := range []struct {
		name string
		data []uint8
	}{{t.Labels, src.index}, {t.Split, src.split}} {
		f, err := newNpyFile(staging, a.name, "|u1", []int{g.Height, g.Width})
		if err != nil {
			return err
		}
		f.bytes(a.data)
		if err := f.close(idx); err != nil {
			return err
		}
	}
	idx.Tiles = append(idx.Tiles, t)
	return nil
}

// warnAbsent names the scheme's classes that no chip holds.
func warnAbsent(idx *Index, srcs []*chipSource, scheme landcover.Scheme, opt stage.Options) {
	seen := make([]bool, len(scheme.Classes)+1)
	for _, src := range srcs {
		w := src.grid.Width
		for _, at := range src.chips {
			for r := at[1]; r < at[1]+idx.Size; r++ {
				for _, v := range src.index[r*w+at[0] : r*w+at[0]+idx.Size] {
					seen[v] = true
				}
			}
		}
	}
	var absent []string
	for i, c := range scheme.Classes {
		if !seen[i+1] {
			absent = append(absent, fmt.Sprintf("%d (%s)", c.Code, c.Name))
		}
	}
	if len(absent) > 0 {
		opt.Log.Warn(fmt.Sprintf("chips: no chip holds class %v of the scheme %s: a model trained on them will never predict it", absent, scheme.Name))
	}
}

// npyFile is a .npy file written in order, hashed as it goes.
type npyFile struct {
	name  string
	descr string
	shape []int
	f     *os.File
	w     *bufio.Writer
	h     hash.Hash
	err   error
	buf   []byte
}

func newNpyFile(staging *atomicfs.Stage, name, descr string, shape []int) (*npyFile, error) {
	f, err := os.Create(staging.Path(name))
	if err != nil {
		return nil, err
	}
	nf := &npyFile{name: name, descr: descr, shape: shape, f: f, h: sha256.New()}
	nf.w = bufio.NewWriterSize(io.MultiWriter(f, nf.h), 1<<20)
	_, nf.err = nf.w.Write(npy.Header(descr, shape))
	return nf, nil
}

// window writes the size × size window at at of a plane width wide:
// float32 planes as <f4, bytes as they are.
func (f *npyFile) window(plane any, width int, at [2]int, size int) {
	x, y := at[0], at[1]
	for r := y; r < y+size; r++ {
		switch p := plane.(type) {
		case []float32:
			f.floats(p[r*width+x : r*width+x+size])
		case []uint8:
			f.bytes(p[r*width+x : r*width+x+size])
		}
	}
}

func (f *npyFile) floats(v []float32) {
	if f.err != nil {
		return
	}
	f.buf = slices.Grow(f.buf[:0], 4*len(v))[:4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(f.buf[4*i:], math.Float32bits(x))
	}
	_, f.err = f.w.Write(f.buf)
}

func (f *npyFile) bytes(v []uint8) {
	if f.err == nil {
		_, f.err = f.w.Write(v)
	}
}

// close flushes and closes the file and records it in the index.
func (f *npyFile) close(idx *Index) error {
	if f.err == nil {
		f.err = f.w.Flush()
	}
	if err := f.f.Close(); f.err == nil {
		f.err = err
	}
	if f.err != nil {
		return fmt.Errorf("chips: %s: %w", f.name, f.err)
	}
	dtype := map[string]string{"<f4": "float32", "|u1": "uint8"}[f.descr]
	idx.Files[f.name] = chipFile{Shape: f.shape, DType: dtype, SHA256: hex.EncodeToString(f.h.Sum(nil))}
	return nil
}

// ImportClasses turns a model's class indices for one tile of a chips
// export (a uint8 [height, width] .npy on the tile's grid, index 0 for no
// class) into a class COG at out, with the scheme's codes, names and
// colours as chips.json records them, as lulc predict writes its maps.
func ImportClasses(chipsDir, tile, array, out string, opt stage.Options) error {
	opt.Fill()
	if err := atomicfs.CheckInputs(out, chipsDir, array); err != nil {
		return err
	}
	body, err := os.ReadFile(filepath.Join(chipsDir, ChipsFile))
	if err != nil {
		return fmt.Errorf("import: --chips: %w", err)
	}
	var idx Index
	if err := json.Unmarshal(body, &idx); err != nil || idx.Format != "lulc-chips/1" {
		return fmt.Errorf("import: %s is not a lulc-chips/1 description (%v)", filepath.Join(chipsDir, ChipsFile), err)
	}
	i := slices.IndexFunc(idx.Tiles, func(t chipTile) bool { return t.Name == tile })
	if i < 0 {
		var names []string
		for _, t := range idx.Tiles {
			names = append(names, t.Name)
		}
		return fmt.Errorf("import: --tile %s is not a tile of the chips (%v)", tile, names)
	}
	t := idx.Tiles[i]
	data, rows, cols, err := npy.ReadUint8(array)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if rows != t.Height || cols != t.Width {
		return fmt.Errorf("import: %s is %d×%d (rows × columns), tile %s is %d×%d", array, rows, cols, tile, t.Height, t.Width)
	}
	// The classes as STAC's classification extension would carry them:
	// landcover reads names and colours, and checks the codes, once.
	stac := make([]landcover.STACClass, len(idx.Classes))
	codes := make([]uint8, 256)
	for i, c := range idx.Classes {
		stac[i] = landcover.STACClass{Value: int(c.Code), Name: c.Name, ColorHint: c.Color}
		codes[c.Index] = c.Code
	}
	scheme, err := landcover.FromSTAC(idx.Scheme, stac)
	if err != nil {
		return fmt.Errorf("import: %s: %w", filepath.Join(chipsDir, ChipsFile), err)
	}
	for p, v := range data {
		if int(v) > len(idx.Classes) {
			return fmt.Errorf("import: %s holds class index %d at row %d, column %d; the chips have %d classes", array, v, p/cols, p%cols, len(idx.Classes))
		}
		data[p] = codes[v]
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	g := geo.Grid{EPSG: t.EPSG, Transform: t.Transform, Width: t.Width, Height: t.Height}
	cog := raster.COGOptions{BlockSize: 512, Compress: "DEFLATE", NoData: stage.Ptr(0.0), OverviewResampling: "MODE", Classes: &scheme}
	if err := raster.WriteCOG(out, g, data, cog); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}
