package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lulc/lulc/device/cuda"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/evaluate"
	"github.com/lulc/lulc/stage/predict"
	"github.com/lulc/lulc/stage/train"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/scale/shard"
)

// demoJob is the embedded demo run over the tiny scene, with the test
// forest size.
func demoJob(t *testing.T) Job {
	t.Helper()
	raw, err := configs.Read("run-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ParseRunConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	tc := trainConfig(t, "train-demo.yaml", "")
	scene := makeScene(t, "tiny", synthConfig(t))
	return Job{Config: rc, Ingest: ingestConfig(t, filepath.Join(scene, "catalog.json")), Train: &tc}
}

func runJob(t *testing.T, job Job, out string, opt stage.Options) RunResult {
	t.Helper()
	opt.Out = out
	res, err := Run(context.Background(), job, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

func confusionOf(t *testing.T, path string) [][]int64 {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m forest.Metrics
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.Confusion
}

// TestRunMatchesSeparateStages runs the demo job in one pass and checks it
// against ingest, train, predict and evaluate run one after the other: the
// same stack bytes, the same forest and validation metrics, the same maps,
// and metrics equal to lulc evaluate's.
func TestRunMatchesSeparateStages(t *testing.T) {
	job := demoJob(t)
	job.Config.Outputs.Stack = config.StackFormats{config.StackCOG}
	out := filepath.Join(t.TempDir(), "run")
	res := runJob(t, job, out, stage.Options{Charts: drawer})
	if len(res.Tiles) != 1 || res.Train == nil || res.Tiles[0].Metrics == nil {
		t.Fatalf("result %+v", res)
	}
	stack := demoStack(t)
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif", "manifest.json"} {
		sameFile(t, filepath.Join(out, "31TEJ", f), filepath.Join(stack, "31TEJ", f))
	}

	// The forest equals the one lulc train fits on the stack.
	trained, trainDir := mustTrain(t, trainConfig(t, "train-demo.yaml", stack))
	a, _, err := predict.LoadModel(filepath.Join(out, "model", stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := predict.LoadModel(filepath.Join(trainDir, stage.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Forest, b.Forest) || !reflect.DeepEqual(a.Bins, b.Bins) || !reflect.DeepEqual(a.Features, b.Features) {
		t.Error("the run's forest differs from lulc train's on the same stack")
	}
	if !reflect.DeepEqual(res.Train.Metrics.Confusion, trained.Metrics.Confusion) {
		t.Errorf("validation confusion %v, train's %v", res.Train.Metrics.Confusion, trained.Metrics.Confusion)
	}

	// The maps equal lulc predict's with the run's model, and the metrics
	// lulc evaluate's against the stack's labels.
	_, pred := mustPredict(t, predict.Config{Model: filepath.Join(out, "model", stage.ModelFile), Input: stack, Confidence: true})
	for _, f := range []string{stage.ClassFile, stage.ConfidenceFile, stage.QuicklookFile, stage.AOAFile} {
		sameFile(t, filepath.Join(out, "31TEJ", f), filepath.Join(pred, "31TEJ", f))
	}
	ev, err := evaluate.Evaluate(context.Background(), filepath.Join(pred, "31TEJ", stage.ClassFile), filepath.Join(stack, "31TEJ", "labels.tif"), evaluate.DefaultConfig(), stage.Options{Out: filepath.Join(t.TempDir(), "eval")})
	if err != nil {
		t.Fatal(err)
	}
	if got := confusionOf(t, filepath.Join(out, "31TEJ", stage.RunMetricsFile)); !reflect.DeepEqual(got, ev.Metrics.Confusion) {
		t.Errorf("run metrics %v, evaluate's %v", got, ev.Metrics.Confusion)
	}
	if body, err := os.ReadFile(filepath.Join(out, "report.json")); err != nil || !strings.Contains(string(body), `"aoa_outside_percent"`) {
		t.Errorf("report.json without the share outside the area of applicability: %v", err)
	}
	// The run is a collection of the map's and the stack's items.
	if items := checkCatalog(t, filepath.Join(out, stage.CollectionFile)); len(items) != 2 {
		t.Errorf("run items %v", items)
	}

	// With the model given, the run only maps: the same class map.
	mapped := filepath.Join(t.TempDir(), "mapped")
	job.Train, job.Model, job.Config.Outputs.Stack = nil, filepath.Join(out, "model", stage.ModelFile), nil
	res = runJob(t, job, mapped, stage.Options{})
	if res.Train != nil || atomicExists(filepath.Join(mapped, "model")) || atomicExists(filepath.Join(mapped, "31TEJ", "stack.tif")) {
		t.Errorf("a run with a model trained or wrote a stack: %+v", res)
	}
	sameFile(t, filepath.Join(mapped, "31TEJ", stage.ClassFile), filepath.Join(out, "31TEJ", stage.ClassFile))
	items := checkCatalog(t, filepath.Join(mapped, stage.CollectionFile))
	rel := must(filepath.Rel(filepath.Join(mapped, "31TEJ"), job.Model))
	if len(items) != 1 || !strings.Contains(string(must(os.ReadFile(items[0]))), `"href": "`+filepath.ToSlash(rel)+`"`) {
		t.Errorf("the mapped run's items %v do not link the given model by a relative path", items)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func atomicExists(p string) bool { _, err := os.Stat(p); return err == nil }

type cancelBar struct {
	progress.Bar
	f func()
}

func (b cancelBar) Add(n int) error { b.f(); return b.Bar.Add(n) }

// TestRunSpillsAndResumes holds no composite in memory (every tile is
// spilled raw and read back) and interrupts the run while it maps: the
// rerun resumes it, keeping the model, and gives the same outputs as an
// uninterrupted run held in memory. Only the timings in report.json and
// model/run.json differ.
func TestRunSpillsAndResumes(t *testing.T) {
	job := demoJob(t)
	want := filepath.Join(t.TempDir(), "want")
	runJob(t, job, want, stage.Options{})

	job.Config.MemoryGB = 1e-9
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt := stage.Options{Out: out, NewBar: func(total int64, desc string) progress.Bar {
		bar := progress.OrNop(nil)(total, desc)
		if strings.HasPrefix(desc, "predict") {
			return cancelBar{bar, cancel}
		}
		return bar
	}}
	if _, err := Run(ctx, job, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if !atomicExists(filepath.Join(filepath.Dir(out), ".run.partial", "model", stage.ModelFile)) {
		t.Fatal("the interrupted run left no model to resume from")
	}
	res := runJob(t, job, out, stage.Options{})
	if res.Train != nil {
		t.Error("the resumed run trained again")
	}
	for _, rel := range diffTrees(t, want, out) {
		if rel != "report.json" && rel != TaskCommitFile && rel != filepath.Join("model", "run.json") && rel != "run.yaml" {
			t.Errorf("%s differs from the uninterrupted run", rel)
		}
	}
	if atomicExists(filepath.Join(out, ".spill")) {
		t.Error("spill files outlived the run")
	}
}

// TestRunBadInput refuses a job that neither trains nor has a model, and
// an --out inside the scene.
func TestRunBadInput(t *testing.T) {
	job := demoJob(t)
	job.Train = nil
	if _, err := Run(context.Background(), job, stage.Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no train config and no model: %v", err)
	}
	job = demoJob(t)
	into := filepath.Join(filepath.Dir(job.Ingest.Source.Catalog), "maps")
	if _, err := Run(context.Background(), job, stage.Options{Out: into}); err == nil || !strings.Contains(err.Error(), "lies inside the input") {
		t.Errorf("--out inside the scene: %v", err)
	}
	if atomicExists(into) {
		t.Error("a refused run wrote its output")
	}
}

// TestLanesCores: a run's lanes on several GPUs take turns over the
// GPUs and work on their GPU's share of the cores (every core each with
// LULC_LANE_CORES=all); on one GPU a lane keeps every core. No GPU is
// touched: the lanes only name their devices.
func TestLanesCores(t *testing.T) {
	a, b := new(cuda.Device), new(cuda.Device)
	for _, c := range []struct {
		gpus    []*cuda.Device
		all     bool
		workers []int
	}{
		{[]*cuda.Device{a, b}, false, []int{16, 16, 16, 16}},
		{[]*cuda.Device{a, b}, true, []int{32, 32, 32, 32}},
		{[]*cuda.Device{a}, false, []int{32, 32}},
	} {
		r := &runner{opt: stage.Options{Workers: 32, GPUs: c.gpus}}
		r.opt.Compare.LaneAllCores = c.all
		r.job.Config.TilesPerGPU = 2
		lanes := r.lanes()
		if len(lanes) != len(c.workers) {
			t.Fatalf("%d GPUs: %d lanes, want %d", len(c.gpus), len(lanes), len(c.workers))
		}
		for i, l := range lanes {
			if l.Workers != c.workers[i] || len(l.GPUs) != 1 || l.GPUs[0] != c.gpus[i%len(c.gpus)] {
				t.Errorf("%d GPUs, all cores %v: lane %d has %d workers on %p, want %d on %p", len(c.gpus), c.all, i, l.Workers, l.GPUs[0], c.workers[i], c.gpus[i%len(c.gpus)])
			}
		}
	}
}

// TestRunLanes maps the real sample's tiles, and the first again under
// another name, two lanes at once (as two GPUs do, here on the CPU), and
// checks every output against the single-lane run: lanes change only
// when the work happens, never its bytes.
func TestRunLanes(t *testing.T) {
	ic := realSampleConfig(t)
	third := ic.Source.Rasters[0]
	third.Tile = "again"
	ic.Source.Rasters = append(ic.Source.Rasters, third)
	rc := DefaultRunConfig()
	tc := trainConfig(t, "train-real-sample.yaml", "")
	job := Job{Config: rc, Ingest: ic, Train: &tc}
	one := filepath.Join(t.TempDir(), "one")
	a := runJob(t, job, one, stage.Options{})

	two := filepath.Join(t.TempDir(), "two")
	b := runJob(t, job, two, stage.Options{Hooks: stage.Hooks{CpuLanes: 2}})
	if len(b.Tiles) != 3 || b.Tiles[2].Tile != "again" {
		t.Fatalf("tiles %+v", b.Tiles)
	}
	for i := range a.Tiles {
		if !reflect.DeepEqual(a.Tiles[i].Metrics, b.Tiles[i].Metrics) || b.Tiles[i].Device != "cpu" {
			t.Errorf("tile %s: metrics %v on %q with two lanes, %v with one", a.Tiles[i].Tile, b.Tiles[i].Metrics, b.Tiles[i].Device, a.Tiles[i].Metrics)
		}
	}
	for _, rel := range diffTrees(t, one, two) {
		if rel != "report.json" && rel != TaskCommitFile && rel != filepath.Join("model", "run.json") {
			t.Errorf("%s differs between one lane and two", rel)
		}
	}
	// The report splits the run's time into the first map's and a tile's
	// after it, from each tile's timeline.
	var rep struct {
		Seconds  float64 `json:"seconds"`
		FirstMap float64 `json:"first_map_seconds"`
		PerTile  float64 `json:"per_tile_after_seconds"`
		Tiles    []struct {
			Seconds map[string]float64 `json:"seconds"`
		} `json:"tiles"`
	}
	body, err := os.ReadFile(filepath.Join(one, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	var at []float64
	for i, rt := range rep.Tiles {
		c, p := rt.Seconds["composited_at"], rt.Seconds["predicted_at"]
		if !(c > 0 && c < p && p <= rep.Seconds) {
			t.Errorf("tile %d: composited at %v s, predicted at %v s, of a %v s run", i, c, p, rep.Seconds)
		}
		at = append(at, p)
	}
	first, last := slices.Min(at), slices.Max(at)
	if len(at) != 3 || rep.FirstMap != first || math.Abs(rep.PerTile-(last-first)/2) > 1e-9 {
		t.Errorf("first map %v s and %v s a tile after it, from tiles mapped at %v", rep.FirstMap, rep.PerTile, at)
	}
	if math.Abs(a.FirstMap.Seconds()-rep.FirstMap) > 1e-9 || math.Abs(a.PerTileAfter.Seconds()-rep.PerTile) > 1e-9 {
		t.Errorf("the result's %v and %v against the report's %v and %v", a.FirstMap, a.PerTileAfter, rep.FirstMap, rep.PerTile)
	}

	// With a model, two lanes map the tiles from scratch alike.
	job.Train, job.Model = nil, filepath.Join(one, "model", stage.ModelFile)
	mapped := filepath.Join(t.TempDir(), "mapped")
	// Its progress: one count of the tiles mapped, no tile's own bars.
	var bars []*countBar
	runJob(t, job, mapped, stage.Options{NewBar: func(total int64, desc string) progress.Bar {
		b := &countBar{total: total, desc: desc}
		bars = append(bars, b)
		return b
	}})
	if len(bars) != 1 || bars[0].desc != "run: tiles mapped" || bars[0].total != 3 || bars[0].n.Load() != 3 || !bars[0].done {
		for _, b := range bars {
			t.Logf("bar %q: %d of %d, finished %v", b.desc, b.n.Load(), b.total, b.done)
		}
		t.Errorf("progress of a 3-tile run: %d bars", len(bars))
	}
	for _, tile := range []string{"282D_485L_3_3", "637U_59R_1_3", "again"} {
		sameFile(t, filepath.Join(mapped, tile, stage.ClassFile), filepath.Join(one, tile, stage.ClassFile))
	}
	sameFile(t, filepath.Join(mapped, "again", stage.ClassFile), filepath.Join(mapped, "282D_485L_3_3", stage.ClassFile))
	// Those tiles were predicted beside their composites, their maps
	// compressed and hashed as the stream completed their rows; predicted
	// after them, with two lanes, the maps compressed whole at the end and
	// read back to hash them, every output (the items' checksums among
	// them) is the same.
	after := filepath.Join(t.TempDir(), "after")
	runJob(t, job, after, stage.Options{Hooks: stage.Hooks{CpuLanes: 2}, Compare: stage.Compare{MapAfterComposite: true, LateMaps: true}})
	for _, rel := range diffTrees(t, mapped, after) {
		if rel != "report.json" && rel != TaskCommitFile {
			t.Errorf("%s differs between a map beside its composite and one after it", rel)
		}
	}
}

func TestRunConfigTilesPerGPU(t *testing.T) {
	c, err := ParseRunConfig([]byte("ingest: x.yaml\n"))
	if err != nil || c.TilesPerGPU != 1 {
		t.Fatalf("default: %d, %v", c.TilesPerGPU, err)
	}
	if c.HeapLimit(0) != c.HeapLimit(1) || c.HeapLimit(2) != c.HeapLimit(1)+2<<30 {
		t.Errorf("heap limits %d, %d, %d", c.HeapLimit(0), c.HeapLimit(1), c.HeapLimit(2))
	}
	c, err = ParseRunConfig([]byte("ingest: x.yaml\ntiles_per_gpu: 2\n"))
	if err != nil || c.HeapLimit(2) != int64((4+2*4)*(1<<30)) {
		t.Errorf("two tiles per GPU on two GPUs: %d, %v", c.HeapLimit(2), err)
	}
	for _, bad := range []string{"-1", "9"} {
		if _, err := ParseRunConfig([]byte("ingest: x.yaml\ntiles_per_gpu: " + bad + "\n")); err == nil || !strings.Contains(err.Error(), "tiles_per_gpu") {
			t.Errorf("tiles_per_gpu %s: %v", bad, err)
		}
	}
}

// TestRunShards maps the real sample's tiles (and the first again under
// another name) as two tasks of an array job and checks that the tasks'
// tiles are disjoint, cover the job, and equal the single run's bytes.
func TestRunShards(t *testing.T) {
	ic := realSampleConfig(t)
	third := ic.Source.Rasters[0]
	third.Tile = "again"
	ic.Source.Rasters = append(ic.Source.Rasters, third)
	tc := trainConfig(t, "train-real-sample.yaml", "")
	job := Job{Config: DefaultRunConfig(), Ingest: ic, Train: &tc}
	job.Config.Predict.Confidence = true
	one := filepath.Join(t.TempDir(), "one")
	runJob(t, job, one, stage.Options{})

	// The maps of one unsharded task with the model are what the shards
	// must give (the items link the given model, not the run's own).
	job.Train, job.Model = nil, filepath.Join(one, "model", stage.ModelFile)
	one = filepath.Join(t.TempDir(), "mapped")
	runJob(t, job, one, stage.Options{})
	seen := map[string]bool{}
	outs := make([]string, 2)
	root := filepath.Join(t.TempDir(), "job")
	for i := range 2 {
		job.Shard = shard.Spec{Index: i, Count: 2}
		out := filepath.Join(root, "shards", fmt.Sprintf("%d-of-2", i))
		outs[i] = out
		res := runJob(t, job, out, stage.Options{})
		if len(res.Tiles) == 0 {
			t.Errorf("task %d of 2 mapped no tile", i)
		}
		for _, rt := range res.Tiles {
			if seen[rt.Tile] {
				t.Errorf("tile %s mapped by two tasks", rt.Tile)
			}
			seen[rt.Tile] = true
			for _, rel := range diffTrees(t, filepath.Join(one, rt.Tile), filepath.Join(out, rt.Tile)) {
				if rel != stage.ItemFile && rel != TileRecordFile {
					t.Errorf("task %d: %s/%s differs from the single run's", i, rt.Tile, rel)
				}
			}
			sameItem(t, filepath.Join(one, rt.Tile, stage.ItemFile), filepath.Join(out, rt.Tile, stage.ItemFile))
			sameTileRecord(t, filepath.Join(one, rt.Tile), filepath.Join(out, rt.Tile))
		}
	}
	if len(seen) != 3 {
		t.Errorf("the tasks mapped %d of 3 tiles", len(seen))
	}

	col, err := Collect(context.Background(), root, stage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(col.Tiles) != 3 || len(col.Mosaics) != 6 {
		t.Errorf("collected %d tiles and mosaics %v (two CRSs: class, confidence and aoa each)", len(col.Tiles), col.Mosaics)
	}
	for _, m := range col.Mosaics {
		if strings.HasPrefix(m, "aoa-") {
			if di, _, _ := readAOA(t, filepath.Join(col.Dir, m)); !slices.ContainsFunc(di, func(v float32) bool { return v == v }) {
				t.Errorf("mosaic %s has no DI", m)
			}
			continue
		}
		if _, _, err := raster.ReadBand[uint8](filepath.Join(col.Dir, m), 1); err != nil {
			t.Errorf("mosaic %s: %v", m, err)
		}
	}
	// The tasks' items are one collection, the one collect writes, with
	// the id of the single run's.
	if items := checkCatalog(t, filepath.Join(col.Dir, stage.CollectionFile)); len(items) != 3 {
		t.Errorf("collection links %d items", len(items))
	}
	if a, b := readDoc(t, filepath.Join(col.Dir, stage.CollectionFile)), readDoc(t, filepath.Join(one, stage.CollectionFile)); a.ID != b.ID {
		t.Errorf("the job's collection %q, the single run's %q", a.ID, b.ID)
	}

	// At least once: a finished task run again keeps its output; one with
	// a damaged tile maps again to the same bytes; another job's output
	// is refused.
	job.Shard = shard.Spec{Index: 0, Count: 2}
	res := runJob(t, job, outs[0], stage.Options{})
	if len(res.Tiles) == 0 {
		t.Fatal("the rerun of a finished task lists no tile")
	}
	for _, rt := range res.Tiles {
		if !rt.Skipped {
			t.Errorf("the rerun of a finished task mapped %s again", rt.Tile)
		}
	}
	tile := res.Tiles[0].Tile
	if err := os.WriteFile(filepath.Join(outs[0], tile, stage.ClassFile), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runJob(t, job, outs[0], stage.Options{})
	if res.Tiles[0].Skipped {
		t.Error("a damaged task was kept")
	}
	for _, rel := range diffTrees(t, filepath.Join(one, tile), filepath.Join(outs[0], tile)) {
		if rel != stage.ItemFile && rel != TileRecordFile {
			t.Errorf("remapped %s/%s differs from the single run's", tile, rel)
		}
	}
	sameItem(t, filepath.Join(one, tile, stage.ItemFile), filepath.Join(outs[0], tile, stage.ItemFile))
	sameTileRecord(t, filepath.Join(one, tile), filepath.Join(outs[0], tile))
	// Without a task's output, collect names it and how to redo it.
	if err := os.Rename(outs[1], filepath.Join(root, "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(context.Background(), root, stage.Options{}); err == nil || !strings.Contains(err.Error(), "task 1 of 2: no output") || !strings.Contains(err.Error(), "--shard 1/2") {
		t.Errorf("collect without task 1: %v", err)
	}
	other := job
	other.Config.Predict.Confidence = !other.Config.Predict.Confidence
	if _, err := Run(context.Background(), other, stage.Options{Out: outs[0]}); err == nil || !strings.Contains(err.Error(), "another job") {
		t.Errorf("another job into a finished task's output: %v", err)
	}

	job.Train, job.Model = &tc, ""
	if _, err := Run(context.Background(), job, stage.Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("a sharded run that trains: %v", err)
	}
}

// TestRunPlan plans the demo job once, then maps it from the plan after
// the catalog is gone: the same outputs as a run that searched. Plans
// edited by hand or made for another ingest config are refused.
func TestRunPlan(t *testing.T) {
	job := demoJob(t)
	p, err := MakePlan(context.Background(), job.Ingest, stage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tiles) != 1 || p.Scenes() == 0 || len(p.Labels) == 0 || len(p.Digest) != 64 {
		t.Fatalf("plan %d tiles, %d scenes, %d label items, digest %q", len(p.Tiles), p.Scenes(), len(p.Labels), p.Digest)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, p.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	searched := filepath.Join(t.TempDir(), "searched")
	runJob(t, job, searched, stage.Options{})

	read, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	// The catalog's root goes: only the plan knows the scenes now.
	catalog := job.Ingest.Source.Catalog
	if err := os.Rename(catalog, catalog+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(catalog+".gone", catalog)
	job.Plan = &read
	planned := filepath.Join(t.TempDir(), "planned")
	runJob(t, job, planned, stage.Options{})
	for _, rel := range diffTrees(t, searched, planned) {
		if rel != "report.json" && rel != TaskCommitFile && rel != filepath.Join("model", "run.json") {
			t.Errorf("%s differs between the searched and the planned run", rel)
		}
	}

	body, _ := os.ReadFile(path)
	edited := filepath.Join(t.TempDir(), "edited.json")
	os.WriteFile(edited, []byte(strings.Replace(string(body), `"tile": "31TEJ"`, `"tile": "31TEK"`, 1)), 0o644)
	if _, err := ReadPlan(edited); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("an edited plan: %v", err)
	}
	other := job
	other.Ingest.Window = 512
	if _, err := Run(context.Background(), other, stage.Options{Out: filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "another ingest config") {
		t.Errorf("a plan for another ingest config: %v", err)
	}
}

// TestRunSamplePhase checks training spread over an array job: each task
// of the sample phase draws its share of the tiles (--phase sample
// --shard i/n), lulc train merges the draws, and the model and samples
// are byte for byte those of one process training over every tile. A
// finished task run again keeps its draw; a damaged draw is drawn again;
// a draw missing from the merge is named.
func TestRunSamplePhase(t *testing.T) {
	ic := realSampleConfig(t)
	third := ic.Source.Rasters[0]
	third.Tile = "again"
	ic.Source.Rasters = append(ic.Source.Rasters, third)
	tc := trainConfig(t, "train-real-sample.yaml", "")
	// The train config of a job may keep the input section it has for
	// lulc train (here a rasters input's band order and scaling): the run
	// trains on its own tiles whatever it says.
	tc.Input.Stack, tc.Input.Bands, tc.Input.Scale = "", []string{"B02", "B03"}, 1e-4
	job := Job{Config: DefaultRunConfig(), Ingest: ic, Train: &tc}
	one := filepath.Join(t.TempDir(), "one")
	runJob(t, job, one, stage.Options{})

	// Four tasks for three tiles: one task draws nothing, and says so
	// with an empty draw.
	root := t.TempDir()
	job.Phase = PhaseSample
	var draws []string
	drawn := 0
	for i := range 4 {
		job.Shard = shard.Spec{Index: i, Count: 4}
		out := filepath.Join(root, "draws", fmt.Sprintf("%d-of-4", i))
		res := runJob(t, job, out, stage.Options{})
		drawn += len(res.Tiles)
		draws = append(draws, filepath.Join(out, stage.DrawFile))
	}
	if drawn != 3 {
		t.Errorf("four tasks drew %d tiles, the job has 3", drawn)
	}
	// A staging directory's draw is no task's: the walk skips it.
	stale := filepath.Join(root, "draws", ".partial-x")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(draws[0])
	if err := os.WriteFile(filepath.Join(stale, stage.DrawFile), body, 0o644); err != nil {
		t.Fatal(err)
	}
	var merged config.TrainConfig
	merged = tc
	merged.Input = config.TrainConfig{}.Input
	merged.Input.Samples = []string{filepath.Join(root, "draws")}
	trained := filepath.Join(root, "model")
	if _, err := train.Train(context.Background(), merged, stage.Options{Out: trained}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{stage.ModelFile, stage.SamplesFile} {
		sameFile(t, filepath.Join(one, "model", f), filepath.Join(trained, f))
	}

	// A finished task's directory holding another task's draw (a copy
	// gone wrong) is drawn again.
	var empty, full string
	for _, d := range draws {
		if s, err := train.ReadDraw(d); err != nil {
			t.Fatal(err)
		} else if len(s.Draw.Inputs) == 0 {
			empty = d
		} else {
			full = d
		}
	}
	if empty == "" {
		t.Fatal("no task drew an empty draw")
	}
	want, _ := os.ReadFile(empty)
	other, _ := os.ReadFile(full)
	if err := os.WriteFile(empty, other, 0o644); err != nil {
		t.Fatal(err)
	}
	job.Shard = shard.Spec{Index: slices.Index(draws, empty), Count: 4}
	runJob(t, job, filepath.Dir(empty), stage.Options{})
	if got, _ := os.ReadFile(empty); !bytes.Equal(got, want) {
		t.Error("a task's directory with another task's draw was not drawn again")
	}
	draws = slices.DeleteFunc(draws, func(d string) bool { return d == empty })

	// A rerun of a finished task keeps its draw; one whose draw is damaged
	// draws again, the same bytes.
	job.Shard = shard.Spec{Index: slices.Index(draws, full), Count: 4}
	out := filepath.Dir(full)
	if res := runJob(t, job, out, stage.Options{}); len(res.Tiles) != 1 || !res.Tiles[0].Skipped {
		t.Errorf("a finished sample task was not kept: %+v", res.Tiles)
	}
	want, _ = os.ReadFile(full)
	if err := os.WriteFile(full, want[:len(want)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	runJob(t, job, out, stage.Options{})
	if got, _ := os.ReadFile(full); !bytes.Equal(got, want) {
		t.Error("the damaged draw was not drawn again as before")
	}

	// Two draws of three are not a job's samples.
	merged.Input.Samples = draws[:2]
	_, err := train.Train(context.Background(), merged, stage.Options{Out: filepath.Join(root, "partial")})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("training on two draws of three gave %v", err)
	}
}

// sameItem checks that two items of one tile differ in their links alone:
// a task's item lies deeper than a single run's, and links by relative
// hrefs.
func sameItem(t *testing.T, a, b string) {
	t.Helper()
	strip := func(p string) string {
		var it map[string]any
		if err := json.Unmarshal(must(os.ReadFile(p)), &it); err != nil {
			t.Fatal(err)
		}
		delete(it, "links")
		return string(must(json.Marshal(it)))
	}
	if strip(a) != strip(b) {
		t.Errorf("%s and %s differ beyond their links", a, b)
	}
}

// sameTileRecord checks that two tile records (tile.json) agree but for
// their items' checksums (an array task's item links the job's
// collection, a single run's its own).
func sameTileRecord(t *testing.T, a, b string) {
	t.Helper()
	read := func(dir string) tileRecord {
		var rec tileRecord
		body, err := os.ReadFile(filepath.Join(dir, TileRecordFile))
		if err == nil {
			err = json.Unmarshal(body, &rec)
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Files = slices.DeleteFunc(rec.Files, func(f FileSum) bool { return f.Path == stage.ItemFile })
		return rec
	}
	ra, rb := read(a), read(b)
	ja, _ := json.Marshal(ra)
	jb, _ := json.Marshal(rb)
	if string(ja) != string(jb) {
		t.Errorf("tile records differ:\n%s\n%s", ja, jb)
	}
}

// countBar records a bar's progress.
type countBar struct {
	desc  string
	total int64
	n     atomic.Int64
	done  bool
}

func (b *countBar) Add(n int) error { b.n.Add(int64(n)); return nil }
func (b *countBar) Describe(string) {}
func (b *countBar) Finish() error   { b.done = true; return nil }
