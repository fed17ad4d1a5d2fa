package predict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planetlabs/go-stac"
	"github.com/planetlabs/go-stac/extensions/raster/v1"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	lraster "github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/inference"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/pixel/stack"
	"github.com/lulc/lulc/report/interop"
	"github.com/lulc/lulc/source/stacext"
	"github.com/lulc/lulc/stage"
)

// Config says what to predict with which model, and how to write it.
type Config struct {
	Model      string // model.lulcrf
	Input      string // an ingest output directory
	Window     int    // window side in pixels (a multiple of 512)
	Confidence bool   // also write confidence.tif
	Compress   string // DEFLATE or ZSTD
	Resume     bool   // keep finished, verified tiles of an interrupted run
	// AOA says whether and on which grid aoa.tif is written, when the
	// model has an area of applicability.
	AOA stage.AOAOptions
}

// Result summarises a prediction.
type Result struct {
	Dir     string
	Tiles   []Tile
	Elapsed time.Duration
}

// Tile is one tile's outputs.
type Tile struct {
	Tile      string
	Class     string // path of class.tif
	Quicklook string // path of quicklook.png ("" when Options.Charts is nil)
	Item      string
	Pixels    int64
	Skipped   bool // finished by an earlier run and verified
	Timings   inference.Timings
	// With a GPU: the read-to-write streaming time and how much of it the
	// device's goroutine spent on features and prediction.
	Stream, DeviceBusy time.Duration
	Encode             time.Duration
	// Radiometry warns when the tile's dark levels differ from the
	// training data's (package radiometry); "" when they agree or either
	// is unknown.
	Radiometry string
	// AOA is the path of aoa.tif ("" when none is written); AOAOutside the
	// percentage of the tile's pixels with data outside the area of
	// applicability, and AOAWarning says so above AOAWarnPercent.
	AOA        string
	AOAOutside *float64
	AOAWarning string
}

// LoadModel reads and checks a model file.
func LoadModel(path string) (*forest.Model, []byte, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	m, err := forest.Decode(body)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", path, err)
	}
	return m, body, nil
}

// ModelScheme rebuilds the model's class scheme.
func ModelScheme(m *forest.Model) (landcover.Scheme, error) {
	s := landcover.Scheme{Name: "model"}
	for _, c := range m.Classes {
		var r, g, b uint8
		if _, err := fmt.Sscanf(c.Color, "#%02x%02x%02x", &r, &g, &b); err != nil {
			return s, fmt.Errorf("model class %d colour %q: %w", c.Code, c.Color, err)
		}
		s.Classes = append(s.Classes, landcover.Class{Code: c.Code, Name: c.Name, Color: stage.RGBA(r, g, b)})
	}
	return s, s.Validate()
}

// Predict classifies every tile of an ingest output with a model and writes,
// per tile, class.tif (and confidence.tif), a STAC item and a quicklook.
func Predict(ctx context.Context, pc Config, opt stage.Options) (Result, error) {
	opt.Fill()
	start := time.Now()
	if err := atomicfs.CheckInputs(opt.Out, append([]string{pc.Model, pc.Input}, opt.Inputs...)...); err != nil {
		return Result{}, err
	}
	if pc.Window == 0 {
		pc.Window = 1024
	}
	if pc.Window%512 != 0 || pc.Window < 512 || pc.Window > 8192 {
		return Result{}, fmt.Errorf("window: %d is not a multiple of 512 between 512 and 8192", pc.Window)
	}
	if pc.Compress == "" {
		pc.Compress = "DEFLATE"
	}
	if pc.Compress != "DEFLATE" && pc.Compress != "ZSTD" {
		return Result{}, fmt.Errorf("compress: %q is not DEFLATE or ZSTD", pc.Compress)
	}
	if err := pc.AOA.Check(); err != nil {
		return Result{}, err
	}
	model, body, err := LoadModel(pc.Model)
	if err != nil {
		return Result{}, err
	}
	scheme, err := ModelScheme(model)
	if err != nil {
		return Result{}, err
	}
	tiles, err := filepath.Glob(filepath.Join(pc.Input, "*", "manifest.json"))
	if err != nil || len(tiles) == 0 {
		return Result{}, fmt.Errorf("input %s holds no tile manifests (*/manifest.json): is it a lulc ingest output?", pc.Input)
	}
	slices.Sort(tiles)
	manifests := make([]stage.Manifest, len(tiles))
	key := fmt.Sprintf("predict %x %s %t %d", stage.SHA256(body), pc.Compress, pc.Confidence, pc.Window)
	if model.AOA != nil {
		key += fmt.Sprintf(" aoa %t %d", pc.AOA.Off, pc.AOA.GridStep())
	}
	for i, p := range tiles {
		raw, err := os.ReadFile(p)
		if err != nil {
			return Result{}, fmt.Errorf("input: %w", err)
		}
		if manifests[i], err = stage.ParseManifest(raw); err != nil {
			return Result{}, fmt.Errorf("input %s: %w", p, err)
		}
		if err := stage.HasCOGStack(filepath.Dir(p), manifests[i], "predict"); err != nil {
			return Result{}, fmt.Errorf("input: %w", err)
		}
		// The model must fit every tile before any pixel is predicted.
		if err := model.Check(model.Features, manifests[i].Bands); err != nil {
			return Result{}, fmt.Errorf("tile %s: %w", manifests[i].Tile, err)
		}
		if manifests[i].Scale != model.Scale || manifests[i].Offset != model.Offset {
			return Result{}, fmt.Errorf("tile %s: stack scaling %g/%g differs from the model's %g/%g", manifests[i].Tile, manifests[i].Scale, manifests[i].Offset, model.Scale, model.Offset)
		}
		key += fmt.Sprintf(" %x", stage.SHA256(raw))
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, key)
	if err != nil {
		return Result{}, err
	}
	defer staging.Release()
	if staging.Resumed && !pc.Resume {
		// Without --resume an interrupted run's staging is discarded (under
		// the lock: never another writer's).
		if err := staging.Restart(); err != nil {
			return Result{}, err
		}
	}
	res := Result{Dir: staging.Final}
	col := stage.OwnCollection(stage.CollectionID("lulc-", key))
	col.Base = opt.BaseURL
	names := make([]string, len(manifests))
	for i, m := range manifests {
		out, err := stage.NewTileOut(staging, m.Tile, col)
		if err != nil {
			return res, err
		}
		pt, err := predictTile(ctx, pc, opt, out, MapModel{model, pc.Model, scheme}, m, Input{stackFile: filepath.Join(filepath.Dir(tiles[i]), "stack.tif")})
		if err != nil {
			return res, fmt.Errorf("tile %s: %w", m.Tile, err)
		}
		res.Tiles = append(res.Tiles, pt)
		names[i] = m.Tile
	}
	desc := fmt.Sprintf("Land-cover maps of %d tile(s) predicted by lulc with the model %s.", len(names), filepath.Base(pc.Model))
	if err := stage.WriteCollection(staging.Dir, col.ID, "lulc land-cover maps", desc, stage.OutputItems(staging.Dir, names), col.Base); err != nil {
		return res, err
	}
	if err := staging.Commit(); err != nil {
		return res, err
	}
	for i := range res.Tiles {
		t := &res.Tiles[i]
		t.Class = strings.Replace(t.Class, staging.Dir, staging.Final, 1)
		t.Quicklook = strings.Replace(t.Quicklook, staging.Dir, staging.Final, 1)
		t.Item = strings.Replace(t.Item, staging.Dir, staging.Final, 1)
		t.AOA = strings.Replace(t.AOA, staging.Dir, staging.Final, 1)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// Input is where a tile's stack comes from: the stack COG of an
// ingest output, or a tile in memory (lulc run), whose labels are then
// compared with the predictions as they are made.
type Input struct {
	stackFile string
	Mem       *stack.Tile
	// Composited, when set, says that Mem is still being composited
	// (stack.Tile.StartFilling), its windows read as their rows become
	// whole. StreamTile's manifest then gives only the tile, its grid,
	// planes and encoding; after the stream StreamTile calls Composited
	// for the composite's error or the tile's whole manifest, which the
	// radiometry check and the outputs' item take. It is given the
	// stream's error, so that a failed stream stops the composite.
	Composited func(streamErr error) (stage.Manifest, error)
	// Ready, when set, is called once the tile's writers and predictor
	// are made, just before its windows stream: lulc run takes a lane's
	// turn at the device's prediction there, so that one tile is made
	// ready while another streams.
	Ready func()
	// Mirror, when set, is the device's copy of Mem, filled with it (lulc
	// run's composite on a GPU): a predictor of the same device reads the
	// windows from it (stage.ReadsMirror) rather than from Mem.
	Mirror *cuda.Mirror
}

// MapModel is what a tile is mapped with: the model, the path (or URL)
// the outputs name it by, and its class scheme.
type MapModel struct {
	Model  *forest.Model
	Path   string
	Scheme landcover.Scheme
}

// predictTile classifies one tile into dir and finishes its outputs.
func predictTile(ctx context.Context, pc Config, opt stage.Options, out stage.TileOut, mm MapModel, m stage.Manifest, in Input) (Tile, error) {
	p, err := StreamTile(ctx, pc, opt, out, mm, m, in)
	if err != nil {
		return p.Tile, err
	}
	err = p.Finish(opt)
	return p.Tile, err
}

// Predicted is a tile whose predictions are made and whose outputs are
// still to encode and describe.
type Predicted struct {
	Tile          Tile
	out           stage.TileOut
	modelPath     string
	classW, confW *lraster.Writer
	classes       []uint8
	grid          geo.Grid
	scheme        landcover.Scheme
	m             stage.Manifest
	confidence    bool
	Confusion     [][]int64      // with a tile in memory: labels × predictions
	aoa           *stage.AOASink // nil: no aoa.tif
	compress      string
	gdalCOG       bool         // COGs through GDAL's driver (Compare.GDALCOG)
	charts        stage.Charts // draws the quicklook (nil: none)
	finished      bool
}

// StreamTile runs a tile through read → features → predict → write into
// the class (and confidence) writers. With pc.Resume, a tile an earlier
// run finished and verified comes back marked Skipped, with nothing left
// to finish.
func StreamTile(ctx context.Context, pc Config, opt stage.Options, out stage.TileOut, mm MapModel, m stage.Manifest, in Input) (*Predicted, error) {
	model, modelPath, scheme := mm.Model, mm.Path, mm.Scheme
	dir := out.Dir
	p := &Predicted{out: out, modelPath: modelPath, scheme: scheme, m: m, confidence: pc.Confidence, compress: pc.Compress, charts: opt.Charts,
		Tile: Tile{Tile: m.Tile, Class: filepath.Join(dir, stage.ClassFile), Item: filepath.Join(dir, stage.ItemFile)}}
	if opt.Charts != nil {
		p.Tile.Quicklook = filepath.Join(dir, stage.QuicklookFile)
	}
	// Only a resumed prediction keeps a verified tile on its item alone:
	// lulc run keeps tiles by their records, which hold what the item
	// does not (the tile's metrics and area of applicability).
	if pc.Resume && Verified(dir) {
		p.Tile.Skipped, p.finished = true, true
		opt.Log.Info("tile already predicted and verified", "tile", m.Tile)
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, fmt.Errorf("output directory %s is not writable: %w", dir, err)
	}
	if in.Composited == nil {
		p.compareRadiometry(model, opt)
	}
	setupStart := time.Now()
	p.grid = geo.Grid{EPSG: m.Grid.EPSG, Transform: m.Grid.Transform, Width: m.Grid.Width, Height: m.Grid.Height}
	if _, err := lraster.NewTransformer(p.grid.EPSG, 4326); err != nil {
		return p, fmt.Errorf("grid CRS EPSG:%d is unusable: %w", p.grid.EPSG, err)
	}
	set, err := features.NewSet(model.Features, m.Bands, m.FeatureLayers()...)
	if err != nil {
		return p, err
	}
	// The writers (each a tile's staging in memory) are made while the
	// engine prepares its predictor: neither needs the other.
	opened := make(chan error, 1)
	go func() { opened <- p.openWriters(pc, opt.Compare.GDALCOG, !opt.Compare.LateMaps, opt.Workers) }()
	comp, pred, closePred, err := opt.Engine().Predictor(set, model)
	if werr := <-opened; werr != nil {
		// openWriters leaves no writer open when it fails.
		if err == nil {
			closePred()
		}
		return p, werr
	}
	if err != nil {
		p.abort()
		return p, err
	}
	defer closePred()
	// Whether the windows are read there is Run's to say
	// (Timings.Mirrored): the tile's sink counts too.
	stage.ReadsMirror(pred, in.Mirror)
	tile := inference.Tile{Memory: in.Mem, Grid: p.grid, Scale: m.Scale, Offset: m.Offset,
		Window: pc.Window, Workers: opt.Workers, Class: p.classW, Codes: scheme.Codes(), Features: comp,
		Remap: model.Remap}
	if in.Mem == nil {
		tile.Open = openStack(in.stackFile)
	}
	if p.confW != nil {
		tile.Confidence = p.confW
	}
	if p.charts != nil { // the quicklook is drawn from the predictions in memory
		p.classes = make([]uint8, p.grid.Width*p.grid.Height)
		tile.Classes = p.classes
	}
	if in.Mem != nil {
		tile.Reference, tile.Confusion = in.Mem.Labels, make([][]int64, len(scheme.Classes))
		for i := range tile.Confusion {
			tile.Confusion[i] = make([]int64, len(scheme.Classes))
		}
		p.Confusion = tile.Confusion
	}
	if model.AOA != nil && !pc.AOA.Off {
		grid := aoa.Grid{Width: p.grid.Width, Height: p.grid.Height, Step: pc.AOA.GridStep()}
		sink, closeSink, err := stage.NewAOASink(opt.Engine(), set, model.AOA, grid)
		if err != nil {
			p.abort()
			return p, err
		}
		defer closeSink()
		tile.Sink, p.aoa = sink, sink
	}
	opt.Log.Debug("predict: writers and predictor ready", "tile", m.Tile, "s", time.Since(setupStart).Seconds())
	if in.Ready != nil {
		in.Ready()
	}
	busy0 := opt.Engine().Busy()
	runStart := time.Now()
	windows := (p.grid.Width + pc.Window - 1) / pc.Window * ((p.grid.Height + pc.Window - 1) / pc.Window)
	bar := opt.NewBar(int64(windows), "predict "+m.Tile)
	p.Tile.Timings, err = inference.Run(ctx, tile, set, pred, bar)
	bar.Finish()
	if in.Composited != nil {
		m, cerr := in.Composited(err)
		err = streamOrComposite(err, cerr)
		p.m = m
		p.compareRadiometry(model, opt)
	}
	if err != nil {
		p.abort()
		return p, err
	}
	p.Tile.Pixels = p.Tile.Timings.Pixels
	p.Tile.Stream = time.Since(runStart)
	if p.aoa != nil {
		p.Tile.AOA = filepath.Join(dir, stage.AOAFile)
		if v := p.aoa.OutsidePercent(); !math.IsNaN(v) {
			p.Tile.AOAOutside = &v
			if v > stage.AOAWarnPercent {
				p.Tile.AOAWarning = fmt.Sprintf("%.1f %% of the tile lies outside the model's area of applicability (DI above %.3g): its map there is an extrapolation", v, p.aoa.Ref.Threshold)
				opt.Log.Warn("tile "+m.Tile+": "+p.Tile.AOAWarning, "tile", m.Tile)
			}
		}
	}
	// How much of the streaming the device was kept busy.
	p.Tile.DeviceBusy = opt.Engine().Busy() - busy0
	return p, nil
}

// streamOrComposite is the error of a tile predicted beside its
// composite: the composite's own when the stream failed for it (its
// windows were released with it) or did not fail at all, else the
// stream's, whose failure stopped the composite (which then only says
// that it was cancelled).
func streamOrComposite(streamErr, compositeErr error) error {
	if compositeErr != nil && (streamErr == nil || errors.Is(streamErr, compositeErr)) {
		return compositeErr
	}
	return streamErr
}

// compareRadiometry warns of a tile on another radiometric convention
// than the training data, which maps without error and wrongly, with the
// numbers.
func (p *Predicted) compareRadiometry(model *forest.Model, opt stage.Options) {
	p.Tile.Radiometry = radiometry.Compare(model.Bands, p.m.Dark.Aligned(model.Bands), radiometry.Levels(model.Dark).Aligned(model.Bands))
	if p.Tile.Radiometry != "" {
		opt.Log.Warn("tile "+p.m.Tile+": "+p.Tile.Radiometry, "tile", p.m.Tile)
	}
}

// openWriters starts the class and, if asked, the confidence COG; with
// early, their tiles are compressed as the stream completes their rows,
// beside the stream's workers.
func (p *Predicted) openWriters(pc Config, gdalCOG, early bool, workers int) error {
	p.gdalCOG = gdalCOG
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// The maps' tiles are compressed as the stream completes their rows
	// and the files hashed as they are written: Close is left with the
	// last rows and one write. A quarter of the lane's workers for each
	// map keeps up with the stream's rows; more would take cores from the
	// stream's own workers.
	cog := lraster.COGOptions{BlockSize: 512, Compress: pc.Compress, NoData: stage.Ptr(0.0), OverviewResampling: "MODE", Classes: &p.scheme, GDALDriver: gdalCOG,
		EncodeEarly: early, EarlyThreads: max(1, workers/4)}
	var err error
	if p.classW, err = lraster.NewWriter(p.Tile.Class, p.grid, "uint8", []lraster.BandInfo{{Description: "land cover class"}}, cog); err != nil {
		return err
	}
	if pc.Confidence {
		cc := cog
		cc.Classes, cc.OverviewResampling = nil, "AVERAGE"
		if p.confW, err = lraster.NewWriter(filepath.Join(p.out.Dir, stage.ConfidenceFile), p.grid, "uint8", []lraster.BandInfo{{Description: "top class probability (%)"}}, cc); err != nil {
			p.classW.Abort()
			return err
		}
	}
	return nil
}

func (p *Predicted) abort() {
	if p.classW != nil {
		p.classW.Abort()
	}
	if p.confW != nil {
		p.confW.Abort()
	}
}

// Finish encodes the COGs, draws the quicklook (with Options.Charts) from
// the predictions kept in memory and writes the STAC item last: its presence, with matching
// checksums, marks the tile finished.
func (p *Predicted) Finish(opt stage.Options) error {
	if p.finished {
		return nil
	}
	t0 := time.Now()
	// The two COGs are encoded and the quicklook drawn at once.
	var confErr, lookErr, aoaErr error
	var lookTime, confTime, aoaTime time.Duration
	var wg sync.WaitGroup
	if p.confW != nil {
		wg.Go(func() {
			confErr = p.confW.Close()
			confTime = time.Since(t0)
		})
	}
	if p.aoa != nil {
		wg.Go(func() {
			aoaErr = p.aoa.Write(p.out.Dir, p.grid, p.compress, p.gdalCOG)
			aoaTime = time.Since(t0)
		})
	}
	if p.charts != nil {
		wg.Go(func() {
			lookErr = p.charts.Quicklook(p.Tile.Quicklook, p.classes, p.grid.Width, p.grid.Height, 1024, p.scheme)
			lookTime = time.Since(t0)
		})
	}
	classErr := p.classW.Close()
	if classErr == nil {
		classErr = writeStyle(p.out.Dir, p.scheme)
	}
	p.Tile.Encode = time.Since(t0)
	wg.Wait()
	p.Tile.Encode = max(p.Tile.Encode, confTime)
	if err := errors.Join(classErr, confErr, aoaErr); err != nil {
		p.abort()
		return err
	}
	if lookErr != nil {
		return lookErr
	}
	p.classes = nil
	t1 := time.Now()
	item, err := predictionItem(p.m, p.grid, p.scheme, p.out, p.modelPath, p.confidence, p.Tile.Quicklook != "", p.sums())
	if err != nil {
		return err
	}
	if p.Tile.Radiometry != "" {
		item.Properties["lulc:radiometry_warning"] = p.Tile.Radiometry
	}
	if p.aoa != nil {
		if item.Assets["aoa"], err = stage.AoaAsset(p.out.Dir, p.aoa.Grid(p.grid)); err != nil {
			return err
		}
		item.Properties["lulc:aoa_threshold"] = p.aoa.Ref.Threshold
		item.Properties["lulc:aoa_step"] = p.aoa.Map.Grid.Step
		if p.Tile.AOAOutside != nil {
			item.Properties["lulc:aoa_outside_percent"] = math.Round(*p.Tile.AOAOutside*100) / 100
		}
		if p.Tile.AOAWarning != "" {
			item.Properties["lulc:aoa_warning"] = p.Tile.AOAWarning
		}
	}
	if err := p.out.Publish(item, stage.ItemFile); err != nil {
		return err
	}
	if err := stage.WriteItem(p.Tile.Item, item); err != nil {
		return err
	}
	opt.Log.Debug("predict: outputs finished", "tile", p.m.Tile, "encode_s", p.Tile.Encode.Seconds(), "quicklook_s", lookTime.Seconds(), "aoa_s", aoaTime.Seconds(), "item_s", time.Since(t1).Seconds())
	p.finished = true
	tm := p.Tile.Timings
	opt.Log.Info("tile predicted", "tile", p.m.Tile, "pixels", p.Tile.Pixels, "read_worker_s", tm.Read.Seconds(), "rows_wait_worker_s", tm.Wait.Seconds(), "features_worker_s", tm.Features.Seconds(),
		"predict_worker_s", tm.Predict.Seconds(), "write_s", tm.Write.Seconds(), "encode_s", p.Tile.Encode.Seconds(), "windows_from_device_copy", tm.Mirrored)
	if p.Tile.DeviceBusy > 0 { // only devices are busy
		opt.Log.Info("device use", "tile", p.m.Tile, "streaming_s", p.Tile.Stream.Seconds(), "device_busy_s", p.Tile.DeviceBusy.Seconds(),
			"busy_percent", math.Round(100*p.Tile.DeviceBusy.Seconds()/p.Tile.Stream.Seconds()))
	}
	return nil
}

// writeStyle writes the class map's QGIS style beside it.
func writeStyle(dir string, s landcover.Scheme) error {
	b, err := interop.QML(s)
	if err != nil {
		return err
	}
	return atomicfs.WriteFile(filepath.Join(dir, stage.StyleFile), b)
}

// Verified reports whether a tile directory holds a finished prediction:
// its item exists and every asset's file:checksum matches the file.
func Verified(dir string) bool {
	body, err := os.ReadFile(filepath.Join(dir, stage.ItemFile))
	if err != nil {
		return false
	}
	var it struct {
		Assets map[string]struct {
			Href     string `json:"href"`
			Checksum string `json:"file:checksum"`
		} `json:"assets"`
	}
	if json.Unmarshal(body, &it) != nil || len(it.Assets) == 0 {
		return false
	}
	for _, a := range it.Assets {
		if a.Checksum == "" {
			continue
		}
		if !digest.Matches(filepath.Join(dir, strings.TrimPrefix(a.Href, "./")), a.Checksum) {
			return false
		}
	}
	return true
}

// sums gives the checksums and sizes the map writers took as they wrote,
// by file name, after Close.
func (p *Predicted) sums() map[string]*stacext.File {
	known := map[string]*stacext.File{}
	for name, w := range map[string]*lraster.Writer{stage.ClassFile: p.classW, stage.ConfidenceFile: p.confW} {
		if w == nil {
			continue
		}
		if sum, size, ok := w.Sum(); ok {
			known[name] = &stacext.File{Checksum: digest.Multihash(sum), Size: size}
		}
	}
	return known
}

// predictionItem builds the STAC item of a tile's prediction, whose
// files are in out.dir: the class map, the confidence and the quicklook
// when written. known holds the checksums of the files already hashed
// as they were written; the others are read to hash them.
func predictionItem(m stage.Manifest, grid geo.Grid, scheme landcover.Scheme, out stage.TileOut, modelPath string, confidence, quicklook bool, known map[string]*stacext.File) (*stac.Item, error) {
	geom, bbox, err := stage.Footprint(grid)
	if err != nil {
		return nil, err
	}
	fileOf := func(name string) (*stacext.File, error) {
		if f, ok := known[name]; ok {
			return f, nil
		}
		return stage.FileOf(out.Dir, name)
	}
	res := stage.Ptr(grid.Transform[1])
	cf, err := fileOf(stage.ClassFile)
	if err != nil {
		return nil, err
	}
	assets := map[string]*stac.Asset{
		"classification": {Href: "./" + stage.ClassFile, Type: stage.CogType, Title: "Land cover class", Roles: []string{"data"},
			Extensions: []stac.Extension{stage.GridProjection(grid), &raster.Asset{Bands: []*raster.Band{{NoData: 0, DataType: "uint8", SpatialResolution: res}}},
				&stacext.ClassificationAsset{Classes: stage.ClassesOf(scheme)}, cf}},
	}
	// The class names and colours travel with the map: GDAL's category
	// names and QGIS's style, each an asset with its checksum.
	for _, a := range []struct{ key, file, title string }{
		{"class-names", stage.ClassNamesFile, "GDAL category names of the classes"},
		{"style", stage.StyleFile, "QGIS style: the classes' colours and names"},
	} {
		f, err := stage.FileOf(out.Dir, a.file)
		if err != nil {
			return nil, err
		}
		assets[a.key] = &stac.Asset{Href: "./" + a.file, Type: "application/xml", Title: a.title, Roles: []string{"metadata"},
			Extensions: []stac.Extension{f}}
	}
	if quicklook {
		qf, err := stage.FileOf(out.Dir, stage.QuicklookFile)
		if err != nil {
			return nil, err
		}
		assets["quicklook"] = &stac.Asset{Href: "./" + stage.QuicklookFile, Type: "image/png", Title: "Quicklook with legend", Roles: []string{"overview"},
			Extensions: []stac.Extension{qf}}
	}
	if confidence {
		f, err := fileOf(stage.ConfidenceFile)
		if err != nil {
			return nil, err
		}
		assets["confidence"] = &stac.Asset{Href: "./" + stage.ConfidenceFile, Type: stage.CogType, Title: "Top class probability (%)", Roles: []string{"data"},
			Extensions: []stac.Extension{stage.GridProjection(grid), &raster.Asset{Bands: []*raster.Band{{NoData: 0, DataType: "uint8", Unit: "percent", SpatialResolution: res}}}, f}}
	}
	links := stage.ItemLinks(stage.ItemFile, out.Collection)
	links = append(links, &stac.Link{Rel: "derived_from", Href: stage.LocalHref(out.Final, modelPath), Type: "application/octet-stream", Title: "model"})
	links = append(links, stage.SourceLinks(out.Final, "source item", m.Sources)...)
	props := stage.TimeProperties(m.Sources)
	props["lulc:tile"], props["lulc:model"] = m.Tile, filepath.Base(modelPath)
	return &stac.Item{
		Version: stage.StacVersion, Id: "lulc-" + m.Tile + "-landcover", Collection: out.Collection.ID,
		Geometry: geom, Bbox: bbox, Properties: props, Assets: assets, Links: links,
		Extensions: []stac.Extension{&stacext.ProjectionItem{EPSG: grid.EPSG}},
	}, nil
}

// openStack opens a stack file for one of inference's readers, through
// GDAL.
func openStack(path string) func() (inference.BandReader, error) {
	return func() (inference.BandReader, error) {
		src, err := lraster.Open(path)
		if err != nil {
			return nil, err
		}
		return stackReader{src}, nil
	}
}

// stackReader is a stack file's GDAL handle as inference reads it.
type stackReader struct{ s *lraster.Source }

func (r stackReader) ReadBand(b, x, y, w, h int, dn []uint16) error {
	return lraster.ReadBandWindowInto(r.s, b+1, x, y, w, h, dn)
}

func (r stackReader) Close() { r.s.Close() }
