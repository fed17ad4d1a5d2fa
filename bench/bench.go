// Package bench times lulc's jobs and writes their reports. Run times the
// whole job (ingest, sample, train, predict, evaluate) per engine on
// identical inputs, composing the stage packages (and pipeline's one-pass Run), and reports stage
// times, throughput, accuracy, reproducibility and cost (report.json,
// report.md, report.html, stages.png). Forest times forest training alone
// per engine (lulc's GPU and CPU forests, golearn, scikit-learn) at several
// sample sizes on the same pixels (report.json, report.md). Decode times
// the decoding of every tile of a directory's GeoTIFFs by GDAL, lulc's Go
// decoder and the GPU's kernels. TemporalReal measures accuracy, not time:
// a median NDVI against NDVI percentiles and seasonal medians on a real
// series with polygon labels, leave-polygon-out (report.json, report.md).
// They are what `lulc bench`, `lulc bench forest`, `lulc bench decode` and
// `lulc bench temporal-real` run.
package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/meminfo"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/report/charts"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// Config names the job to time: a scene (synthesised, or an existing
// catalog), the ingest and train configs, the engines and repeats.
type Config struct {
	Synth        string             `yaml:"synth"`   // synth config (path or embedded name), or
	Catalog      string             `yaml:"catalog"` // an existing static catalog, or neither: the ingest config's source (a STAC API or raster pairs)
	Ingest       string             `yaml:"ingest"`
	Train        string             `yaml:"train"`
	Engines      []string           `yaml:"engines"` // cpu, golearn, gpu
	Repeat       int                `yaml:"repeat"`
	PricePerHour map[string]float64 `yaml:"price_per_hour"`
}

// ParseConfig decodes and checks a bench config.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := configs.DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	if c.Synth != "" && c.Catalog != "" {
		return c, errors.New("set exactly one of synth and catalog (or neither, to use the ingest config's source)")
	}
	if c.Ingest == "" || c.Train == "" {
		return c, errors.New("ingest and train configs are required")
	}
	if c.Repeat < 1 || c.Repeat > 20 {
		return c, fmt.Errorf("repeat: %d is outside 1–20", c.Repeat)
	}
	if len(c.Engines) == 0 {
		return c, errors.New("engines: none given (cpu, golearn, gpu)")
	}
	for _, e := range c.Engines {
		if e != "cpu" && e != "golearn" && e != "gpu" {
			return c, fmt.Errorf("engines: %q is not cpu, golearn or gpu", e)
		}
	}
	return c, nil
}

// loadConfig reads the config name with configs.Find and parses it; a parse
// error names the config's kind and name, a read error is returned as is.
func loadConfig[T any](kind, name string, parse func([]byte) (T, error)) (T, error) {
	raw, err := configs.Find(name)
	if err != nil {
		var zero T
		return zero, err
	}
	c, err := parse(raw)
	if err != nil {
		return c, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return c, nil
}

// Stages are the timed steps, in order.
// sample covers computing features and drawing the labelled pixels; train
// the fit, the validation metrics and writing the model.
var Stages = []string{"ingest", "sample", "train", "predict", "evaluate"}

// EngineReport is one engine's medians and outcomes.
type EngineReport struct {
	Engine       string             `json:"engine"`
	TilesPerSec  float64            `json:"tiles_per_second,omitempty"` // tiles over the whole job's time
	Skipped      string             `json:"skipped,omitempty"`          // why the engine did not run
	Stages       map[string]float64 `json:"stage_seconds"`              // medians over repeats
	Total        float64            `json:"total_seconds"`              // median of the runs' totals
	Runs         [][]float64        `json:"runs_seconds"`               // per repeat, per stage
	Pixels       int64              `json:"pixels_predicted"`
	BytesRead    int64              `json:"bytes_decoded"`
	PixelsPerSec float64            `json:"pixels_per_second"`
	MBPerSec     float64            `json:"mb_read_per_second"`
	Accuracy     float64            `json:"validation_accuracy"`
	Kappa        float64            `json:"validation_kappa"`
	MacroF1      float64            `json:"validation_macro_f1"`
	MapAccuracy  float64            `json:"map_accuracy,omitempty"` // evaluate: class map vs labels
	Reproducible *bool              `json:"reproducible,omitempty"` // repeats gave identical model and map
	Differences  []string           `json:"differences,omitempty"`
	CostPerTile  float64            `json:"cost_per_tile_usd,omitempty"`
	// OnePass is lulc run's whole job (the headline: each tile read once,
	// its composite in memory), median of repeats; OnePassStages its
	// breakdown (composite, sample, fit, stream, wait) and OnePassCost its
	// price per tile. Not for golearn, which writes no model.
	OnePass       float64            `json:"one_pass_seconds,omitempty"`
	OnePassRuns   []float64          `json:"one_pass_runs_seconds,omitempty"`
	OnePassStages map[string]float64 `json:"one_pass_stage_seconds,omitempty"`
	OnePassCost   float64            `json:"one_pass_cost_per_tile_usd,omitempty"`
	CostPer100GB  float64            `json:"cost_per_100gb_usd,omitempty"`
	tiles, dates  int                // what the ingest found
	pixelsIn      int64
}

// Report is report.json.
type Report struct {
	Created    string         `json:"-"` // not in JSON: reports of equal runs stay comparable
	Command    string         `json:"command"`
	ConfigHash string         `json:"config_sha256"`
	Host       HostInfo       `json:"host"`
	Inputs     Inputs         `json:"inputs"`
	Engines    []EngineReport `json:"engines"`
	CPUvsGPU   *bool          `json:"cpu_gpu_maps_identical,omitempty"`
	// CPUvsGPUOnePass compares the one-pass runs' models, samples and maps.
	CPUvsGPUOnePass *bool  `json:"cpu_gpu_one_pass_identical,omitempty"`
	PeakRSS         int64  `json:"peak_rss_bytes"`
	PeakGPU         uint64 `json:"peak_gpu_bytes_used,omitempty"`
}

// HostInfo is the hardware and software a bench ran on.
type HostInfo struct {
	CPU     string `json:"cpu"`
	Cores   int    `json:"cores"`
	RAM     uint64 `json:"ram_bytes"`
	OS      string `json:"os"`
	GPU     string `json:"gpu,omitempty"`
	GPUMem  uint64 `json:"gpu_memory_bytes,omitempty"`
	Driver  string `json:"cuda_driver,omitempty"`
	Lulc    string `json:"lulc"`
	Go      string `json:"go"`
	GDAL    string `json:"gdal"`
	GPUNote string `json:"gpu_note,omitempty"`
}

// Inputs describes what was processed.
type Inputs struct {
	Tiles  int    `json:"tiles"`
	Pixels int64  `json:"pixels"`
	Bands  int    `json:"bands"`
	Dates  int    `json:"dates"`
	Bytes  int64  `json:"bytes_on_disk"`
	Digest string `json:"catalog_sha256"`
}

// Run runs the job once per engine and repeat and writes report.json,
// report.md, report.html and stages.png into opt.Out. The stages draw
// their charts, as the commands run them, with opt.Charts, or
// charts.Drawer when it is nil.
func Run(ctx context.Context, bc Config, command string, opt stage.Options) (*Report, error) {
	opt.Fill()
	if opt.Charts == nil {
		opt.Charts = charts.Drawer{}
	}
	inputs := append([]string{bc.Catalog}, opt.Inputs...)
	for _, name := range []string{bc.Synth, bc.Ingest, bc.Train} {
		if atomicfs.Exists(name) {
			inputs = append(inputs, name)
		}
	}
	if bc.Catalog != "" {
		inputs = append(inputs, filepath.Dir(bc.Catalog))
	}
	if err := atomicfs.CheckInputs(opt.Out, inputs...); err != nil {
		return nil, err
	}
	// A missing parent is made, as every other command makes it.
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(opt.Out)), 0o755); err != nil {
		return nil, fmt.Errorf("output directory %s is not writable: %w", filepath.Dir(opt.Out), err)
	}
	lock, err := atomicfs.Lock(atomicfs.LockPath(opt.Out), opt.BreakLock)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", opt.Out, err)
	}
	defer lock.Release()
	scratch, err := os.MkdirTemp(filepath.Dir(filepath.Clean(opt.Out)), "."+filepath.Base(opt.Out)+".bench-")
	if err != nil {
		return nil, fmt.Errorf("output directory %s is not writable: %w", filepath.Dir(opt.Out), err)
	}
	// A bench does not resume: its staging goes on every failure.
	done := false
	defer func() {
		if !done {
			os.RemoveAll(scratch)
		}
	}()
	if _, err := os.Stat(opt.Out); err == nil && !opt.Force {
		return nil, fmt.Errorf("output %s already exists (use --force to replace it)", opt.Out)
	}
	rep := &Report{Command: command, Host: hostInfo(opt.Version)}
	raw, _ := json.Marshal(bc)
	rep.ConfigHash = fmt.Sprintf("%x", sha256.Sum256(raw))
	sub := func(name string) stage.Options {
		o := opt
		o.Out, o.Force, o.NewBar = filepath.Join(scratch, name), true, nil
		return o
	}

	icfg, tcfg, err := prepare(ctx, bc, opt, scratch, rep)
	if err != nil {
		return nil, err
	}

	var gpu *cuda.Device
	for _, e := range bc.Engines {
		er := EngineReport{Engine: e, Stages: map[string]float64{}}
		if e == "gpu" {
			if gpu == nil {
				if gpu, err = cuda.Open(0, opt.Compare.Device); err != nil {
					er.Skipped = fmt.Sprintf("no usable GPU: %v", err)
					rep.Engines = append(rep.Engines, er)
					continue
				}
				defer gpu.Close()
			}
		}
		if e == "gpu" {
			driver.ResetPeakMemory()
		}
		if err := runEngine(ctx, bc, engineJob{engine: e, icfg: icfg, tcfg: tcfg, sub: sub, gpu: gpu}, scratch, &er); err != nil {
			return nil, err
		}
		er.summarise(bc, rep, scratch)
		if e == "gpu" {
			_, rep.PeakGPU = driver.DeviceMemory()
		}
		if rep.Inputs.Tiles == 0 {
			rep.Inputs.Tiles, rep.Inputs.Pixels, rep.Inputs.Dates = er.tiles, er.pixelsIn, er.dates
		}
		rep.Engines = append(rep.Engines, er)
	}
	if cpuDir, gpuDir := filepath.Join(scratch, "cpu", "run1"), filepath.Join(scratch, "gpu", "run1"); atomicfs.Exists(cpuDir) && atomicfs.Exists(gpuDir) {
		same := len(compareRuns(cpuDir, gpuDir)) == 0
		rep.CPUvsGPU = &same
	}
	if cpuDir, gpuDir := filepath.Join(scratch, "cpu", "onepass1"), filepath.Join(scratch, "gpu", "onepass1"); atomicfs.Exists(cpuDir) && atomicfs.Exists(gpuDir) {
		same := len(compareRuns(cpuDir, gpuDir)) == 0
		rep.CPUvsGPUOnePass = &same
	}
	rep.PeakRSS = pipeline.PeakRSS()
	if err := writeReport(scratch, rep); err != nil {
		return nil, err
	}
	// Replace any previous output only now that the report is complete.
	if err := os.RemoveAll(opt.Out); err != nil {
		return nil, err
	}
	if err := os.Rename(scratch, opt.Out); err != nil {
		return nil, err
	}
	done = true
	return rep, nil
}

// prepare makes the bench's scene when it has a synth config, loads the
// ingest and train configs (pointed at the scene or catalog), checks their
// inputs against the output and describes the inputs in rep.
func prepare(ctx context.Context, bc Config, opt stage.Options, scratch string, rep *Report) (config.IngestConfig, config.TrainConfig, error) {
	catalog := bc.Catalog
	if bc.Synth != "" {
		sc, err := loadConfig("synth", bc.Synth, synth.ParseConfig)
		if err != nil {
			return config.IngestConfig{}, config.TrainConfig{}, err
		}
		if _, err := synth.Run(ctx, sc, synth.Options{Out: filepath.Join(scratch, "scene"), Log: opt.Log}); err != nil {
			return config.IngestConfig{}, config.TrainConfig{}, err
		}
		catalog = filepath.Join(scratch, "scene", "catalog.json")
	}
	icfg, err := loadConfig("ingest", bc.Ingest, config.ParseIngestConfig)
	if err != nil {
		return config.IngestConfig{}, config.TrainConfig{}, err
	}
	if catalog != "" {
		if len(icfg.Source.Rasters) > 0 {
			return config.IngestConfig{}, config.TrainConfig{}, fmt.Errorf("ingest %s reads source.rasters: a bench over raster pairs takes neither synth nor catalog", bc.Ingest)
		}
		icfg.Source.Catalog, icfg.Source.API = catalog, ""
	}
	tcfg, err := loadConfig("train", bc.Train, config.ParseTrainConfig)
	if err != nil {
		return config.IngestConfig{}, config.TrainConfig{}, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append(icfg.Inputs(), tcfg.Inputs()...)...); err != nil {
		return config.IngestConfig{}, config.TrainConfig{}, err
	}
	if catalog != "" {
		rep.Inputs = describeInputs(catalog, icfg)
	}
	if len(icfg.Source.Rasters) > 0 {
		// Fails before any run when a file is missing (../shared/data
		// absent, say).
		if rep.Inputs, err = describeRasterInputs(ctx, icfg, opt); err != nil {
			return config.IngestConfig{}, config.TrainConfig{}, fmt.Errorf("ingest %s: %w", bc.Ingest, err)
		}
	}
	return icfg, tcfg, nil
}

// engineJob is the job as one engine of the bench runs it: the engine
// ("cpu", "golearn", "gpu"), the configs, the options of each command's
// output directory (sub), and the device of "gpu".
type engineJob struct {
	engine string
	icfg   config.IngestConfig
	tcfg   config.TrainConfig
	sub    func(string) stage.Options
	gpu    *cuda.Device
}

// runEngine runs the job bc.Repeat times with one engine, command by
// command and (but for golearn) in one pass, keeping each run's outputs
// under stage/ENGINE for comparison.
func runEngine(ctx context.Context, bc Config, j engineJob, scratch string, er *EngineReport) error {
	e := j.engine
	for r := range bc.Repeat {
		// Every run, of every engine, happens in the same directory and
		// is moved aside after, so paths recorded in outputs (config
		// hashes, sample sources) are the same and runs and engines can
		// be compared byte for byte.
		work := "work"
		times, err := runOnce(ctx, j, work, er)
		if err != nil {
			return fmt.Errorf("engine %s, run %d: %w", e, r+1, err)
		}
		if err := os.MkdirAll(filepath.Join(scratch, e), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(scratch, work), filepath.Join(scratch, e, fmt.Sprintf("run%d", r+1))); err != nil {
			return err
		}
		er.Runs = append(er.Runs, times)
		if e == "golearn" {
			continue
		}
		onePass, err := runOnePass(ctx, j, work)
		if err != nil {
			return fmt.Errorf("engine %s, one-pass run %d: %w", e, r+1, err)
		}
		if err := os.Rename(filepath.Join(scratch, work), filepath.Join(scratch, e, fmt.Sprintf("onepass%d", r+1))); err != nil {
			return err
		}
		er.addOnePass(onePass)
	}
	return nil
}

// summarise turns an engine's runs into its report: medians, rates,
// cost, reproducibility.
func (er *EngineReport) summarise(bc Config, rep *Report, scratch string) {
	er.summariseOnePass(bc.PricePerHour[er.Engine])
	for si, s := range Stages {
		var v []float64
		for _, run := range er.Runs {
			v = append(v, run[si])
		}
		er.Stages[s] = median(v)
	}
	var totals []float64
	for _, run := range er.Runs {
		t := 0.0
		for _, x := range run {
			t += x
		}
		totals = append(totals, t)
	}
	er.Total = median(totals)
	if er.Pixels > 0 {
		er.PixelsPerSec = float64(er.Pixels) / (er.Stages["ingest"] + er.Stages["predict"])
	}
	if er.tiles > 0 && er.Total > 0 {
		er.TilesPerSec = float64(er.tiles) / er.Total
	}
	if s := er.Stages["ingest"]; s > 0 {
		er.MBPerSec = float64(er.BytesRead) / 1e6 / s
	}
	if p := bc.PricePerHour[er.Engine]; p > 0 && er.tiles > 0 {
		er.CostPerTile = p * er.Total / 3600 / float64(er.tiles)
		if rep.Inputs.Bytes > 0 {
			er.CostPer100GB = p * er.Total / 3600 * 100e9 / float64(rep.Inputs.Bytes)
		}
	}
	if bc.Repeat >= 2 {
		diffs := compareRuns(filepath.Join(scratch, er.Engine, "run1"), filepath.Join(scratch, er.Engine, "run2"))
		same := len(diffs) == 0
		er.Reproducible, er.Differences = &same, diffs
	}
}

// runOnePass runs the job as lulc run does, in one pass per tile, into
// dir: the same ingest and train configs, the model trained on the way.
func runOnePass(ctx context.Context, j engineJob, dir string) (pipeline.RunResult, error) {
	engine, icfg, tcfg, sub, gpu := j.engine, j.icfg, j.tcfg, j.sub, j.gpu
	o := sub(dir)
	if engine == "gpu" {
		o.GPUs = []*cuda.Device{gpu}
	}
	tc := tcfg
	tc.Engine = "lulc"
	return pipeline.Run(ctx, pipeline.Job{Config: pipeline.DefaultRunConfig(), Ingest: icfg, Train: &tc}, o)
}

// addOnePass records one one-pass run: its total and its breakdown.
func (er *EngineReport) addOnePass(res pipeline.RunResult) {
	er.OnePassRuns = append(er.OnePassRuns, res.Elapsed.Seconds())
	if er.OnePassStages == nil {
		er.OnePassStages = map[string]float64{}
	}
	var composite, sample, stream float64
	for _, t := range res.Tiles {
		composite += t.Composite.Seconds()
		sample += t.Sample.Seconds()
		stream += t.Predict.Stream.Seconds()
	}
	// Sums over repeats; summariseOnePass turns them into means.
	for k, v := range map[string]float64{"composite": composite, "sample": sample, "fit": res.Fit.Seconds(), "stream": stream, "wait": res.Wait.Seconds()} {
		er.OnePassStages[k] += v
	}
}

// summariseOnePass takes the median total and the mean breakdown over the
// repeats, and the cost per tile at the engine's price.
func (er *EngineReport) summariseOnePass(pricePerHour float64) {
	n := len(er.OnePassRuns)
	if n == 0 {
		return
	}
	er.OnePass = median(er.OnePassRuns)
	for k := range er.OnePassStages {
		er.OnePassStages[k] /= float64(n)
	}
	if pricePerHour > 0 && er.tiles > 0 {
		er.OnePassCost = pricePerHour * er.OnePass / 3600 / float64(er.tiles)
	}
}

// runOnce runs one repeat of the job for an engine and returns the
// seconds per stage (0 for stages the engine does not have).
func runOnce(ctx context.Context, j engineJob, dir string, er *EngineReport) ([]float64, error) {
	engine, icfg, tcfg, sub, gpu := j.engine, j.icfg, j.tcfg, j.sub, j.gpu
	times := make([]float64, len(Stages))
	o := sub(dir + "/stack")
	if engine == "gpu" {
		o.GPUs = []*cuda.Device{gpu}
	}
	t0 := time.Now()
	ir, err := ingest.Ingest(ctx, icfg, o)
	if err != nil {
		return nil, err
	}
	times[0] = time.Since(t0).Seconds()
	er.BytesRead = ir.DecodedBytes
	er.tiles, er.pixelsIn, er.dates = len(ir.Tiles), 0, 0
	for _, t := range ir.Tiles {
		er.pixelsIn += int64(t.Pixels)
		er.dates = max(er.dates, t.Dates)
	}
	stack := o.Out

	tc := tcfg
	tc.Input.Stack = stack
	tc.Engine = "lulc"
	o = sub(dir + "/train")
	if engine == "golearn" {
		tc.Engine, o.Golearn = "golearn", Golearn
	}
	if engine == "gpu" {
		o.GPUs = []*cuda.Device{gpu}
	}
	model := filepath.Join(o.Out, stage.ModelFile)
	t0 = time.Now()
	tr, err := train.Train(ctx, tc, o)
	if err != nil {
		return nil, err
	}
	times[1] = tr.Sample.Seconds()
	times[2] = time.Since(t0).Seconds() - times[1]
	er.Accuracy, er.Kappa, er.MacroF1 = tr.Metrics.Accuracy, tr.Metrics.Kappa, tr.Metrics.MacroF1
	if engine == "golearn" {
		return times, nil // golearn writes no lulc model: train only
	}

	o = sub(dir + "/predict")
	if engine == "gpu" {
		o.GPUs = []*cuda.Device{gpu}
	}
	t0 = time.Now()
	pr, err := predict.Predict(ctx, predict.Config{Model: model, Input: stack}, o)
	if err != nil {
		return nil, err
	}
	times[3] = time.Since(t0).Seconds()
	er.Pixels = 0
	for _, t := range pr.Tiles {
		er.Pixels += t.Pixels
	}

	t0 = time.Now()
	var oa float64
	for _, t := range pr.Tiles {
		ev, err := evaluate.Evaluate(ctx, t.Class, filepath.Join(stack, t.Tile, "labels.tif"), evaluate.DefaultConfig(), sub(dir+"/evaluate-"+t.Tile))
		if err != nil {
			return nil, err
		}
		oa += ev.Metrics.Accuracy / float64(len(pr.Tiles))
	}
	times[4] = time.Since(t0).Seconds()
	er.MapAccuracy = oa
	return times, nil
}

// compareRuns lists the outputs that differ between two runs of a job:
// models, samples, class maps and areas of applicability must be
// byte-identical.
func compareRuns(a, b string) []string {
	var diffs []string
	var files []string
	filepath.Walk(a, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			base := filepath.Base(p)
			if base == stage.ModelFile || base == stage.SamplesFile || base == stage.ClassFile || base == stage.AOAFile || base == "stack.tif" || base == "labels.tif" {
				rel, _ := filepath.Rel(a, p)
				files = append(files, rel)
			}
		}
		return nil
	})
	slices.Sort(files)
	for _, f := range files {
		x, err1 := os.ReadFile(filepath.Join(a, f))
		y, err2 := os.ReadFile(filepath.Join(b, f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			diffs = append(diffs, f)
		}
	}
	return diffs
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func hostInfo(version string) HostInfo {
	h := HostInfo{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Lulc: version, Go: runtime.Version(), GDAL: raster.GDALVersion()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	h.RAM = meminfo.Total()
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				h.OS += ", " + strings.Trim(v, `"`)
			}
		}
	}
	if devs, err := driver.Devices(); err == nil {
		h.GPU, h.GPUMem = devs[0].Name, devs[0].Memory
		h.Driver, _ = driver.DriverVersion()
	} else {
		h.GPUNote = err.Error()
	}
	return h
}

// describeInputs counts tiles, dates, bands and bytes of the catalog's
// scene that the ingest config selects.
func describeInputs(catalog string, icfg config.IngestConfig) Inputs {
	in := Inputs{Bands: len(icfg.Bands)}
	dir := filepath.Dir(catalog)
	h := sha256.New()
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			in.Bytes += info.Size()
			if strings.HasSuffix(p, ".json") {
				b, _ := os.ReadFile(p)
				h.Write(b)
			}
		}
		return nil
	})
	in.Digest = fmt.Sprintf("%x", h.Sum(nil))
	return in
}

// describeRasterInputs describes an ingest over source.rasters: one tile
// and one date per pair, the image grids' pixels, the files' sizes, and a
// digest over the files' SHA-256 sums (remote files: href and ETag).
func describeRasterInputs(ctx context.Context, icfg config.IngestConfig, opt stage.Options) (Inputs, error) {
	in := Inputs{Bands: len(icfg.Bands), Tiles: len(icfg.Source.Rasters), Dates: 1}
	h := sha256.New()
	for i, p := range icfg.Source.Rasters {
		for _, f := range []struct{ key, path string }{{"image", p.Image}, {"labels", p.Labels}} {
			a, err := ingest.DescribeRasterFile(ctx, opt, f.path)
			if err != nil {
				return in, fmt.Errorf("source.rasters[%d].%s: %w", i, f.key, err)
			}
			in.Bytes += a.Size
			if a.SHA256 != "" {
				fmt.Fprintln(h, a.SHA256)
			} else {
				fmt.Fprintln(h, a.Href, a.ETag)
			}
		}
		s, err := raster.Open(p.Image)
		if err != nil {
			return in, fmt.Errorf("source.rasters[%d].image: %w", i, err)
		}
		in.Pixels += int64(s.Width * s.Height)
		s.Close()
	}
	in.Digest = fmt.Sprintf("%x", h.Sum(nil))
	return in, nil
}
