package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/stage"
)

// jobsWorld is what the jobs' hostile cases read: two tiny tiles, their
// plan, an array job of two tasks (its draws, the model trained from
// them, its map tasks), and draws that are not of that job. No case
// writes into it.
type jobsWorld struct {
	catalog, runCfg, plan, job, model string
	base                              []string // lulc run's arguments for the job, less --out
	// Draws of other jobs, each as the task 1-of-2 (or 0-of-3) directory
	// holding draw.lulcd: another ingest config, no plan, three tasks.
	otherIngest, noPlan, threeTasks string
}

func jobsSetup(t *testing.T) jobsWorld {
	t.Helper()
	catalog, runCfg := twoTiles(t)
	dir := t.TempDir()
	w := jobsWorld{catalog: catalog, runCfg: runCfg, plan: filepath.Join(dir, "plan.json"), job: filepath.Join(dir, "job")}
	w.model = filepath.Join(w.job, "model", "model.lulcrf")
	w.base = []string{"run", "-q", "-c", runCfg, "--catalog", catalog, "--device", "cpu"}
	must(t, "plan", "-q", "-c", runCfg, "--catalog", catalog, "--out", w.plan)
	for i := range 2 {
		must(t, append(w.base, "--plan", w.plan, "--phase", "sample", "--shard", fmt.Sprintf("%d/2", i), "--out", w.job)...)
	}
	must(t, "train", "-q", "--device", "cpu", "--samples", filepath.Join(w.job, "draws"), "--out", filepath.Join(w.job, "model"))
	for i := range 2 {
		must(t, append(w.base, "--plan", w.plan, "--model", w.model, "--shard", fmt.Sprintf("%d/2", i), "--out", w.job)...)
	}
	// Another ingest config: the same but for its window (its hash
	// differs, as any other change would make it).
	body, err := os.ReadFile(runCfg)
	if err != nil {
		t.Fatal(err)
	}
	ingest := strings.TrimSpace(strings.TrimPrefix(jobsLine(string(body), "ingest: "), "ingest: "))
	ib, err := os.ReadFile(ingest)
	if err != nil {
		t.Fatal(err)
	}
	otherIngest := filepath.Join(dir, "ingest-512.yaml")
	otherRun := filepath.Join(dir, "run-512.yaml")
	writeFile(t, otherIngest, strings.Replace(string(ib), "window: 1024", "window: 512", 1))
	writeFile(t, otherRun, strings.Replace(string(body), "ingest: "+ingest, "ingest: "+otherIngest, 1))
	must(t, "run", "-q", "-c", otherRun, "--catalog", catalog, "--device", "cpu", "--phase", "sample", "--shard", "1/2", "--out", filepath.Join(dir, "other"))
	w.otherIngest = filepath.Join(dir, "other", "draws", "1-of-2")
	must(t, append(w.base, "--phase", "sample", "--shard", "1/2", "--out", filepath.Join(dir, "noplan"))...)
	w.noPlan = filepath.Join(dir, "noplan", "draws", "1-of-2")
	must(t, append(w.base, "--plan", w.plan, "--phase", "sample", "--shard", "1/3", "--out", filepath.Join(dir, "three"))...)
	w.threeTasks = filepath.Join(dir, "three", "draws", "1-of-3")
	return w
}

// jobsLine is the line of s that starts with prefix.
func jobsLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// jobsCopy copies the world's job into the case and returns the copy.
func jobsCopy(c *hcase, w jobsWorld) string {
	c.t.Helper()
	dst := c.path("job")
	if err := os.CopyFS(dst, os.DirFS(w.job)); err != nil {
		c.t.Fatal(err)
	}
	return dst
}

// jobsTile is the first tile's directory of a task of the case's job
// copy, relative to the task.
func jobsTile(c *hcase, task string) string {
	c.t.Helper()
	m, _ := filepath.Glob(filepath.Join(task, "*", stage.ClassFile))
	if len(m) == 0 {
		c.t.Fatalf("task %s mapped no tile", task)
	}
	rel, _ := filepath.Rel(task, filepath.Dir(m[0]))
	return rel
}

// jobsEdit rewrites a file of the case: edit gets its bytes.
func jobsEdit(c *hcase, path string, edit func([]byte) []byte) {
	c.t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(body), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// jobsReplace is an edit that replaces old by new, which must occur.
func jobsReplace(c *hcase, old, new string) func([]byte) []byte {
	return func(b []byte) []byte {
		if !strings.Contains(string(b), old) {
			c.t.Fatalf("no %q to replace", old)
		}
		return []byte(strings.Replace(string(b), old, new, 1))
	}
}

// jobsForgePlan writes a copy of the world's plan changed by forge and
// digested again, as an attacker who knows the format would.
func jobsForgePlan(c *hcase, w jobsWorld, forge func(p *pipeline.JobPlan)) string {
	c.t.Helper()
	body, err := os.ReadFile(w.plan)
	if err != nil {
		c.t.Fatal(err)
	}
	var p pipeline.JobPlan
	if err := json.Unmarshal(body, &p); err != nil {
		c.t.Fatal(err)
	}
	forge(&p)
	p.Digest = ""
	raw, _ := json.Marshal(p)
	sum := sha256.Sum256(raw)
	p.Digest = hex.EncodeToString(sum[:])
	return c.file("forged-plan.json", p.Encode())
}

// jobsFirstAsset sets the href of the first tile's first scene's asset
// of key (any asset when key is "").
func jobsFirstAsset(p *pipeline.JobPlan, href string) {
	it := p.Tiles[0].Items[0]
	for k, a := range it.Assets {
		a.Href = href
		it.Assets[k] = a
		break
	}
}

// jobsDraw copies a draw task's directory into the case under name and
// returns it.
func jobsDraw(c *hcase, src, name string) string {
	c.t.Helper()
	dst := c.path(filepath.Join("draws", name))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		c.t.Fatal(err)
	}
	return dst
}

// jobsRewriteDraw decodes a draw, changes it and encodes it again (its
// own checksum made anew).
func jobsRewriteDraw(c *hcase, path string, change func(d *sampleset.Set)) {
	c.t.Helper()
	jobsEdit(c, path, func(b []byte) []byte {
		d, err := sampleset.Decode(b)
		if err != nil {
			c.t.Fatal(err)
		}
		change(d)
		out, err := d.Encode()
		if err != nil {
			c.t.Fatal(err)
		}
		return out
	})
}

// TestHostileJobs: forged plans, tampered task outputs and commit
// records, foreign and missing tasks, and draws of other jobs are each
// refused, naming what is wrong.
func TestHostileJobs(t *testing.T) {
	w := jobsSetup(t)
	const fail, usage = exitFailure, exitUsage
	t0, t1 := "shards/0-of-2", "shards/1-of-2"
	collect := func(job string) []string { return []string{"collect", "--out", job} }
	// mapWith maps task 0 of 2 with a plan.
	mapWith := func(c *hcase, plan string) []string {
		return append(append([]string{"run"}, w.base[2:]...), "--plan", plan, "--model", w.model, "--shard", "0/2", "--out", c.out())
	}
	planCase := func(name string, forge func(p *pipeline.JobPlan), want ...string) hostile {
		return hostile{name: "plan-" + name, code: fail, want: want, setup: func(c *hcase) []string {
			return mapWith(c, jobsForgePlan(c, w, forge))
		}}
	}
	// tamper copies the job, changes it, and collects it.
	tamper := func(name string, change func(c *hcase, job string), want ...string) hostile {
		return hostile{name: "collect-" + name, code: fail, want: want, setup: func(c *hcase) []string {
			job := jobsCopy(c, w)
			change(c, job)
			return collect(job)
		}}
	}
	// tileFile is a file of task 0's first tile.
	tileFile := func(c *hcase, job, file string) string {
		task := filepath.Join(job, t0)
		return filepath.Join(task, jobsTile(c, task), file)
	}
	// trainOn merges the draws dirs named, copied into the case.
	trainOn := func(name string, prepare func(c *hcase) []string, want ...string) hostile {
		return hostile{name: "draws-" + name, code: fail, want: want, setup: func(c *hcase) []string {
			args := []string{"train", "--device", "cpu", "--out", c.out()}
			for _, d := range prepare(c) {
				args = append(args, "--samples", d)
			}
			return args
		}}
	}
	draw0 := filepath.Join(w.job, "draws", "0-of-2")
	draw1 := filepath.Join(w.job, "draws", "1-of-2")
	catDir := filepath.Dir(w.catalog)

	cases := []hostile{
		// Forged plans, digested again: every href is held to the
		// catalog's policy, every tile name to a plain one.
		planCase("href-etc-passwd", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "/etc/passwd") }, `"/etc/passwd"`, "outside the catalog directory"),
		planCase("href-file-url", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "file:///etc/passwd") }, `"file:///etc/passwd"`, "outside the catalog directory"),
		planCase("href-dotdot", func(p *pipeline.JobPlan) { jobsFirstAsset(p, catDir+"/../../../../../../etc/passwd") }, "/etc/passwd", "outside the catalog directory"),
		planCase("href-relative", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "../../etc/shadow") }, "../../etc/shadow", "outside the catalog directory"),
		planCase("href-ftp", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "ftp://evil.example/b04.tif") }, "ftp://evil.example/b04.tif", "scheme ftp"),
		planCase("href-gopher", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "gopher://evil.example/1") }, "scheme gopher"),
		planCase("href-vsicurl", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "/vsicurl/http://169.254.169.254/latest/meta-data") }, "/vsicurl/", "virtual file system"),
		planCase("href-file-host", func(p *pipeline.JobPlan) { jobsFirstAsset(p, "file://evil.example/etc/passwd") }, "on host evil.example"),
		planCase("label-href-etc-passwd", func(p *pipeline.JobPlan) {
			for k, a := range p.Labels[0].Assets {
				a.Href = "/etc/passwd"
				p.Labels[0].Assets[k] = a
			}
		}, "label item", `"/etc/passwd"`),
		planCase("tile-traversal", func(p *pipeline.JobPlan) { p.Tiles[0].Tile = "../../escape" }, `"../../escape"`, "path separator"),
		planCase("tile-absolute", func(p *pipeline.JobPlan) { p.Tiles[0].Tile = "/tmp/escape" }, `"/tmp/escape"`, "path separator"),
		planCase("tile-hidden", func(p *pipeline.JobPlan) { p.Tiles[0].Tile = ".partial" }, `".partial"`, "starts with a dot"),
		planCase("tile-empty-name", func(p *pipeline.JobPlan) { p.Tiles[0].Tile = "" }, `""`, "empty"),
		planCase("tile-duplicated", func(p *pipeline.JobPlan) { p.Tiles[1] = p.Tiles[0] }, "also tiles[0]"),
		planCase("tile-no-scenes", func(p *pipeline.JobPlan) { p.Tiles[1].Items = nil }, "has no scenes"),
		planCase("no-tiles", func(p *pipeline.JobPlan) { p.Tiles = nil }, "no tiles"),
		planCase("other-ingest-config", func(p *pipeline.JobPlan) { p.IngestConfig = strings.Repeat("0", 64) }, "another ingest config"),
		planCase("version", func(p *pipeline.JobPlan) { p.Version = 9 }, "version 9"),
		{name: "plan-edited-not-digested", code: fail, want: []string{"digest does not match"}, setup: func(c *hcase) []string {
			body, _ := os.ReadFile(w.plan)
			return mapWith(c, c.file("plan.json", []byte(strings.Replace(string(body), `"tile": "31TEJ"`, `"tile": "31TEK"`, 1))))
		}},
		{name: "plan-truncated", code: fail, want: []string{"not a plan file"}, setup: func(c *hcase) []string {
			body, _ := os.ReadFile(w.plan)
			return mapWith(c, c.file("plan.json", body[:len(body)/2]))
		}},
		{name: "plan-is-a-catalog", code: fail, want: []string{"version 0"}, setup: func(c *hcase) []string {
			return mapWith(c, w.catalog)
		}},
		// Task numbers out of range.
		{name: "shard-index-past-count", code: usage, want: []string{"2/2"}, setup: func(c *hcase) []string {
			return append(append([]string{"run"}, w.base[2:]...), "--plan", w.plan, "--model", w.model, "--shard", "2/2", "--out", c.out())
		}},
		{name: "shard-negative", code: usage, want: []string{"-1/2"}, setup: func(c *hcase) []string {
			return append(append([]string{"run"}, w.base[2:]...), "--plan", w.plan, "--model", w.model, "--shard", "-1/2", "--out", c.out())
		}},
		{name: "shard-zero-tasks", code: usage, want: []string{"0/0"}, setup: func(c *hcase) []string {
			return append(append([]string{"run"}, w.base[2:]...), "--plan", w.plan, "--model", w.model, "--shard", "0/0", "--out", c.out())
		}},

		// Tampered task outputs: collect verifies every file against the
		// task's commit record, names the task and the file.
		tamper("metrics-edited", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, stage.RunMetricsFile), jobsReplace(c, `"overall_accuracy": `, `"overall_accuracy": 0.9999, "was": `))
		}, "task 0 of 2", stage.RunMetricsFile, "edited or damaged"),
		tamper("metrics-edited-same-size", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, stage.RunMetricsFile), jobsReplace(c, `"overall_accuracy": 0.`, `"overall_accuracy": 1.`))
		}, "task 0 of 2", stage.RunMetricsFile, "does not match its recorded checksum"),
		tamper("class-map-flipped", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, stage.ClassFile), func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
		}, "task 0 of 2", stage.ClassFile),
		tamper("class-map-truncated", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, stage.ClassFile), func(b []byte) []byte { return b[:len(b)/2] })
		}, "task 0 of 2", stage.ClassFile, "bytes"),
		tamper("confidence-removed", func(c *hcase, job string) {
			os.Remove(tileFile(c, job, stage.ConfidenceFile))
		}, "task 0 of 2", stage.ConfidenceFile, "missing"),
		tamper("item-edited", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, stage.ItemFile), jobsReplace(c, `"id": "`, `"id": "forged-`))
		}, "task 0 of 2", stage.ItemFile),
		tamper("tile-record-edited", func(c *hcase, job string) {
			jobsEdit(c, tileFile(c, job, pipeline.TileRecordFile), jobsReplace(c, `"device": "cpu"`, `"device": "gpu:7"`))
		}, "task 0 of 2", pipeline.TileRecordFile),
		tamper("report-edited", func(c *hcase, job string) {
			jobsEdit(c, filepath.Join(job, t1, "report.json"), jobsReplace(c, `"overall_accuracy": `, `"overall_accuracy": 0.9999, "was": `))
		}, "task 1 of 2", "report.json"),
		tamper("commit-removed", func(c *hcase, job string) {
			os.Remove(filepath.Join(job, t1, pipeline.TaskCommitFile))
		}, "task 1 of 2", "no commit record"),
		tamper("commit-truncated", func(c *hcase, job string) {
			jobsEdit(c, filepath.Join(job, t0, pipeline.TaskCommitFile), func(b []byte) []byte { return b[:len(b)/3] })
		}, "task 0 of 2", "not a commit record"),
		tamper("commit-lists-outside", func(c *hcase, job string) {
			jobsEdit(c, filepath.Join(job, t0, pipeline.TaskCommitFile), jobsReplace(c, `"path": "`, `"path": "../../../etc/`))
		}, "task 0 of 2", "lies outside its directory"),
		tamper("commit-of-other-task", func(c *hcase, job string) {
			body, _ := os.ReadFile(filepath.Join(job, t1, pipeline.TaskCommitFile))
			writeFile(c.t, filepath.Join(job, t0, pipeline.TaskCommitFile), string(body))
		}, "task 0 of 2", "commit record"),
		tamper("commit-job-forged", func(c *hcase, job string) {
			jobsEdit(c, filepath.Join(job, t0, pipeline.TaskCommitFile), jobsReplace(c, `"job": "`, `"job": "0`))
		}, "task 0 of 2", "swapped in"),
		tamper("file-planted", func(c *hcase, job string) {
			writeFile(c.t, filepath.Join(filepath.Dir(tileFile(c, job, stage.ClassFile)), "evil.tif"), "not written by the task")
		}, "task 0 of 2", "evil.tif", "not in the commit record"),
		tamper("tile-planted", func(c *hcase, job string) {
			dst := filepath.Join(job, t1, "99ZZZ")
			os.CopyFS(dst, os.DirFS(filepath.Dir(tileFile(c, job, stage.ClassFile))))
		}, "task 1 of 2", "99ZZZ/", "not in the commit record"),
		tamper("symlink-planted", func(c *hcase, job string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(job, t0, "passwd")); err != nil {
				c.t.Fatal(err)
			}
		}, "task 0 of 2", "passwd", "not a regular file"),
		tamper("tasks-of-another-job", func(c *hcase, job string) {
			// A sample task's output where a map task's belongs: the same
			// plan and tiles, another job.
			os.RemoveAll(filepath.Join(job, t1))
			os.CopyFS(filepath.Join(job, t1), os.DirFS(filepath.Join(w.job, "draws", "1-of-2")))
		}, "another job's task"),
		tamper("task-missing", func(c *hcase, job string) {
			os.RemoveAll(filepath.Join(job, t1))
		}, "task 1 of 2: no output", "--shard 1/2"),
		tamper("task-only-staged", func(c *hcase, job string) {
			os.Rename(filepath.Join(job, t1), filepath.Join(job, "shards", ".1-of-2.partial"))
		}, "task 1 of 2: no output"),
		tamper("task-counts-mixed", func(c *hcase, job string) {
			os.CopyFS(filepath.Join(job, "shards", "2-of-3"), os.DirFS(filepath.Join(w.job, t1)))
		}, "tasks of 2 and of 3"),
		tamper("foreign-directory", func(c *hcase, job string) {
			os.MkdirAll(filepath.Join(job, "shards", "evil"), 0o755)
		}, "shards/evil", "not a task output"),
		tamper("tile-in-two-tasks", func(c *hcase, job string) {
			// Task 1 made to hold task 0's tile too, with a commit record
			// made anew: the duplicate is still refused.
			tile := jobsTile(c, filepath.Join(job, t0))
			os.CopyFS(filepath.Join(job, t1, tile), os.DirFS(filepath.Join(job, t0, tile)))
			jobsEdit(c, filepath.Join(job, t1, "report.json"), func(b []byte) []byte {
				var rep map[string]any
				json.Unmarshal(b, &rep)
				var rep0 map[string]any
				b0, _ := os.ReadFile(filepath.Join(job, t0, "report.json"))
				json.Unmarshal(b0, &rep0)
				rep["tiles"] = append(rep["tiles"].([]any), rep0["tiles"].([]any)...)
				out, _ := json.Marshal(rep)
				return out
			})
			jobsRecommit(c, filepath.Join(job, t1))
		}, "mapped by two tasks"),
		{name: "collect-no-shards", code: fail, want: []string{"no task outputs"}, setup: func(c *hcase) []string {
			return collect(c.path("empty"))
		}},

		// Draws of other jobs, of an older lulc, damaged or doubled.
		trainOn("other-ingest-config", func(c *hcase) []string {
			return []string{jobsDraw(c, draw0, "0-of-2"), jobsDraw(c, w.otherIngest, "1-of-2")}
		}, "ingest configs differ", "0-of-2", "1-of-2"),
		trainOn("other-plan", func(c *hcase) []string {
			return []string{jobsDraw(c, draw0, "0-of-2"), jobsDraw(c, w.noPlan, "1-of-2")}
		}, "plans differ", "none"),
		trainOn("other-task-count", func(c *hcase) []string {
			return []string{jobsDraw(c, draw0, "0-of-2"), jobsDraw(c, w.threeTasks, "1-of-3")}
		}, "task counts differ", "2 and 3"),
		trainOn("other-tile-list", func(c *hcase) []string {
			d := jobsDraw(c, draw1, "1-of-2")
			jobsRewriteDraw(c, filepath.Join(d, stage.DrawFile), func(s *sampleset.Set) { s.Draw.Tiles = strings.Repeat("f", 64) })
			return []string{jobsDraw(c, draw0, "0-of-2"), d}
		}, "tile lists differ"),
		trainOn("older-lulc", func(c *hcase) []string {
			d := jobsDraw(c, draw0, "0-of-2")
			jobsRewriteDraw(c, filepath.Join(d, stage.DrawFile), func(s *sampleset.Set) { s.Draw.Ingest = "" })
			return []string{d, jobsDraw(c, draw1, "1-of-2")}
		}, "records no ingest config", "draw it again"),
		trainOn("doubled", func(c *hcase) []string {
			return []string{jobsDraw(c, draw0, "0-of-2"), jobsDraw(c, draw0, "copy-of-0"), jobsDraw(c, draw1, "1-of-2")}
		}, "already drawn"),
		trainOn("one-missing", func(c *hcase) []string {
			return []string{jobsDraw(c, draw0, "0-of-2")}
		}, "missing: no draw or input covers it"),
		trainOn("damaged", func(c *hcase) []string {
			d := jobsDraw(c, draw1, "1-of-2")
			jobsEdit(c, filepath.Join(d, stage.DrawFile), func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b })
			return []string{jobsDraw(c, draw0, "0-of-2"), d}
		}, "corrupt"),
		trainOn("a-training-set", func(c *hcase) []string {
			return []string{c.file("samples/draw.lulcd", mustRead(c, filepath.Join(w.job, "model", stage.SamplesFile)))}
		}, "a training set, not a sample phase's draw"),

		// A task run into an output that holds another job's task.
		{name: "run-into-other-jobs-task", code: fail, want: []string{"another job's run"}, setup: func(c *hcase) []string {
			if err := os.CopyFS(c.path("out/shards/0-of-2"), os.DirFS(filepath.Join(w.job, "draws", "0-of-2"))); err != nil {
				c.t.Fatal(err)
			}
			return mapWith(c, w.plan)
		}},
	}
	runHostile(t, cases)
}

func mustRead(c *hcase, path string) []byte {
	c.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// jobsRecommit writes a task's commit record anew over what its directory
// now holds, as an attacker who knows the format would.
func jobsRecommit(c *hcase, task string) {
	c.t.Helper()
	var rec struct {
		Job   string             `json:"job"`
		Files []pipeline.FileSum `json:"files"`
	}
	json.Unmarshal(mustRead(c, filepath.Join(task, pipeline.TaskCommitFile)), &rec)
	rec.Files = nil
	filepath.WalkDir(task, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == pipeline.TaskCommitFile {
			return err
		}
		rel, _ := filepath.Rel(task, p)
		sum, size, err := digest.File(p)
		if err != nil {
			c.t.Fatal(err)
		}
		rec.Files = append(rec.Files, pipeline.FileSum{Path: filepath.ToSlash(rel), Size: size, BLAKE3: sum})
		return nil
	})
	body, _ := json.Marshal(rec)
	writeFile(c.t, filepath.Join(task, pipeline.TaskCommitFile), string(body))
}
