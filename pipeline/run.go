package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/pixel/stack"
	"github.com/lulc/lulc/scale/shard"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"
)

// RunConfig describes a one-pass job (lulc run): where the tiles come from
// (an ingest config), how to train unless a model is given (a train
// config), how to predict, and which optional outputs to write.
type RunConfig struct {
	Ingest  string `yaml:"ingest"` // ingest config: a file, or an embedded config's name
	Train   string `yaml:"train"`  // train config (default: DefaultTrainConfig); not read when a model is given
	Predict struct {
		Window     int    `yaml:"window"`     // window side in pixels (default 1024)
		Confidence bool   `yaml:"confidence"` // also write confidence.tif
		Compress   string `yaml:"compress"`   // DEFLATE (default) or ZSTD
		// AOA: aoa.tif when the model has an area of applicability.
		AOA stage.AOAOptions `yaml:"aoa"`
	} `yaml:"predict"`
	Outputs struct {
		// Stack also writes each tile's analysis-ready stack, encoded
		// beside the compute, in the formats given (true or cog:
		// stack.tif, labels.tif, valid_count.tif; zarr: stack.zarr; or
		// both), with its manifest.json; nothing in the job reads it back.
		Stack config.StackFormats `yaml:"stack"`
	} `yaml:"outputs"`
	// MemoryGB bounds the composites held in memory while training waits
	// for every tile's samples (default 4); beyond it tiles are spilled
	// raw to disk and read back once. lulc run also asks Go's collector to
	// keep the heap within MemoryGB + 2 GB per tile mapped at once
	// (GOMEMLIMIT overrides).
	MemoryGB float64 `yaml:"memory_gb"`
	// TilesPerGPU is how many tiles each GPU works on at once (default
	// 1): with 2, one tile is read and composited on the CPU while
	// another is predicted on the device, at twice the host memory.
	TilesPerGPU int `yaml:"tiles_per_gpu"`
}

// HeapLimit is the soft limit on Go's heap a run on gpus GPUs (0: the
// CPU) asks for: the held composites' budget and 2 GB for each tile
// worked on at once (its windows in flight, its outputs' staging, the
// samples). Without it the collector lets the heap grow to twice what is
// live, and a full tile's run peaks near 14 GB of RSS; with 3 GB a tile,
// near 8; with 2, the windows' slices recycled, about 7.
func (c RunConfig) HeapLimit(gpus int) int64 {
	tiles := max(1, gpus*c.TilesPerGPU)
	return int64((c.MemoryGB + 2*float64(tiles)) * (1 << 30))
}

// ParseRunConfig decodes a run config strictly and fills its defaults.
func ParseRunConfig(raw []byte) (RunConfig, error) {
	var c RunConfig
	if err := configs.DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	if c.Ingest == "" {
		return c, errors.New("ingest: no ingest config named")
	}
	if c.MemoryGB < 0 {
		return c, fmt.Errorf("memory_gb: %g is negative", c.MemoryGB)
	}
	if c.TilesPerGPU < 0 || c.TilesPerGPU > 8 {
		return c, fmt.Errorf("tiles_per_gpu: %d is not between 1 and 8", c.TilesPerGPU)
	}
	if err := c.Predict.AOA.Check(); err != nil {
		return c, fmt.Errorf("predict.%w", err)
	}
	c.fillDefaults()
	return c, nil
}

// DefaultRunConfig is a run config with every default and no configs
// named, for callers that hold the ingest and train configs themselves.
func DefaultRunConfig() RunConfig {
	var c RunConfig
	c.fillDefaults()
	return c
}

func (c *RunConfig) fillDefaults() {
	if c.Predict.Window == 0 {
		c.Predict.Window = 1024
	}
	if c.Predict.Compress == "" {
		c.Predict.Compress = "DEFLATE"
	}
	if c.MemoryGB == 0 {
		c.MemoryGB = 4
	}
	if c.TilesPerGPU == 0 {
		c.TilesPerGPU = 1
	}
}

// Job is a resolved run: the run config with the ingest config it names,
// and either the train config or a model file.
type Job struct {
	Config RunConfig
	Ingest config.IngestConfig
	Train  *config.TrainConfig // nil when Model is set
	Model  string              // a model file: the job maps tiles without training
	// ModelHref, where Model is a local copy of an object (lulc run
	// --model s3://…), is the object's URL: report.json and the tiles'
	// items name it instead of the copy.
	ModelHref string
	// Shard, when its Count is set, makes this process one task of an
	// array job: it maps only the tiles shard.Assign gives its Index.
	Shard shard.Spec
	// Plan, when set, gives the tiles and their scenes instead of a
	// search of the ingest config's source (lulc plan).
	Plan *JobPlan
	// Phase PhaseSample makes the run the sample phase of a job that
	// trains over many tasks: it composites its tiles and writes their
	// draw (DrawFile), which lulc train merges with the other tasks'; it
	// trains and maps nothing. "" is the whole job.
	Phase string
	// KeepFinished keeps a complete, intact output of this same job at
	// the output path instead of refusing it, as an array task's is kept:
	// for an output that stands in for an object-storage prefix, where a
	// run that finished but was interrupted while it uploaded leaves one.
	KeepFinished bool
}

// modelHref is how the outputs name the given model.
func (j Job) modelHref() string {
	if j.ModelHref != "" {
		return j.ModelHref
	}
	return j.Model
}

// PhaseSample is the sample phase of a sharded job (Job.Phase).
const PhaseSample = "sample"

// hash identifies the job's resolved configs and the given model's bytes
// (modelBody, nil when the job trains), keying resumption.
func (j Job) hash(modelBody []byte) string {
	h := sha256.New()
	b, _ := json.Marshal(j.Config)
	h.Write(b)
	h.Write([]byte(j.Ingest.Hash()))
	if j.Train != nil {
		h.Write([]byte(j.Train.Hash()))
	}
	if modelBody != nil {
		h.Write(stage.SHA256(modelBody))
	}
	// The task count, not the index: every task of a job has one hash,
	// which lulc collect checks.
	if j.Shard.Count > 0 {
		h.Write([]byte(fmt.Sprintf("shards %d", j.Shard.Count)))
	}
	if j.Plan != nil {
		h.Write([]byte("plan " + j.Plan.Digest))
	}
	if j.Phase != "" {
		h.Write([]byte("phase " + j.Phase))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// collectionID names the job's STAC collection after what its maps are
// made from and how: the ingest config, the train config or the given
// model's bytes, and the predict and output settings. Settings that leave
// the outputs as they are (memory, lanes, a plan instead of a search, the
// task count) leave it too, so that every task of an array job, and the
// same job run in one process, name one collection.
func (j Job) collectionID(modelBody []byte) string {
	key := "run " + j.Ingest.Hash()
	if j.Train != nil && modelBody == nil {
		key += " train " + j.Train.Hash()
	}
	if modelBody != nil {
		key += fmt.Sprintf(" model %x", stage.SHA256(modelBody))
	}
	b, _ := json.Marshal(struct {
		Predict, Outputs any
	}{j.Config.Predict, j.Config.Outputs})
	return stage.CollectionID("lulc-", key+" "+string(b))
}

// RunResult summarises a run.
type RunResult struct {
	Dir     string
	Model   string        // the model that mapped the tiles
	Train   *train.Result // when the job trained
	Tiles   []RunTile
	Elapsed time.Duration
	// DeviceBusy is the time the GPUs' goroutines computed (composite,
	// features, training, prediction) over the whole job, summed over the
	// GPUs; Devices says it per GPU.
	DeviceBusy time.Duration
	Devices    []DeviceUse
	GPU        bool
	// PeakRSS is the process's peak resident memory when the run ended.
	PeakRSS int64
	// Fit is the training's wall time (binning, fit, validation); Wait the
	// time the job waited at its end for outputs still encoding.
	Fit, Wait time.Duration
	// FirstMap and PerTileAfter split the run's time over the tiles it
	// mapped, when it mapped two or more (0 otherwise; kept tiles do not
	// count): the time until the first map (the process's start, the
	// first composite, a training run's draw and fit, the first stream),
	// and the span from the first map to the last over the tiles after
	// the first, the steady state of a long job.
	FirstMap, PerTileAfter time.Duration
}

// DeviceUse is how long one GPU computed during a run.
type DeviceUse struct {
	Index int
	Name  string
	Busy  time.Duration
}

// RunTile is one tile's outcome and where its time went. Times summed over
// workers say so; the others are wall time.
type RunTile struct {
	Tile    string `json:"tile"`
	Skipped bool   `json:"skipped,omitempty"` // finished by an earlier run and verified
	Dates   int    `json:"dates"`
	Pixels  int64  `json:"pixels"`
	// Device mapped the tile: "cpu" or "gpu:N".
	Device string            `json:"device,omitempty"`
	Ingest ingest.StageTimes `json:"-"`
	// Composite is the wall time of reading and compositing the tile.
	Composite time.Duration `json:"-"`
	// Composited and Predicted are when, since the run began, the tile's
	// composite was complete and its map predicted (0 for a tile kept
	// from an earlier run).
	Composited, Predicted time.Duration   `json:"-"`
	Predict               predict.Tile    `json:"-"`
	Sample                time.Duration   `json:"-"`
	Metrics               *forest.Metrics `json:"metrics,omitempty"` // the map against the tile's labels
	// Radiometry warns when the tile's dark levels differ from the
	// model's training data's (package radiometry).
	Radiometry string `json:"radiometry_warning,omitempty"`
	// AOAOutside is the percentage of the tile's pixels outside the
	// model's area of applicability (when aoa.tif is written), with a
	// warning above AOAWarnPercent.
	AOAOutside *float64 `json:"aoa_outside_percent,omitempty"`
	AOAWarning string   `json:"aoa_warning,omitempty"`
	// Outside counts, by code, the tile's labelled pixels whose code is
	// outside the train config's scheme (and not remapped into it): they
	// are neither sampled nor evaluated.
	Outside map[uint8]int64    `json:"labels_outside_scheme,omitempty"`
	Seconds map[string]float64 `json:"seconds"`
}

// Run maps every tile of the job in one pass over its pixels. Each tile is
// read and composited once into memory (stack.Tile); sampling, prediction
// and evaluation read that composite, so the stack is never encoded and
// decoded between stages. Without a model the job first ingests and
// samples every tile, trains into OUT/model, then maps the tiles it held
// (in memory up to memory_gb, spilled raw beyond). Outputs per tile land in
// OUT/<tile>/: the class map and its companions as lulc predict writes
// them, metrics.json from the labels, and with outputs.stack the stack as
// lulc ingest writes it. The stages are the ones the separate commands run,
// so the maps equal theirs.
func Run(ctx context.Context, job Job, opt stage.Options) (RunResult, error) {
	opt.Fill()
	start := time.Now()
	if err := job.validate(); err != nil {
		return RunResult{}, err
	}
	if err := atomicfs.CheckInputs(opt.Out, append(append(job.Ingest.Inputs(), job.Model), opt.Inputs...)...); err != nil {
		return RunResult{}, err
	}
	// A given model is read once, and a bad one fails before any work.
	var model *forest.Model
	var modelBody []byte
	if job.Model != "" {
		var err error
		if model, modelBody, err = predict.LoadModel(job.Model); err != nil {
			return RunResult{}, err
		}
	}
	var tiles []ingest.SourceTile
	var err error
	if job.Plan != nil {
		tiles, err = job.Plan.tiles(ctx, job.Ingest, opt)
	} else {
		tiles, err = ingest.Locate(ctx, job.Ingest, opt)
	}
	if err != nil {
		return RunResult{}, err
	}
	if job.Train != nil && (job.Train.Classes.Scheme == "labels" || job.Train.Classes.Scheme == "auto") {
		// The scheme of the tiles' labels: their label items', or their
		// text classes'.
		schemes := make([]*landcover.Scheme, len(tiles))
		for i, t := range tiles {
			schemes[i] = t.LabelScheme(job.Ingest)
		}
		tc := *job.Train
		if err := tc.ResolveLabels(schemes); err != nil {
			return RunResult{}, err
		}
		job.Train = &tc
	}
	hash := job.hash(modelBody)
	// The job's tiles, before sharding: their order numbers the inputs of
	// the draw, whichever task draws them.
	all := tiles
	if job.Shard.Count > 0 {
		tiles = job.shardTiles(tiles, opt)
	}
	if job.Shard.Count > 0 || job.KeepFinished {
		// An array task may run again after it finished (a retry, a
		// requeue): a complete, intact output of the same task is kept.
		if !opt.Force {
			res, done, err := completedTask(opt.Out, hash, job.Phase, all, tiles, opt)
			if err != nil || done {
				return res, err
			}
			opt.Force = atomicfs.Exists(opt.Out)
		}
	}
	staging, err := atomicfs.Begin(ctx, opt.Out, opt.Force, opt.BreakLock, "run "+hash)
	if err != nil {
		return RunResult{}, err
	}
	defer staging.Release()
	r := &runner{start: start, job: job, hash: hash, collectionID: job.collectionID(modelBody), opt: opt, stage: staging, model: model, held: map[string]*stack.Tile{}, heldMirrors: map[string]*cuda.Mirror{}, manifests: map[string]stage.Manifest{}, steps: map[string]*sync.Mutex{}}
	res := RunResult{Dir: staging.Final, Model: job.modelHref(), GPU: len(opt.GPUs) > 0}
	busy0 := make([]time.Duration, len(opt.GPUs))
	for i, d := range opt.GPUs {
		busy0[i] = d.Busy()
	}
	if job.Phase == PhaseSample {
		err = r.draw(ctx, all, tiles, &res)
	} else {
		err = r.run(ctx, tiles, &res)
	}
	t0 := time.Now()
	if werr := r.wait(); err == nil {
		err = werr
	}
	res.Wait = time.Since(t0)
	r.mark("background work finished", "")
	for i := range res.Tiles {
		res.Tiles[i].Seconds = res.Tiles[i].stageSeconds()
	}
	res.FirstMap, res.PerTileAfter = steady(res.Tiles)
	res.PeakRSS, res.Fit = PeakRSS(), r.fitWall
	for i, d := range opt.GPUs {
		use := DeviceUse{Index: d.Index, Name: d.Name, Busy: d.Busy() - busy0[i]}
		res.Devices = append(res.Devices, use)
		res.DeviceBusy += use.Busy
	}
	r.dropSpills()
	r.dropMirrors()
	if err != nil {
		return res, err
	}
	if job.Phase != PhaseSample {
		if err := r.writeCatalog(res.Tiles); err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
	if err := r.writeJob(res); err != nil {
		return res, err
	}
	if err := staging.Commit(); err != nil {
		return res, err
	}
	return res, nil
}

// completedTask looks at an array task's existing output dir: done when
// it holds this job's report and every file matches its commit record
// (TaskCommitFile; the result then lists the tiles as skipped); not
// done, with no error, when a file is missing, differs or is not in the
// record (logged, naming it), so that the task maps again from scratch;
// an error when the directory holds another job's output. A sample
// phase's task is done when its draw is intact and drew exactly
// its tiles (mine, of the job's all).
func completedTask(dir, hash, phase string, all, tiles []ingest.SourceTile, opt stage.Options) (RunResult, bool, error) {
	if !atomicfs.Exists(dir) {
		return RunResult{}, false, nil
	}
	rep, err := readRunReport(dir)
	if err != nil {
		opt.Log.Warn("the task's output has no readable report: mapping again", "dir", dir, "why", err)
		return RunResult{}, false, nil
	}
	// The hash covers the task count: equal hashes are both tasks of one
	// job or both whole jobs.
	if rep.Job != hash {
		return RunResult{}, false, fmt.Errorf("output %s holds another job's run (use --force to replace it)", dir)
	}
	// Every file the task wrote must match its commit record.
	c, err := readTaskCommit(dir)
	if err == nil {
		err = verifyTask(dir, c, rep.Job)
	}
	if err != nil {
		opt.Log.Warn("the finished task's output does not match its commit record: mapping the task again", "dir", dir, "why", err)
		return RunResult{}, false, nil
	}
	res := RunResult{Dir: dir, Model: rep.Model, GPU: rep.GPU}
	if phase == PhaseSample {
		d, err := train.ReadDraw(filepath.Join(dir, stage.DrawFile))
		if err == nil {
			err = drewTiles(d, all, tiles)
		}
		if err != nil {
			opt.Log.Warn("the task's draw is missing, damaged or of other tiles: drawing again", "dir", dir, "why", err)
			return RunResult{}, false, nil
		}
	}
	for _, t := range tiles {
		if phase == PhaseSample {
			break
		}
		if !c.lists(t.Name()+"/"+TileRecordFile) || !c.lists(t.Name()+"/"+stage.ClassFile) {
			opt.Log.Warn("a tile of the finished task is missing from its commit record: mapping the task again", "tile", t.Name())
			return RunResult{}, false, nil
		}
	}
	for _, rt := range rep.Tiles {
		rt.Skipped = true
		res.Tiles = append(res.Tiles, rt)
	}
	opt.Log.Info("task already complete: its tiles are intact", "dir", dir, "tiles", len(res.Tiles))
	return res, true, nil
}

// drewTiles checks that a draw is of the tiles mine of the job's all: the
// same inputs, numbered by their places among all.
func drewTiles(d *sampleset.Set, all, mine []ingest.SourceTile) error {
	if d.Draw.Total != len(all) {
		return fmt.Errorf("a draw of a job of %d tiles, this one has %d", d.Draw.Total, len(all))
	}
	var want []int
	var names []string
	for i, t := range all {
		if slices.ContainsFunc(mine, func(m ingest.SourceTile) bool { return m.Name() == t.Name() }) {
			want, names = append(want, i), append(names, t.Name())
		}
	}
	if !slices.Equal(d.Draw.Inputs, want) || !slices.Equal(d.Sources, names) {
		return fmt.Errorf("drew tiles %v (%v), the task has %v (%v)", d.Sources, d.Draw.Inputs, names, want)
	}
	return nil
}

// readRunReport reads a run directory's report.json; one without a job
// hash (cut short, or written by an older lulc) is refused.
func readRunReport(dir string) (runReport, error) {
	var rep runReport
	body, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	if err == nil && rep.Job == "" {
		err = fmt.Errorf("%s: no job hash", filepath.Join(dir, "report.json"))
	}
	return rep, err
}

// shardTiles keeps the tiles that the job's shard maps.
func (j Job) shardTiles(tiles []ingest.SourceTile, opt stage.Options) []ingest.SourceTile {
	all := make([]shard.Tile, len(tiles))
	for i, t := range tiles {
		all[i] = shard.Tile{Name: t.Name(), Scenes: t.Dates()}
	}
	mine := shard.Assign(all, j.Shard.Count)[j.Shard.Index]
	var out []ingest.SourceTile
	for _, t := range tiles {
		if slices.Contains(mine, t.Name()) {
			out = append(out, t)
		}
	}
	opt.Log.Info("this task's tiles", "shard", j.Shard.String(), "tiles", len(out), "of", len(tiles), "names", mine)
	return out
}

func (j Job) validate() error {
	if err := j.Ingest.Validate(); err != nil {
		return fmt.Errorf("ingest config: %w", err)
	}
	if (j.Train == nil) == (j.Model == "") {
		return errors.New("a run trains (a train config) or maps with a model (--model), not both or neither")
	}
	if j.Phase != "" && j.Phase != PhaseSample {
		return fmt.Errorf("phase %q: the only phase is %s (without one, a run is the whole job)", j.Phase, PhaseSample)
	}
	if j.Phase == PhaseSample && j.Train == nil {
		return errors.New("phase sample: the sample phase draws for a train config, not with a model")
	}
	if j.Shard.Count > 0 && j.Model == "" && j.Phase == "" {
		return fmt.Errorf("shard %s: a sharded run maps with a model (--model), or draws samples (--phase sample) for lulc train to merge", j.Shard)
	}
	if j.Train != nil {
		if err := j.Train.ValidateTraining(); err != nil {
			return fmt.Errorf("train config: %w", err)
		}
		if j.Train.Engine != "lulc" {
			return fmt.Errorf("train config: engine %s: lulc run maps with the model it trains, and only the lulc engine writes one", j.Train.Engine)
		}
	}
	pc := j.Config.Predict
	if pc.Window%512 != 0 || pc.Window < 512 || pc.Window > 8192 {
		return fmt.Errorf("predict.window: %d is not a multiple of 512 between 512 and 8192", pc.Window)
	}
	if pc.Compress != "DEFLATE" && pc.Compress != "ZSTD" {
		return fmt.Errorf("predict.compress: %q is not DEFLATE or ZSTD", pc.Compress)
	}
	return nil
}

// runner carries a run's state: the tiles held between phases and the
// outputs still being encoded in the background.
type runner struct {
	job  Job
	hash string // the job's, recorded in report.json
	// collectionID is the id of the job's STAC collection, also recorded
	// in report.json for lulc collect.
	collectionID string
	opt          stage.Options
	stage        *atomicfs.Stage
	fitWall      time.Duration
	start        time.Time     // the run's start, for the timeline's debug lines
	model        *forest.Model // the given model; nil until trained otherwise

	// mu guards what lanes computing tiles at once share.
	mu   sync.Mutex
	held map[string]*stack.Tile // composites kept for the map phase
	// heldMirrors are held composites' device copies (their draws'
	// mirrors), which their maps read the windows from (keepMirror).
	heldMirrors map[string]*cuda.Mirror
	heldBytes   int64
	spilled     []string
	manifests   map[string]stage.Manifest
	steps       map[string]*sync.Mutex // per engine and step of mapping a tile

	bg     sync.WaitGroup
	bgMu   sync.Mutex
	bgErrs []error

	// tileCount: the map phase shows a count of tiles, not the tiles' bars.
	tileCount bool
}

// run trains if the job has no model, then maps every tile.
func (r *runner) run(ctx context.Context, tiles []ingest.SourceTile, res *RunResult) error {
	res.Tiles = make([]RunTile, len(tiles))
	for i, t := range tiles {
		res.Tiles[i] = RunTile{Tile: t.Name(), Dates: t.Dates(), Seconds: map[string]float64{}}
	}
	modelFile, model := r.job.Model, r.model
	if model == nil {
		var err error
		if res.Train, model, err = r.train(ctx, tiles, res.Tiles); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		res.Model = filepath.Join(r.stage.Final, "model", stage.ModelFile)
		modelFile = res.Model
	}
	if err := model.Check(model.Features, r.job.Ingest.StackPlanes()); err != nil {
		return fmt.Errorf("model %s: %w", modelFile, err)
	}
	if model.Scale != stage.StackScale || model.Offset != stage.StackOffset {
		return fmt.Errorf("model %s: trained on reflectance = DN × %g + %g, the run's stacks are × %g + %g", modelFile, model.Scale, model.Offset, stage.StackScale, stage.StackOffset)
	}
	scheme, err := predict.ModelScheme(model)
	if err != nil {
		return err
	}
	// Items link the model they came from by a path relative to them (the
	// run's own model where the output will be), so that the tree can move.
	modelPath := r.job.modelHref()
	if modelPath == "" {
		modelPath = filepath.Join(r.stage.Final, "model", stage.ModelFile)
	}
	// Several tiles are counted as they are mapped, with the time left at
	// that pace, in place of each tile's own bars (which would draw over
	// the count).
	bar := progress.Bar(progress.Nop{})
	if len(tiles) > 1 {
		bar, r.tileCount = r.opt.NewBar(int64(len(tiles)), "run: tiles mapped"), true
	}
	err = r.eachTile(ctx, tiles, func(ctx context.Context, lane stage.Options, i int) error {
		if err := r.mapTile(ctx, lane, tiles[i], model, modelPath, scheme, &res.Tiles[i]); err != nil {
			return err
		}
		return bar.Add(1)
	})
	bar.Finish()
	return err
}

// lanes are the options tiles are computed with at once: tiles_per_gpu
// lanes per GPU, each holding that device alone (in turn over the GPUs,
// so that the first tiles go to different ones), or one on the CPU (a
// tile's windows already keep every core busy; tests ask for more, to run
// the lanes' concurrency without a GPU).
// Progress bars are left out when several lanes would draw over each
// other.
func (r *runner) lanes() []stage.Options {
	var out []stage.Options
	for range max(1, r.job.Config.TilesPerGPU) {
		for _, d := range r.opt.GPUs {
			o := r.opt
			o.GPUs = []*cuda.Device{d}
			// Each GPU's lanes work their windows on its share of the
			// cores: with every lane on all of them, the composites of
			// two GPUs ran twice as many busy goroutines as cores, and
			// the devices' owner goroutines, back from each driver call,
			// waited for a core behind them.
			if n := len(r.opt.GPUs); n > 1 && !r.opt.Compare.LaneAllCores {
				o.Workers = max(1, r.opt.Workers/n)
			}
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		for range max(1, r.opt.Hooks.CpuLanes) {
			out = append(out, r.opt)
		}
	}
	if len(out) > 1 || r.tileCount {
		for i := range out {
			out[i].NewBar = nil
			out[i].Fill()
		}
	}
	return out
}

// step takes the lane's engine's turn at a step of mapping a tile (one
// lane of an engine at a time per step), returning its release.
func (r *runner) step(lane stage.Options, name string) func() {
	key := laneName(lane) + " " + name
	r.mu.Lock()
	m, ok := r.steps[key]
	if !ok {
		m = &sync.Mutex{}
		r.steps[key] = m
	}
	r.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// laneName names a lane's engine in the report: "cpu" or "gpu:N".
func laneName(o stage.Options) string {
	return o.Engine().Name()
}

// eachTile calls f on every tile index, as many at once as there are
// lanes, each call with a lane to itself. The first error stops the
// tiles not yet begun and is returned, naming its tile.
func (r *runner) eachTile(ctx context.Context, tiles []ingest.SourceTile, f func(ctx context.Context, lane stage.Options, i int) error) error {
	lanes := r.lanes()
	free := make(chan stage.Options, len(lanes))
	for _, l := range lanes {
		free <- l
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range tiles {
		var lane stage.Options
		select {
		case lane = <-free:
		case <-gctx.Done():
		}
		// A lane and the end may both be ready, and select picks either:
		// the end is looked at after. Either a tile failed (its error is
		// g.Wait's) or the run was interrupted, when the tiles not begun
		// must not pass for done.
		if gctx.Err() != nil {
			if err := g.Wait(); err != nil {
				return err
			}
			return ctx.Err()
		}
		g.Go(func() error {
			defer func() { free <- lane }()
			if err := f(gctx, lane, i); err != nil {
				return fmt.Errorf("tile %s: %w", t.Name(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// composite reads and composites a tile once into memory, writing its
// stack COGs beside it when the job asks for them (encoded in the
// background, so that compute goes on).
func (r *runner) composite(ctx context.Context, opt stage.Options, t ingest.SourceTile, rt *RunTile) (*stack.Tile, error) {
	mem, _, err := r.compositeMirrored(ctx, opt, t, rt, false)
	return mem, err
}

// compositeMirrored is composite that, with mirror and a device, keeps the
// composite in the device's memory too (a cuda.Mirror, for the draw of
// the tile's samples on the device; the caller closes it).
func (r *runner) compositeMirrored(ctx context.Context, opt stage.Options, t ingest.SourceTile, rt *RunTile, mirror bool) (mem *stack.Tile, dm *cuda.Mirror, err error) {
	cfg := r.job.Ingest
	grid, err := t.Plan(cfg)
	if err != nil {
		return nil, nil, err
	}
	mem = stack.New(t.Name(), grid, cfg.StackPlanes(), stage.StackScale, stage.StackOffset)
	if dm, err = r.compositeInto(ctx, opt, t, rt, grid, mem, mirror, nil, nil); err != nil {
		return nil, nil, err
	}
	return mem, dm, nil
}

// compositeInto composites a tile planned on grid into mem (and a device
// mirror, with mirror), recording its manifest. into, when not nil, is a
// mirror the caller made and closes, which the composite fills too.
// composited, when not nil, is called once the windows are made, before
// the manifest (whose sources' sizes a remote catalog answers one request
// at a time).
func (r *runner) compositeInto(ctx context.Context, opt stage.Options, t ingest.SourceTile, rt *RunTile, grid geo.Grid, mem *stack.Tile, mirror bool, into *cuda.Mirror, composited func()) (dm *cuda.Mirror, err error) {
	cfg := r.job.Ingest
	hist := radiometry.NewHistogram(len(cfg.Bands), stage.StackScale, stage.StackOffset)
	sinks := []ingest.TileSink{mem, hist}
	if into != nil {
		sinks = append(sinks, stage.MirrorSink{Mirror: into})
	}
	if mirror {
		if dm, err = opt.Engine().Mirror(grid, len(cfg.StackPlanes())); err != nil {
			return nil, err
		}
		if m := dm; m != nil {
			sinks = append(sinks, stage.MirrorSink{Mirror: m})
			defer func() {
				if err != nil {
					m.Close()
				}
			}()
		}
	}
	dir, err := stage.TileDir(r.stage, t.Name())
	if err != nil {
		return nil, err
	}
	var tw *ingest.StackWriters
	if r.job.Config.Outputs.Stack.Any() && !atomicfs.Exists(filepath.Join(dir, "manifest.json")) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if tw, err = ingest.NewStackWriters(dir, grid, cfg, r.job.Config.Outputs.Stack, t.LabelScheme(cfg), false, opt.Compare.GDALCOG); err != nil {
			return nil, err
		}
		sinks = append(sinks, tw.Sinks()...)
	}
	t0 := time.Now()
	stats, err := t.Composite(ctx, cfg, opt, sinks...)
	rt.Ingest, rt.Pixels, rt.Composite = stats.Timings, int64(stats.Pixels), rt.Composite+time.Since(t0)
	rt.Composited = time.Since(r.start)
	r.mark("composited", t.Name())
	if composited != nil {
		composited()
	}
	if err != nil {
		if tw != nil {
			tw.Abort()
		}
		return nil, err
	}
	m, err := t.Manifest(ctx, cfg, opt, stats.NoValid)
	if err != nil {
		if tw != nil {
			tw.Abort()
		}
		return nil, err
	}
	m.SetDark(cfg.Bands, hist.Dark(), opt)
	m.LabelScheme = stage.RecordScheme(t.LabelScheme(cfg))
	r.mu.Lock()
	r.manifests[t.Name()] = m
	r.mu.Unlock()
	if tw != nil {
		r.background(func() error {
			if err := tw.CloseCOG(); err != nil {
				return err
			}
			known, err := tw.Close(m)
			if err != nil {
				return err
			}
			return ingest.WriteTileManifest(dir, m, known)
		})
	}
	return dm, nil
}

// compositeBeside starts compositing a tile planned on grid into mem and
// returns at once: the tile (in.Mem) is being filled, and its prediction
// reads each window as the window's rows become whole. m is what is known
// of the tile before its composite: its grid, planes and encoding;
// in.Composited waits for the composite's end and gives its whole
// manifest. done (the lane's composite turn) is called once the windows
// are made, before the manifest, or when the composite fails. stop stops the composite if it is still going and
// waits for it: the caller calls it before it returns, whatever happened.
func (r *runner) compositeBeside(ctx context.Context, opt stage.Options, t ingest.SourceTile, rt *RunTile, grid geo.Grid, mem *stack.Tile, dm *cuda.Mirror, done func()) (in predict.Input, m stage.Manifest, stop func()) {
	cfg := r.job.Ingest
	mem.StartFilling(len(cfg.StackPlanes()) - len(cfg.Layers))
	cctx, cancel := context.WithCancel(ctx)
	end := make(chan error, 1)
	// The prediction's bar shows the tile's progress: a second bar
	// beside it would draw over it.
	copt := opt
	copt.NewBar = nil
	copt.Fill()
	var turn sync.Once
	release := func() { turn.Do(done) }
	go func() {
		_, err := r.compositeInto(cctx, copt, t, rt, grid, mem, false, dm, release)
		mem.EndFilling(err)
		release()
		end <- err
	}()
	var once sync.Once
	var cerr error
	wait := func() error {
		once.Do(func() { cerr = <-end; cancel() })
		return cerr
	}
	in = predict.Input{Mem: mem, Mirror: dm, Composited: func(streamErr error) (stage.Manifest, error) {
		if streamErr != nil {
			cancel()
		}
		if err := wait(); err != nil {
			return stage.Manifest{}, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.manifests[t.Name()], nil
	}}
	m = stage.Manifest{Tile: t.Name(), Grid: stage.ManifestGrid{EPSG: grid.EPSG, Transform: grid.Transform, Width: grid.Width, Height: grid.Height},
		Bands: cfg.StackPlanes(), Scale: stage.StackScale, Offset: stage.StackOffset}
	return in, m, func() {
		cancel()
		wait()
		if dm != nil {
			// Every window's pass and composite has ended: the next
			// tile of the lanes takes the mirror.
			dm.Recycle()
		}
	}
}

// background runs an output's encoding beside the compute; wait collects
// the errors.
func (r *runner) background(f func() error) {
	r.bg.Go(func() {
		if err := f(); err != nil {
			r.bgMu.Lock()
			r.bgErrs = append(r.bgErrs, err)
			r.bgMu.Unlock()
		}
	})
}

// mark logs, at debug level, a step of the run's timeline: seconds since
// the run began, the process's minor page faults so far and the memory
// Go's runtime has mapped, to find where a tile's wall time goes.
func (r *runner) mark(step, tile string) {
	if !r.opt.Log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	// Faults say what a step waited on the host for: a first tile's
	// composite faults in most of the heap.
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var heap [1]metrics.Sample
	heap[0].Name = "/memory/classes/total:bytes"
	metrics.Read(heap[:])
	r.opt.Log.Debug("run timeline", "step", step, "tile", tile, "at_s", time.Since(r.start).Seconds(),
		"page_faults", ru.Minflt, "go_memory_mb", heap[0].Value.Uint64()>>20)
}

func (r *runner) wait() error {
	r.bg.Wait()
	return errors.Join(r.bgErrs...)
}

// train composites and samples every tile, holding the composites for the
// map phase, and fits the model into OUT/model. A model left complete by
// an interrupted run of the same job is kept.
func (r *runner) train(ctx context.Context, tiles []ingest.SourceTile, rts []RunTile) (*train.Result, *forest.Model, error) {
	cfg := r.job.trainConfig()
	dir := r.stage.Path("model")
	if atomicfs.Exists(filepath.Join(dir, "run.json")) {
		r.opt.Log.Info("model already trained by an interrupted run", "dir", dir)
		model, _, err := predict.LoadModel(filepath.Join(dir, stage.ModelFile))
		return nil, model, err
	}
	if r.job.Train.Input.Stack != "" || len(r.job.Train.Input.Rasters) > 0 {
		r.opt.Log.Info("the train config's input is not used: lulc run trains on its own tiles")
	}
	scheme, _ := cfg.Scheme()
	sp := sampling.New(cfg.SamplingConfig(), cfg.Features, scheme, r.opt.Engine().Features)
	t0 := time.Now()
	index := make([]int, len(tiles))
	for i := range index {
		index[i] = i
	}
	ins, err := r.sampleTiles(ctx, tiles, rts, index, sp, true)
	if err != nil {
		return nil, nil, err
	}
	set, _, err := sp.Finish()
	if err != nil {
		return nil, nil, err
	}
	r.mark("samples drawn, features computed", "")
	set.Config = cfg.SampleKey()
	// The model's directory is staged beside it and appears whole. Its
	// samples file, a third of a gigabyte for a full tile, is written while
	// the forest grows: it needs nothing of the fit, which only reads the
	// samples too.
	tmp := r.stage.Path(".model.partial")
	if err := os.RemoveAll(tmp); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, nil, err
	}
	samplesWritten := make(chan bool, 1)
	r.background(func() error {
		// An interrupted run stops before the file (a third of a gigabyte
		// to encode and sync): its rerun draws the samples again.
		var body []byte
		err := ctx.Err()
		if err == nil {
			body, err = set.Encode()
		}
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = atomicfs.WriteFile(filepath.Join(tmp, stage.SamplesFile), body)
		}
		samplesWritten <- err == nil
		return err
	})
	census := sp.Census()
	res := &train.Result{Dir: filepath.Join(r.stage.Final, "model"), Engine: cfg.Engine, Sample: time.Since(t0), Warnings: sp.Warnings(), Census: &census}
	for _, c := range scheme.Classes {
		res.ClassNames = append(res.ClassNames, c.Name)
	}
	t1 := time.Now()
	model, err := train.FitAndMeasure(ctx, cfg, scheme, set, ins, r.opt, res)
	if err != nil {
		return nil, nil, err
	}
	r.fitWall = time.Since(t1)
	// fitAndMeasure logged the warnings as they came.
	r.mark("fitted and validated", "")
	// The tiles are mapped with the model in memory while its files are
	// written; the model directory appears whole, so a run interrupted
	// before it fits again.
	r.background(func() error {
		if err := train.WriteTrainOutputs(cfg, set, ins, model, r.opt, tmp, *res); err != nil {
			return err
		}
		if !<-samplesWritten {
			return nil // the samples' writer reports its own failure
		}
		return os.Rename(tmp, dir)
	})
	return res, model, nil
}

// sampleTiles composites the tiles, as many at once as there are lanes,
// and adds each to sp as the job's input index[i], in the tiles' order
// (which fixes the sample set whatever the lanes). With hold the
// composites are kept for the map phase.
func (r *runner) sampleTiles(ctx context.Context, tiles []ingest.SourceTile, rts []RunTile, index []int, sp *sampling.Sampler, hold bool) ([]train.Input, error) {
	var ins []train.Input
	nl := len(r.lanes())
	for g0 := 0; g0 < len(tiles); g0 += nl {
		group := tiles[g0:min(g0+nl, len(tiles))]
		mems := make([]*stack.Tile, len(group))
		mirrors := make([]*cuda.Mirror, len(group))
		release := func() {
			for k, m := range mirrors {
				if m != nil {
					m.Close()
					mirrors[k] = nil
				}
			}
		}
		err := r.eachTile(ctx, group, func(ctx context.Context, lane stage.Options, k int) error {
			var err error
			mems[k], mirrors[k], err = r.compositeMirrored(ctx, lane, group[k], &rts[g0+k], true)
			return err
		})
		if err != nil {
			release()
			return nil, err
		}
		// The group's tiles are drawn at once, each on its lane's device
		// (or all cores): the sampler merges them in whatever order they
		// finish, with the same result.
		drawn := make([]train.Input, len(group))
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for k, mem := range mems {
			wg.Go(func() {
				drawn[k], errs[k] = r.sampleTile(sp, mem, mirrors[k], index[g0+k], &rts[g0+k])
				if mirrors[k] != nil && !hold {
					// The samples are drawn: the device needs the tile no more.
					mirrors[k].Close()
					mirrors[k] = nil
				}
			})
		}
		wg.Wait()
		for k, mem := range mems {
			err := errs[k]
			if err == nil && hold {
				err = r.hold(mem)
			}
			if err != nil {
				release()
				return nil, fmt.Errorf("tile %s: %w", group[k].Name(), err)
			}
			if mirrors[k] != nil && r.keepMirror(mem.Name, mirrors[k]) {
				mirrors[k] = nil // the tile's map takes it
			}
			ins = append(ins, drawn[k])
		}
		release() // the mirrors not kept
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return ins, nil
}

// sampleTile draws a tile's samples from its composite, as the job's
// input number index: on the device that holds its mirror (when not
// nil), else on every core.
func (r *runner) sampleTile(sp *sampling.Sampler, mem *stack.Tile, mirror *cuda.Mirror, index int, rt *RunTile) (train.Input, error) {
	zero := 0.0
	r.mu.Lock()
	dark, layers := r.manifests[mem.Name].Dark, r.manifests[mem.Name].FeatureLayers()
	r.mu.Unlock()
	in := train.Input{Image: mem.Name, Labels: mem.Name, Bands: mem.Bands, Layers: layers, Scale: mem.Scale, Offset: mem.Offset, Nodata: &zero, Mem: mem, InMemory: true, Darks: []radiometry.Levels{dark}}
	ts := time.Now()
	si, err := in.SampleInput()
	if err != nil {
		return in, err
	}
	switch {
	case mirror != nil && r.job.Train.Sampling.Split == sampling.SplitFeatures:
		// The device's passes split by blocks: a split by features is
		// drawn on every core, the same function.
		r.opt.Log.Debug("draw on the host: the device's passes split by blocks, not by features", "tile", mem.Name)
	case mirror != nil && mem.Weights != nil:
		// The device's passes key pixels unweighted: a tile with pixel
		// weights is drawn on every core, the same function.
		r.opt.Log.Debug("draw on the host: the device's passes do not weight pixels", "tile", mem.Name)
	case mirror != nil:
		si.Passes = stage.DevicePasses{Mirror: mirror}
	}
	if err := sp.AddAt(si, index); err != nil {
		return in, err
	}
	rt.Outside = sp.OutsideOf(mem.Name)
	rt.Sample = time.Since(ts)
	r.mark("candidates drawn", mem.Name)
	// The samples are drawn: fitting needs none of the pixels, and a
	// spilled tile must not stay referenced.
	in.Mem = nil
	return in, nil
}

// draw is the sample phase (PhaseSample): it composites this task's tiles
// (mine, of the job's all) and writes their draw into DrawFile, each tile
// numbered by its place among all, for lulc train to merge with the
// other tasks' draws.
func (r *runner) draw(ctx context.Context, all, mine []ingest.SourceTile, res *RunResult) error {
	res.Tiles = make([]RunTile, len(mine))
	index := make([]int, len(mine))
	for i, t := range mine {
		res.Tiles[i] = RunTile{Tile: t.Name(), Dates: t.Dates(), Seconds: map[string]float64{}}
		index[i] = slices.IndexFunc(all, func(a ingest.SourceTile) bool { return a.Name() == t.Name() })
	}
	cfg := r.job.trainConfig()
	scheme, _ := cfg.Scheme()
	sp := sampling.New(cfg.SamplingConfig(), cfg.Features, scheme, r.opt.Engine().Features)
	ins, err := r.sampleTiles(ctx, mine, res.Tiles, index, sp, false)
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	zero := 0.0
	d, err := sp.Draw(len(all), stage.StackScale, stage.StackOffset, &zero)
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	d.Config = cfg.SampleKey()
	r.job.markDraw(d.Draw, all)
	// The tiles' dark levels, for the model's record (as Sources).
	dark := map[string]radiometry.Levels{}
	for _, in := range ins {
		dark[in.Image] = in.Darks[0]
	}
	for _, name := range d.Sources {
		d.Draw.Dark = append(d.Draw.Dark, dark[name])
	}
	body, err := d.Encode()
	if err != nil {
		return err
	}
	for _, w := range sp.Warnings() {
		r.opt.Log.Warn(w)
	}
	return atomicfs.WriteFile(r.stage.Path(stage.DrawFile), body)
}

// trainConfig is the job's train config as the run trains with it: its
// input section cleared (the run trains on its own tiles, with the
// stack's bands and scaling), so that the model is the same whichever
// tasks drew the samples.
func (j Job) trainConfig() config.TrainConfig {
	cfg := *j.Train
	cfg.Input = config.TrainConfig{}.Input
	return cfg
}

// hold keeps a composite for the map phase: in memory while the held
// tiles fit in memory_gb, else spilled raw into the staging directory.
func (r *runner) hold(t *stack.Tile) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldBytes+t.Bytes() <= int64(r.job.Config.MemoryGB*(1<<30)) {
		r.held[t.Name] = t
		r.heldBytes += t.Bytes()
		return nil
	}
	path := r.spillPath(t.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	r.opt.Log.Info("composite spilled until the model is trained", "tile", t.Name, "path", path, "mb", t.Bytes()>>20)
	r.spilled = append(r.spilled, path)
	return t.Spill(path)
}

func (r *runner) spillPath(tile string) string { return r.stage.Path(".spill", tile+".raw") }

// take returns a held composite (from memory, or read back from its spill
// file), or nil when the tile must be composited again.
func (r *runner) take(tile string) (*stack.Tile, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.held[tile]; ok {
		delete(r.held, tile)
		r.heldBytes -= t.Bytes()
		return t, nil
	}
	if !slices.Contains(r.spilled, r.spillPath(tile)) {
		return nil, nil
	}
	return stack.Load(r.spillPath(tile))
}

// mirrorReads says whether a map with model reads its windows from its
// tile's mirror (stage.ReadsMirror, inference.MirrorPredictor): its
// features have context, and its area of applicability, if any, is
// measured in the predictor's own pass.
func (r *runner) mirrorReads(model *forest.Model) bool {
	set, err := features.NewSet(model.Features, r.job.Ingest.StackPlanes())
	if err != nil || set.Radius() == 0 {
		return false
	}
	aoa := model.AOA != nil && !r.job.Config.Predict.AOA.Off
	return !aoa || !r.opt.Compare.ApartAOA
}

// keepMirror keeps a held tile's device copy (its draw's mirror) for its
// map, which then reads its windows from the device rather than sending
// them up from the held composite: only for a tile held in memory (not
// spilled), and while its device can spare another of its size (the next
// tile's draw; cuda.SparesMirror).
func (r *runner) keepMirror(tile string, m *cuda.Mirror) bool {
	if r.opt.Compare.HostWindows {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[tile]; !ok {
		return false
	}
	if ok, err := cuda.SparesMirror(m.Device(), m.Bytes()); !ok || err != nil {
		return false
	}
	r.heldMirrors[tile] = m
	return true
}

// takeMirror returns a held tile's device copy, or nil; the caller closes
// it.
func (r *runner) takeMirror(tile string) *cuda.Mirror {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.heldMirrors[tile]
	delete(r.heldMirrors, tile)
	return m
}

// dropMirrors frees the device copies of held tiles that no map took (a
// run that failed or was interrupted).
func (r *runner) dropMirrors() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tile, m := range r.heldMirrors {
		m.Close()
		delete(r.heldMirrors, tile)
	}
}

// dropSpills removes the spill files: they never outlive a run.
func (r *runner) dropSpills() {
	os.RemoveAll(r.stage.Path(".spill"))
}

// mapTile predicts a tile from its composite, counts the map against the
// labels as it is made, and leaves the outputs' encoding to the
// background.
func (r *runner) mapTile(ctx context.Context, opt stage.Options, t ingest.SourceTile, model *forest.Model, modelPath string, scheme landcover.Scheme, rt *RunTile) error {
	dir, err := stage.TileDir(r.stage, t.Name())
	if err != nil {
		return err
	}
	// A tile an interrupted run finished is kept, with what that run
	// knew of it (metrics, area of applicability, device), when its files
	// match its record.
	if kept, err := keptTile(dir, t.Name()); err == nil && (!r.job.Config.Outputs.Stack.Any() || stackKept(dir)) {
		*rt = kept
		rt.Skipped = true
		opt.Log.Info("tile already mapped and verified", "tile", t.Name())
		return nil
	} else if atomicfs.Exists(filepath.Join(dir, TileRecordFile)) {
		opt.Log.Warn("a tile an interrupted run mapped does not match its record: mapping it again", "tile", t.Name(), "why", err)
	}
	mem, err := r.take(t.Name())
	heldMirror := r.takeMirror(t.Name())
	if heldMirror != nil {
		// After the tile's prediction, which may read its windows from it.
		defer heldMirror.Close()
	}
	// A tile with layers is mapped after its composite: its layers'
	// encoding, which its features need, is known once they are read.
	beside := err == nil && mem == nil && !r.opt.Compare.MapAfterComposite && len(r.job.Ingest.Layers) == 0
	var grid geo.Grid
	var fresh *stack.Tile
	var dm *cuda.Mirror
	if beside {
		// Planned (the sources' headers read), and its stack made (a
		// reused heap span is zeroed, about 3 GB for a full tile),
		// before the composite's turn, which another lane's tile may
		// hold meanwhile.
		if grid, err = t.Plan(r.job.Ingest); err != nil {
			return err
		}
		planes := r.job.Ingest.StackPlanes()
		// The device's copy of the composite, filled beside the host's,
		// from which a GPU's prediction reads the windows: their DNs
		// then cross the bus once, downwards, and never go back up. The
		// host's stack then keeps only the counts, labels and the fill.
		if r.mirrorReads(model) {
			var merr error
			if dm, merr = opt.Engine().MapMirror(grid, len(planes)); merr != nil {
				opt.Log.Warn("no device copy of the composite: the prediction reads the host's", "tile", t.Name(), "why", merr)
				dm = nil
			}
		}
		if dm != nil {
			fresh = stack.NewElsewhere(t.Name(), grid, planes, stage.StackScale, stage.StackOffset)
		} else {
			fresh = stack.New(t.Name(), grid, planes, stage.StackScale, stage.StackOffset)
		}
	}
	// A GPU's lanes take turns at each step, so that with two tiles per
	// GPU one is read and composited while the other is predicted.
	unlock := r.step(opt, "composite")
	var in predict.Input
	var m stage.Manifest
	stop := func() {}
	if beside {
		// The tile is predicted as its composite's rows become whole;
		// the composite's turn passes to the next tile when its windows
		// are made.
		in, m, stop = r.compositeBeside(ctx, opt, t, rt, grid, fresh, dm, unlock)
	} else {
		if err == nil && mem == nil {
			mem, err = r.composite(ctx, opt, t, rt)
		}
		unlock()
		if err != nil {
			return err
		}
		// Every composite this process holds, in memory or spilled, was
		// made by r.composite, which recorded its manifest.
		r.mu.Lock()
		m = r.manifests[t.Name()]
		r.mu.Unlock()
		in = predict.Input{Mem: mem, Mirror: heldMirror}
	}
	defer stop()
	rt.Device = laneName(opt)
	pc := predict.Config{Window: r.job.Config.Predict.Window, Confidence: r.job.Config.Predict.Confidence, Compress: r.job.Config.Predict.Compress, AOA: r.job.Config.Predict.AOA}
	r.mark("composite taken", t.Name())
	out, err := r.tileOut(t.Name())
	if err != nil {
		return err
	}
	// The lane takes the predict turn once its tile's writers and
	// predictor are ready (Input.Ready), while another tile may stream.
	// With a composite beside it, StreamTile returns once the composite
	// has ended (Input.Composited).
	var predictTurn func()
	in.Ready = func() { predictTurn = r.step(opt, "predict") }
	p, err := predict.StreamTile(ctx, pc, opt, out, predict.MapModel{Model: model, Path: modelPath, Scheme: scheme}, m, in)
	if predictTurn != nil {
		predictTurn()
	}
	if err != nil {
		return err
	}
	rt.Predict, rt.Radiometry = p.Tile, p.Tile.Radiometry
	if p.Tile.AOAOutside != nil {
		rt.AOAOutside = stage.Ptr(math.Round(*p.Tile.AOAOutside*100) / 100)
	}
	rt.AOAWarning = p.Tile.AOAWarning
	rt.Predicted = time.Since(r.start)
	r.mark("predicted", t.Name())
	if rt.Pixels == 0 {
		rt.Pixels = p.Tile.Pixels
	}
	metrics, err := forest.FromConfusion(p.Confusion, scheme.Codes())
	if err == nil {
		rt.Metrics = &metrics
	} else {
		opt.Log.Warn("tile has no labelled pixel with a prediction: no metrics", "tile", t.Name())
	}
	r.background(func() error {
		// The metrics are written beside the maps' ending, not on the
		// lane: their sync to disk waits for other files' data too. The
		// tile's record, which a rerun keeps the tile by, comes after both.
		var werr error
		var wg sync.WaitGroup
		if rt.Metrics != nil {
			wg.Go(func() { werr = writeRunMetrics(filepath.Join(dir, stage.RunMetricsFile), metrics, scheme) })
		}
		err := p.Finish(opt)
		wg.Wait()
		rt.Predict.Encode = p.Tile.Encode
		r.mark("outputs written", t.Name())
		if err = errors.Join(err, werr); err != nil {
			return err
		}
		return writeTileRecord(dir, *rt)
	})
	return nil
}

// collection is the collection the run's items belong to: the run's own,
// or for an array task the job's, which lulc collect writes.
func (r *runner) collection() stage.CollectionRef {
	c := stage.OwnCollection(r.collectionID)
	c.Base = r.opt.BaseURL
	if r.job.Shard.Count > 0 {
		c.Href = stage.ShardCollectionHref
	}
	return c
}

// tileOut is where a tile of the run writes its outputs.
func (r *runner) tileOut(tile string) (stage.TileOut, error) {
	return stage.NewTileOut(r.stage, tile, r.collection())
}

// writeCatalog writes each tile's stack item, when the run writes stacks,
// and the run's collection (an array task leaves that to lulc collect).
// Both are made from the files on disk, so that a resumed run writes them
// again to the same bytes.
func (r *runner) writeCatalog(tiles []RunTile) error {
	names := make([]string, len(tiles))
	for i, t := range tiles {
		names[i] = t.Tile
		if r.job.Config.Outputs.Stack.Any() {
			out, err := r.tileOut(t.Tile)
			if err != nil {
				return err
			}
			if err := stage.WriteStackItem(out); err != nil {
				return err
			}
		}
	}
	if r.job.Shard.Count > 0 {
		return nil
	}
	desc := fmt.Sprintf("Land-cover maps of %d tile(s) by lulc run.", len(names))
	return stage.WriteCollection(r.stage.Dir, r.collectionID, "lulc land-cover maps", desc, stage.OutputItems(r.stage.Dir, names), r.opt.BaseURL)
}

// writeRunMetrics writes a tile's evaluation as lulc evaluate does.
func writeRunMetrics(path string, m forest.Metrics, scheme landcover.Scheme) error {
	var names []string
	for _, c := range scheme.Classes {
		names = append(names, c.Name)
	}
	body, _ := json.MarshalIndent(struct {
		forest.Metrics
		Names []string `json:"class_names"`
	}{m, names}, "", "  ")
	return atomicfs.WriteFile(path, append(body, '\n'))
}

// writeJob writes the resolved configs, the job report and, last, the
// commit record of every file the run wrote.
func (r *runner) writeJob(res RunResult) error {
	if err := stage.WriteResolvedConfig(r.stage.Path("run.yaml"), r.job.Config); err != nil {
		return err
	}
	if err := stage.WriteResolvedConfig(r.stage.Path(config.IngestConfigFile), r.job.Ingest.Redacted()); err != nil {
		return err
	}
	rep := runReport{Job: r.hash, Collection: r.collectionID, Shard: r.job.Shard.Count > 0, Model: res.Model, GPU: res.GPU, Seconds: res.Elapsed.Seconds(), DeviceBusy: res.DeviceBusy.Seconds(), PeakRSS: res.PeakRSS}
	for _, d := range res.Devices {
		rep.Devices = append(rep.Devices, deviceReport{Device: fmt.Sprintf("gpu:%d", d.Index), Name: d.Name, Busy: d.Busy.Seconds(),
			Share: d.Busy.Seconds() / res.Elapsed.Seconds()})
	}
	rep.Tiles = res.Tiles
	rep.Fit, rep.Wait = res.Fit.Seconds(), res.Wait.Seconds()
	rep.FirstMap, rep.PerTile = res.FirstMap.Seconds(), res.PerTileAfter.Seconds()
	body, _ := json.MarshalIndent(rep, "", "  ")
	if err := atomicfs.WriteFile(r.stage.Path("report.json"), append(body, '\n')); err != nil {
		return err
	}
	return writeTaskCommit(r.stage.Dir, r.hash)
}

// runReport is report.json: the job's time, per tile where it went, and
// the maps' accuracy.
type runReport struct {
	// Job identifies the resolved configs, the model and the shard.
	Job        string         `json:"job"`
	Collection string         `json:"collection,omitempty"` // the STAC collection's id
	Shard      bool           `json:"shard,omitempty"`
	Model      string         `json:"model"`
	GPU        bool           `json:"gpu"`
	Seconds    float64        `json:"seconds"`
	DeviceBusy float64        `json:"device_busy_seconds,omitempty"` // summed over the GPUs
	Devices    []deviceReport `json:"devices,omitempty"`
	Fit        float64        `json:"fit_seconds,omitempty"` // binning, fit and validation, wall
	Wait       float64        `json:"wait_seconds"`          // the end's wait for outputs still encoding
	// FirstMap and PerTile are RunResult's FirstMap and PerTileAfter,
	// with two tiles or more mapped.
	FirstMap float64   `json:"first_map_seconds,omitempty"`
	PerTile  float64   `json:"per_tile_after_seconds,omitempty"`
	PeakRSS  int64     `json:"peak_rss_bytes"`
	Tiles    []RunTile `json:"tiles"`
}

// deviceReport is one GPU's use in report.json: how long it computed and
// that time's share of the job's wall time.
type deviceReport struct {
	Device string  `json:"device"`
	Name   string  `json:"name"`
	Busy   float64 `json:"busy_seconds"`
	Share  float64 `json:"busy_share"`
}

// PeakRSS is the process's peak resident memory so far, in bytes.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// stageSeconds names a tile's stage times: composite (reading and
// compositing, wall); read_worker (reading the sources, of which
// labels_worker the label rasters), resample_worker (upsampling coarse
// bands on the CPU) and composite_worker, features_worker and predict_worker summed over
// workers; sample, stream (the prediction) and encode (the map's COGs,
// beside the compute) as wall time; with layers, layers (their planes,
// made before the windows, wall: a part of composite).
func (t RunTile) stageSeconds() map[string]float64 {
	s := map[string]float64{
		"composite":        t.Composite.Seconds(),
		"read_worker":      t.Ingest.Read.Seconds(),
		"resample_worker":  t.Ingest.Resample.Seconds(),
		"labels_worker":    t.Ingest.Labels.Seconds(),
		"composite_worker": t.Ingest.Composite.Seconds(),
		"sample":           t.Sample.Seconds(),
		"features_worker":  t.Predict.Timings.Features.Seconds(),
		"predict_worker":   t.Predict.Timings.Predict.Seconds(),
		"stream":           t.Predict.Stream.Seconds(),
		"encode":           t.Predict.Encode.Seconds(),
	}
	if t.Ingest.Layers > 0 {
		s["layers"] = t.Ingest.Layers.Seconds()
	}
	if t.Composited > 0 {
		s["composited_at"] = t.Composited.Seconds()
	}
	if t.Predicted > 0 {
		s["predicted_at"] = t.Predicted.Seconds()
	}
	return s
}

// steady is RunResult's FirstMap and PerTileAfter of tiles: from when
// each was predicted.
func steady(tiles []RunTile) (first, perTile time.Duration) {
	var at []time.Duration
	for _, t := range tiles {
		if t.Predicted > 0 {
			at = append(at, t.Predicted)
		}
	}
	if len(at) < 2 {
		return 0, 0
	}
	first, last := slices.Min(at), slices.Max(at)
	return first, (last - first) / time.Duration(len(at)-1)
}

// markDraw records in a sample phase's draw what must be the same for
// draws to merge into the one-process run's samples: the ingest config,
// the job's tiles (all, in order), its plan and its task count.
func (j Job) markDraw(d *sampleset.Draw, all []ingest.SourceTile) {
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name()
	}
	d.Ingest, d.Tiles, d.Tasks = j.Ingest.Hash(), tileListHash(names), j.Shard.Count
	if j.Plan != nil {
		d.Plan = j.Plan.Digest
	}
}

// tileListHash identifies a job's tile list: its names, in order.
func tileListHash(names []string) string {
	sum := sha256.Sum256([]byte(strings.Join(names, "\n")))
	return hex.EncodeToString(sum[:])
}
