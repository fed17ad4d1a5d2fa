// Package synth generates realistic synthetic scenes: Sentinel-2 L2A
// acquisitions as Earth Search serves them (one COG per band, SCL, STAC
// items with raster:bands scale and offset) and ESA WorldCover-like labels in
// EPSG:4326, with a static STAC catalog over both.
//
// The landscape is a warped Voronoi tessellation of patches whose classes
// follow smooth terrain, moisture and urban fields; cropland patches are cut
// into parcels with their own crop calendars. Each class has a dry and a
// green reflectance spectrum mixed by a greenness that follows the class's
// seasonal curve (crops green up, ripen and are harvested, deciduous trees
// leaf out and shed, water and built-up stay flat), with patch,
// texture and pixel variation, mixed pixels at boundaries, and an atmosphere
// per date (clouds, their shadows, cirrus, haze, swath edges). Labels carry a
// configurable fraction of plausible errors. On request it adds elevation
// shaped like Copernicus DEM GLO-30 and Sentinel-1 RTC backscatter
// (layers.go). Everything is a counter-based function of the seed, so the
// same config gives the same bytes.
package synth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/meminfo"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/pixel/features"
)

// modelVersion changes whenever the generator's output for a given config
// changes, so that an interrupted run of an older lulc is not resumed.
const modelVersion = 3

// Options control where and how Run writes.
type Options struct {
	Out   string // final output directory
	Force bool   // replace an existing output
	// BreakLock takes over the output's lock whoever holds it.
	BreakLock bool
	Log       *slog.Logger
	// NewBar makes a progress bar; nil shows none.
	NewBar progress.NewBar
	// Writers is the number of COGs compressed at once (0: automatic).
	Writers int
	// GDALCOG writes the COGs with GDAL's driver (for comparing it with
	// lulc's encoder).
	GDALCOG bool
}

// Result summarises a run.
type Result struct {
	Dir       string
	Files     int           // rasters written by this run
	RawBytes  int64         // uncompressed size of those rasters
	OutBytes  int64         // their size on disk
	Generate  time.Duration // pixel synthesis
	Write     time.Duration // COG encoding (compression, overviews)
	Resumed   bool
	Skipped   int // rasters kept from an interrupted run
	ItemIDs   []string
	LabelItem string
}

// Run generates the scene described by cfg into opt.Out.
func Run(ctx context.Context, cfg Config, opt Options) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	newBar := progress.OrNop(opt.NewBar)
	if need, avail := cfg.EstimateMemory(), meminfo.Available(); avail > 0 && need > avail {
		return Result{}, fmt.Errorf("size: a %d×%d scene with %d dates needs about %.1f GB of memory, more than the %.1f GB available",
			cfg.Size, cfg.Size, len(cfg.Dates), float64(need)/1e9, float64(avail)/1e9)
	}

	stage, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, fmt.Sprintf("synth v%d %s", modelVersion, cfg.Hash()))
	if err != nil {
		return Result{}, err
	}
	defer stage.Release()
	res := Result{Dir: stage.Final, Resumed: stage.Resumed}
	if stage.Resumed {
		log.Info("resuming interrupted run", "staging", stage.Dir)
	}

	geo, err := newGeometry(cfg)
	if err != nil {
		return res, err
	}
	sc := newScene(cfg, geo.labelUV)

	// An item file is written after its rasters, so it marks a finished
	// acquisition; only unfinished ones are generated again.
	names := cfg.bandNames()
	acqs := make([]*acquisition, len(cfg.Dates))
	var todo []*acquisition
	for i, d := range cfg.Dates {
		acqs[i] = newAcquisition(sc, i, geo.centerLat)
		id := d.itemID(cfg.Tile)
		res.ItemIDs = append(res.ItemIDs, id)
		if !atomicfs.Exists(stage.Path(s2Collection, id, id+".json")) {
			todo = append(todo, acqs[i])
		}
	}
	wcID, _ := wcItemID(cfg, geo)
	res.LabelItem = wcID
	needLabels := !atomicfs.Exists(stage.Path(wcCollection, wcID, wcID+".json"))

	start := time.Now()
	if len(todo) > 0 {
		bar := newBar(int64(cfg.Size), fmt.Sprintf("synth %d date(s)", len(todo)))
		sc.generate(todo, func(rows int) { bar.Add(rows) })
		bar.Finish()
	}
	var labels []uint8
	if needLabels {
		bar := newBar(int64(geo.label.Height), "synth labels")
		labels = sc.labels(geo, func(rows int) { bar.Add(rows) })
		bar.Finish()
	}
	res.Generate = time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	// Encode every raster, largest first, a few at a time: each COG uses
	// all cores for compression, and overlapping files hides the serial
	// parts (overview building, the in-memory copy).
	jobs, err := cogJobs(stage, cfg, geo, todo, labels, wcID)
	if err != nil {
		return res, err
	}
	start = time.Now()
	written, skipped, err := writeCOGs(ctx, cfg, jobs, opt.Writers, opt.GDALCOG, newBar)
	res.Write = time.Since(start)
	res.Skipped = skipped
	for _, j := range written {
		res.Files++
		res.RawBytes += int64(len(j.u16)*2 + len(j.u8))
		if fi, err := os.Stat(j.path); err == nil {
			res.OutBytes += fi.Size()
		}
	}
	if err != nil {
		return res, err
	}

	if cfg.YourData != nil && needLabels {
		// Before the label item, which marks the labels finished. The
		// first date is made again when a resumed run already wrote it.
		if !slices.Contains(todo, acqs[0]) {
			sc.generate(acqs[:1], func(int) {})
		}
		if err := writeYourData(stage.Dir, cfg, sc, geo, acqs[0], labels); err != nil {
			return res, fmt.Errorf("your_data: %w", err)
		}
		res.Files += 3
	}
	for _, a := range todo {
		item := s2Item(cfg, a, geo, a.footprint(geo, cfg), names)
		if err := writeJSON(stage.Path(s2Collection, item.Id, item.Id+".json"), item); err != nil {
			return res, err
		}
	}
	if needLabels && cfg.LabelPoints > 0 {
		// Before the item, which marks the labels finished.
		pts := sc.labelPoints(geo, labels)
		if err := raster.WritePoints(stage.Path(wcCollection, wcID, pointsFile(wcID)), PointsLayer, PointsField, wcEPSG, pts); err != nil {
			return res, err
		}
		res.Files++
	}
	if needLabels {
		if err := writeJSON(stage.Path(wcCollection, wcID, wcID+".json"), wcItem(cfg, geo)); err != nil {
			return res, err
		}
	}
	n, err := writeLayers(stage, cfg, sc, geo)
	res.Files += n
	if err != nil {
		return res, err
	}
	if err := writeCatalog(stage, cfg, geo, res.ItemIDs, wcID); err != nil {
		return res, err
	}
	if err := atomicfs.WriteFile(stage.Path("synth.yaml"), cfg.Resolved()); err != nil {
		return res, err
	}
	if err := stage.Commit(); err != nil {
		return res, err
	}
	log.Info("scene written", "dir", stage.Final, "files", res.Files, "generate", res.Generate.Round(time.Millisecond),
		"write", res.Write.Round(time.Millisecond), "out_MB", float64(res.OutBytes)/1e6)
	return res, nil
}

// cogJobs lists the rasters of the acquisitions to write and, when labels
// is not nil, the label map's.
func cogJobs(stage *atomicfs.Stage, cfg Config, geo *geometry, todo []*acquisition, labels []uint8, wcID string) ([]cogJob, error) {
	var jobs []cogJob
	for _, a := range todo {
		id := a.date.itemID(cfg.Tile)
		dir := stage.Path(s2Collection, id)
		for _, name := range cfg.bandNames() {
			band, err := features.LookupBand(name)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, cogJob{
				path: filepath.Join(dir, name+".tif"), grid: bandGrid(geo.utm, band.Resolution),
				u16: a.dns[bandIndexOf(name)], resampling: "AVERAGE", description: name,
			})
		}
		jobs = append(jobs, cogJob{
			path: filepath.Join(dir, "SCL.tif"), grid: bandGrid(geo.utm, 20),
			u8: a.scl, resampling: "NEAREST", description: "SCL",
		})
	}
	if labels != nil {
		jobs = append(jobs, cogJob{
			path: stage.Path(wcCollection, wcID, wcID+"_Map.tif"), grid: geo.label,
			u8: labels, resampling: "MODE", classes: &landcover.WorldCover,
			description: "Classification values",
			metadata:    wcMetadata(cfg, wcID),
		})
	}
	return jobs, nil
}

func bandIndexOf(name string) int {
	for i, n := range bandNames {
		if n == name {
			return i
		}
	}
	panic("unknown band " + name) // names come from Config.bandNames
}

func wcMetadata(cfg Config, id string) map[string]string {
	return map[string]string{
		"legend":          landcover.WorldCover.Legend(),
		"product_tile":    id[len(id)-7:],
		"product_type":    "LandCover Map",
		"title":           fmt.Sprintf("Synthetic ESA WorldCover-like product at 10m resolution for year %d (lulc synth)", cfg.WorldCoverYear),
		"time_start":      fmt.Sprintf("%d-01-01T00:00:00Z", cfg.WorldCoverYear),
		"time_end":        fmt.Sprintf("%d-12-31T23:59:59Z", cfg.WorldCoverYear),
		"product_crs":     "EPSG:4326",
		"lulc_seed":       fmt.Sprint(cfg.Seed),
		"lulc_config_sha": cfg.Hash(),
	}
}

type cogJob struct {
	path        string
	grid        geo.Grid
	u16         []uint16
	u8          []uint8
	resampling  string
	description string
	classes     *landcover.Scheme
	metadata    map[string]string
}

func (j cogJob) bytes() int64 { return int64(len(j.u16)*2 + len(j.u8)) }

// writeCOGs encodes the jobs whose files do not exist yet.
func writeCOGs(ctx context.Context, cfg Config, jobs []cogJob, writers int, gdalCOG bool, newBar progress.NewBar) (written []cogJob, skipped int, err error) {
	var todo []cogJob
	var total int64
	for _, j := range jobs {
		if atomicfs.Exists(j.path) {
			skipped++
			continue
		}
		todo = append(todo, j)
		total += j.bytes()
	}
	if writers <= 0 {
		writers = max(2, runtime.NumCPU()/4)
	}
	bar := newBar(total, "write COGs (bytes in)")
	defer bar.Finish()

	queue := make(chan cogJob)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(writers, len(todo)) {
		wg.Go(func() {
			for j := range queue {
				if err := writeCOG(cfg, j, gdalCOG); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				mu.Lock()
				written = append(written, j)
				mu.Unlock()
				bar.Add(int(j.bytes()))
			}
		})
	}
	// Largest first keeps the tail short.
	slices.SortStableFunc(todo, func(a, b cogJob) int { return cmp.Compare(b.bytes(), a.bytes()) })
feed:
	for _, j := range todo {
		select {
		case <-ctx.Done():
			break feed
		case queue <- j:
		}
	}
	close(queue)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return written, skipped, errors.Join(errs...)
}

func writeCOG(cfg Config, j cogJob, gdalCOG bool) error {
	if err := os.MkdirAll(filepath.Dir(j.path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	opt := raster.COGOptions{
		GDALDriver:         gdalCOG,
		BlockSize:          cfg.BlockSize,
		Compress:           cfg.Compress,
		OverviewResampling: j.resampling,
		NoData:             ptr(0.0),
		Description:        j.description,
		Metadata:           j.metadata,
		Classes:            j.classes,
	}
	if j.u16 != nil {
		return raster.WriteCOG(j.path, j.grid, j.u16, opt)
	}
	return raster.WriteCOG(j.path, j.grid, j.u8, opt)
}

// footprint is the acquisition's valid-data polygon in lon/lat: the scene
// square cut by the swath edge.
func (a *acquisition) footprint(geo *geometry, cfg Config) [][2]float64 {
	ext := float64(cfg.Size) * 10
	square := [][2]float64{{0, 0}, {ext, 0}, {ext, ext}, {0, ext}}
	inside := func(p [2]float64) bool { return !a.nodata(p[0], p[1]) }
	var ring [][2]float64
	for i, p := range square {
		q := square[(i+1)%len(square)]
		if inside(p) {
			ring = append(ring, p)
		}
		if inside(p) != inside(q) {
			// Where the edge crosses nu·u + nv·v = d.
			fp := a.edgeNU*p[0] + a.edgeNV*p[1] - a.edgeD
			fq := a.edgeNU*q[0] + a.edgeNV*q[1] - a.edgeD
			t := fp / (fp - fq)
			ring = append(ring, [2]float64{p[0] + t*(q[0]-p[0]), p[1] + t*(q[1]-p[1])})
		}
	}
	if len(ring) < 3 {
		ring = square // all nodata: keep the tile outline
	}
	xs := make([]float64, len(ring))
	ys := make([]float64, len(ring))
	for i, p := range ring {
		xs[i], ys[i] = cfg.Origin[0]+p[0], cfg.Origin[1]-p[1]
	}
	out := make([][2]float64, len(ring))
	t, err := raster.NewTransformer(cfg.EPSG, wcEPSG)
	if err == nil {
		err = t.Transform(xs, ys)
		t.Close()
	}
	if err != nil {
		// The same transform already succeeded for the scene outline.
		panic(fmt.Sprintf("footprint transform: %v", err))
	}
	for i := range out {
		out[i] = [2]float64{xs[i], ys[i]}
	}
	return out
}

func writeCatalog(stage *atomicfs.Stage, cfg Config, geo *geometry, itemIDs []string, wcID string) error {
	bbox := roundBox(geo.lonLat)
	var times []time.Time
	for _, d := range cfg.Dates {
		times = append(times, d.Datetime)
	}
	first, last := span(times)
	s2 := collection(s2Collection, "Sentinel-2 Level-2A (synthetic)",
		"Synthetic Sentinel-2 L2A surface reflectance as Earth Search v1 serves it: one COG per band, baseline 04 radiometry (reflectance = DN × 0.0001 − 0.1), SCL at 20 m. Generated by lulc synth.",
		bbox, &first, &last, itemIDs)
	wb := geo.label.Bounds()
	ys, ye := time.Date(cfg.WorldCoverYear, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(cfg.WorldCoverYear, 12, 31, 23, 59, 59, 0, time.UTC)
	wc := collection(wcCollection, "ESA WorldCover (synthetic)",
		"Synthetic land cover in the ESA WorldCover legend, EPSG:4326 at 1/12000 degree, with label noise. Generated by lulc synth.",
		roundBox(wb), &ys, &ye, []string{wcID})
	if err := writeJSON(stage.Path(s2Collection, "collection.json"), s2); err != nil {
		return err
	}
	if err := writeJSON(stage.Path(wcCollection, "collection.json"), wc); err != nil {
		return err
	}
	if cfg.DEM {
		grid := demGrid(geo)
		dem := collection(demCollection, "Copernicus DEM GLO-30 (synthetic)",
			"Synthetic elevation shaped like Copernicus DEM GLO-30: metres above the EGM2008 geoid, Float32, EPSG:4326 at one arcsecond, one asset \"data\". Generated by lulc synth.",
			roundBox(grid.Bounds()), nil, nil, []string{demItemID(grid)})
		if err := writeJSON(stage.Path(demCollection, "collection.json"), dem); err != nil {
			return err
		}
	}
	if len(cfg.Sentinel1) > 0 {
		var ids []string
		var times []time.Time
		for _, d := range cfg.Sentinel1 {
			ids = append(ids, d.itemID(cfg.Tile))
			times = append(times, d.Datetime)
		}
		s1First, s1Last := span(times)
		s1 := collection(s1Collection, "Sentinel-1 RTC (synthetic)",
			"Synthetic Sentinel-1 radiometrically terrain-corrected backscatter shaped like Planetary Computer's sentinel-1-rtc: gamma0 as linear power, Float32 COGs vv and vh on the scene's UTM grid at 10 m, nodata -32768. Generated by lulc synth.",
			bbox, &s1First, &s1Last, ids)
		if err := writeJSON(stage.Path(s1Collection, "collection.json"), s1); err != nil {
			return err
		}
	}
	return writeJSON(stage.Path("catalog.json"), catalog(cfg))
}

// span is the earliest and the latest of times (at least one).
func span(times []time.Time) (first, last time.Time) {
	first, last = times[0], times[0]
	for _, t := range times[1:] {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// roundBox is a bounding box with its coordinates rounded to 1e-9, as
// the catalog's documents carry them.
func roundBox(b [4]float64) []float64 {
	return []float64{round9(b[0]), round9(b[1]), round9(b[2]), round9(b[3])}
}
