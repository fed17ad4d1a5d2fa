package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// CollectResult summarises lulc collect.
type CollectResult struct {
	Dir     string
	Shards  int
	Tiles   []CollectTile
	Mosaics []string // the VRT files, relative to Dir
}

// CollectTile is one tile of a collected job.
type CollectTile struct {
	Tile    string          `json:"tile"`
	Shard   string          `json:"shard"` // "i-of-n"
	Device  string          `json:"device,omitempty"`
	EPSG    int             `json:"epsg"`
	Dates   int             `json:"dates"`
	Pixels  int64           `json:"pixels"`
	Metrics *forest.Metrics `json:"metrics,omitempty"`
	// AOAOutside is the percentage of the tile's pixels outside the
	// model's area of applicability, when the task wrote aoa.tif.
	AOAOutside *float64           `json:"aoa_outside_percent,omitempty"`
	Seconds    map[string]float64 `json:"seconds,omitempty"`
}

// Collect gathers an array job's tasks (OUT/shards/i-of-n, written by
// lulc run --shard) into OUT/collection: it checks that every task of
// the job left a complete output of the same job, every file of which
// matches the task's commit record (TaskCommitFile) and none is missing
// from it, so that only what the tasks wrote is gathered,
// then writes a STAC collection linking every tile's item, VRT mosaics of
// the class maps and confidences per CRS (Sentinel-2 tiles of different
// UTM zones share no grid; where tiles overlap, the later in name order
// wins), and the job's report. A missing task or a damaged tile fails it,
// naming each and how to redo it.
func Collect(ctx context.Context, out string, opt stage.Options) (CollectResult, error) {
	opt.Fill()
	shards, count, err := listShards(out)
	if err != nil {
		return CollectResult{}, err
	}
	var problems []string
	redo := func(i int, why string) {
		problems = append(problems, fmt.Sprintf("task %d of %d: %s; redo it: lulc run … --model … --shard %d/%d --out %s", i, count, why, i, count, out))
	}
	job, collection := "", ""
	var tiles []CollectTile
	seen := map[string]string{}
	commits := map[string]taskCommit{}
	for i := range count {
		dir, ok := shards[i]
		if !ok {
			redo(i, "no output")
			continue
		}
		rep, err := readRunReport(dir)
		if err != nil {
			redo(i, "no readable report.json")
			continue
		}
		if job == "" {
			job, collection = rep.Job, rep.Collection
		} else if rep.Job != job {
			return CollectResult{}, fmt.Errorf("collect %s: %s holds another job's task than the others (its configs, model or task count differ)", out, dir)
		}
		name := filepath.Base(dir)
		// Every file the task wrote, its report included, must match its
		// commit record before anything of it is gathered.
		c, err := readTaskCommit(dir)
		if err != nil {
			redo(i, err.Error())
			continue
		}
		if err := verifyTask(dir, c, rep.Job); err != nil {
			redo(i, fmt.Sprintf("its output does not match its commit record: %v", err))
			continue
		}
		commits[name] = c
		for _, rt := range rep.Tiles {
			if err := config.CheckTileName(rt.Tile); err != nil {
				return CollectResult{}, fmt.Errorf("collect %s: %s: report.json: %w", out, dir, err)
			}
			if other, dup := seen[rt.Tile]; dup {
				return CollectResult{}, fmt.Errorf("collect %s: tile %s was mapped by two tasks (%s and %s)", out, rt.Tile, other, name)
			}
			seen[rt.Tile] = name
			if !c.lists(rt.Tile+"/"+stage.ClassFile) || !c.lists(rt.Tile+"/"+stage.ItemFile) {
				redo(i, fmt.Sprintf("tile %s is not in the task's commit record", rt.Tile))
				continue
			}
			info, err := raster.Inspect(filepath.Join(dir, rt.Tile, stage.ClassFile))
			if err != nil {
				redo(i, fmt.Sprintf("tile %s: %v", rt.Tile, err))
				continue
			}
			tiles = append(tiles, CollectTile{Tile: rt.Tile, Shard: name, Device: rt.Device, EPSG: info.EPSG, Dates: rt.Dates,
				Pixels: rt.Pixels, Metrics: rt.Metrics, AOAOutside: rt.AOAOutside, Seconds: rt.Seconds})
		}
	}
	if len(problems) > 0 {
		return CollectResult{}, fmt.Errorf("collect %s: the job is not complete:\n  %s", out, strings.Join(problems, "\n  "))
	}
	if len(tiles) == 0 {
		return CollectResult{}, fmt.Errorf("collect %s: the job's tasks mapped no tile", out)
	}
	slices.SortFunc(tiles, func(a, b CollectTile) int { return strings.Compare(a.Tile, b.Tile) })

	staging, err := atomicfs.Begin(ctx, filepath.Join(out, stage.CollectDir), true, opt.BreakLock, "collect "+job)
	if err != nil {
		return CollectResult{}, err
	}
	defer staging.Release()
	res := CollectResult{Dir: staging.Final, Shards: count, Tiles: tiles}
	byEPSG := map[int][]CollectTile{}
	for _, t := range tiles {
		byEPSG[t.EPSG] = append(byEPSG[t.EPSG], t)
	}
	epsgs := make([]int, 0, len(byEPSG))
	for e := range byEPSG {
		epsgs = append(epsgs, e)
	}
	slices.Sort(epsgs)
	for _, e := range epsgs {
		for _, file := range []string{stage.ClassFile, stage.ConfidenceFile, stage.AOAFile} {
			var srcs []string
			for _, t := range byEPSG[e] {
				// The staging directory and the collection are both
				// children of OUT: source names relative to one hold for
				// the other.
				if commits[t.Shard].lists(t.Tile + "/" + file) {
					srcs = append(srcs, filepath.Join(out, "shards", t.Shard, t.Tile, file))
				}
			}
			if len(srcs) == 0 {
				continue
			}
			name := fmt.Sprintf("%s-%d.vrt", strings.TrimSuffix(file, ".tif"), e)
			if err := raster.BuildVRT(staging.Path(name), srcs); err != nil {
				return res, err
			}
			res.Mosaics = append(res.Mosaics, name)
		}
	}
	// The collection is the one every task's items name (Job.collectionID):
	// links to them from the staging directory hold from OUT/collection.
	if collection == "" {
		// Reports of an older lulc do not name it.
		collection = "lulc-" + job[:12]
	}
	desc := fmt.Sprintf("Land-cover maps of %d tile(s) by lulc run, from an array job of %d tasks.", len(tiles), count)
	if err := stage.WriteCollection(staging.Dir, collection, "lulc land-cover maps", desc, collectionItems(tiles, commits), ""); err != nil {
		return res, err
	}
	body, _ := json.MarshalIndent(struct {
		Job     string        `json:"job"`
		Shards  int           `json:"shards"`
		Mosaics []string      `json:"mosaics"`
		Tiles   []CollectTile `json:"tiles"`
	}{job, count, res.Mosaics, tiles}, "", "  ")
	if err := atomicfs.WriteFile(staging.Path("report.json"), append(body, '\n')); err != nil {
		return res, err
	}
	if err := atomicfs.WriteFile(staging.Path("report.md"), []byte(collectMarkdown(res))); err != nil {
		return res, err
	}
	return res, staging.Commit()
}

// listShards finds OUT/shards/i-of-n directories; every one must have the
// same n.
func listShards(out string) (map[int]string, int, error) {
	entries, err := os.ReadDir(filepath.Join(out, "shards"))
	if err != nil {
		return nil, 0, fmt.Errorf("collect %s: no task outputs (OUT/shards/i-of-n, from lulc run --shard): %w", out, err)
	}
	shards := map[int]string{}
	count := 0
	for _, e := range entries {
		var i, n int
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "%d-of-%d", &i, &n); err != nil || fmt.Sprintf("%d-of-%d", i, n) != e.Name() || n < 1 || i < 0 || i >= n {
			return nil, 0, fmt.Errorf("collect %s: shards/%s is not a task output (i-of-n)", out, e.Name())
		}
		if count != 0 && n != count {
			return nil, 0, fmt.Errorf("collect %s: tasks of %d and of %d under shards/: one job has one task count", out, count, n)
		}
		count = n
		shards[i] = filepath.Join(out, "shards", e.Name())
	}
	if count == 0 {
		return nil, 0, fmt.Errorf("collect %s: no task outputs under %s", out, filepath.Join(out, "shards"))
	}
	return shards, count, nil
}

// collectionItems lists, relative to OUT/collection, every tile's items in
// its task's directory that the task's commit record lists.
func collectionItems(tiles []CollectTile, commits map[string]taskCommit) []string {
	var items []string
	for _, t := range tiles {
		for _, f := range []string{stage.ItemFile, stage.StackItemFile} {
			if commits[t.Shard].lists(t.Tile + "/" + f) {
				items = append(items, "../shards/"+t.Shard+"/"+t.Tile+"/"+f)
			}
		}
	}
	return items
}

// collectMarkdown is report.md: per tile, its task, device, accuracy and
// time.
func collectMarkdown(r CollectResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lulc job: %d tiles from %d tasks\n\n", len(r.Tiles), r.Shards)
	fmt.Fprintf(&b, "Mosaics: %s\n\n", strings.Join(r.Mosaics, ", "))
	b.WriteString("| tile | task | device | EPSG | dates | overall accuracy | kappa | outside AOA (%) | composite (s) | predict stream (s) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Tiles {
		oa, kappa, aoa := "–", "–", "–"
		if t.Metrics != nil {
			oa, kappa = fmt.Sprintf("%.4f", t.Metrics.Accuracy), fmt.Sprintf("%.4f", t.Metrics.Kappa)
		}
		if t.AOAOutside != nil {
			aoa = fmt.Sprintf("%.2f", *t.AOAOutside)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %s | %s | %s | %.2f | %.2f |\n", t.Tile, t.Shard, t.Device, t.EPSG, t.Dates, oa, kappa, aoa, t.Seconds["composite"], t.Seconds["stream"])
	}
	return b.String()
}
