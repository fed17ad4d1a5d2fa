package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/s3test"
	"github.com/lulc/lulc/scale/exchange"
)

// twoTiles writes two tiny synthetic tiles side by side, a catalog over
// them and a run config whose ingest config covers both; it returns the
// catalog and the run config.
func twoTiles(t *testing.T) (catalog, runCfg string) {
	t.Helper()
	dir := t.TempDir()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for i, spec := range []struct{ tile, origin string }{{"31TEJ", "[499980, 5000040]"}, {"31TFJ", "[502980, 5000040]"}} {
		c := regexp.MustCompile(`(?m)^seed: .*$`).ReplaceAllString(string(raw), fmt.Sprintf("seed: %d", 20260101+i))
		c = regexp.MustCompile(`(?m)^tile: .*$`).ReplaceAllString(c, "tile: "+spec.tile)
		c = regexp.MustCompile(`(?m)^origin: .*$`).ReplaceAllString(c, "origin: "+spec.origin)
		p := filepath.Join(dir, "synth-"+spec.tile+".yaml")
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := lulc(t, "synth", "-q", "-c", p, "--out", filepath.Join(dir, "scene", spec.tile)); code != 0 {
			t.Fatalf("synth %s: %s", spec.tile, stderr)
		}
		links = append(links, fmt.Sprintf(`{"rel": "child", "href": "./%s/catalog.json", "type": "application/json"}`, spec.tile))
	}
	catalog = filepath.Join(dir, "scene", "catalog.json")
	cat := `{"type": "Catalog", "stac_version": "1.0.0", "id": "two-tiny-tiles", "description": "exchange test", "links": [` +
		strings.Join(links, ", ") + `, {"rel": "root", "href": "./catalog.json", "type": "application/json"}]}`
	if err := os.WriteFile(catalog, []byte(cat), 0o644); err != nil {
		t.Fatal(err)
	}
	ing, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ingest := filepath.Join(dir, "ingest.yaml")
	ic := regexp.MustCompile(`(?m)^  bbox: .*$`).ReplaceAllString(string(ing), "  bbox: [2.97, 45.06, 3.09, 45.17]")
	if err := os.WriteFile(ingest, []byte(ic), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := configs.Read("run-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runCfg = filepath.Join(dir, "run.yaml")
	r := regexp.MustCompile(`(?m)^ingest: .*$`).ReplaceAllString(string(rc), "ingest: "+ingest)
	if err := os.WriteFile(runCfg, []byte(r), 0o644); err != nil {
		t.Fatal(err)
	}
	return catalog, runCfg
}

// must runs a command line that must succeed and returns its stdout.
func must(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := lulc(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	return stdout
}

// TestExchangeS3 runs a phased job (sample array, train, map array,
// collect) twice: on a shared filesystem, and with every phase's output
// and inputs as objects on a local S3-compatible server (s3rver) through
// GDAL's /vsis3/. The objects must be the shared filesystem's bytes, and
// the tasks at least once safe: a rerun keeps an intact task, a task
// killed while it uploaded (no commit) is missing for collect and is
// uploaded again by its rerun, a damaged object is found and redone.
func TestExchangeS3(t *testing.T) {
	bucket := s3test.Server(t)
	catalog, runCfg := twoTiles(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	must(t, "plan", "-q", "-c", runCfg, "--catalog", catalog, "--out", plan)
	base := []string{"run", "-q", "-c", runCfg, "--catalog", catalog, "--device", "cpu"}
	work := t.TempDir()

	// The shared filesystem's job.
	fsJob := filepath.Join(t.TempDir(), "job")
	for i := range 2 {
		must(t, append(base, "--plan", plan, "--phase", "sample", "--shard", fmt.Sprintf("%d/2", i), "--out", fsJob)...)
	}
	must(t, "train", "-q", "--device", "cpu", "--samples", filepath.Join(fsJob, "draws"), "--out", filepath.Join(fsJob, "model"))
	for i := range 2 {
		must(t, append(base, "--plan", plan, "--model", filepath.Join(fsJob, "model", "model.lulcrf"), "--shard", fmt.Sprintf("%d/2", i), "--out", fsJob)...)
	}
	must(t, "collect", "-q", "--out", fsJob)

	// The same job through object storage: the plan too is an object.
	job := exchange.Join(bucket, "jobs", "one")
	planURL := exchange.Join(job, "plan.json")
	must(t, "plan", "-q", "-c", runCfg, "--catalog", catalog, "--out", planURL)
	for i := range 2 {
		must(t, append(base, "--work", work, "--plan", planURL, "--phase", "sample", "--shard", fmt.Sprintf("%d/2", i), "--out", job)...)
	}
	must(t, "train", "-q", "--device", "cpu", "--work", work, "--samples", exchange.Join(job, "draws"), "--out", exchange.Join(job, "model"))
	modelURL := exchange.Join(job, "model", "model.lulcrf")
	mapTask := func(i int, extra ...string) string {
		return must(t, append(append(base, "--work", work, "--plan", planURL, "--model", modelURL, "--shard", fmt.Sprintf("%d/2", i), "--out", job), extra...)...)
	}
	for i := range 2 {
		mapTask(i)
	}
	must(t, "collect", "-q", "--work", work, "--out", job)
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("workspaces left after their outputs were committed: %v", left)
	}

	// Every committed prefix, downloaded, is the shared filesystem's
	// bytes (the items link the model by its URL: that is all that
	// differs).
	got := filepath.Join(t.TempDir(), "got")
	pullAll := func() {
		t.Helper()
		os.RemoveAll(got)
		for _, p := range []string{"draws/0-of-2", "draws/1-of-2", "model", "shards/0-of-2", "shards/1-of-2", "collection"} {
			ok, err := exchange.Pull(exchange.Join(job, p), filepath.Join(got, p), discard())
			if err != nil || !ok {
				t.Fatalf("pull %s: committed %v, %v", p, ok, err)
			}
		}
	}
	pullAll()
	same := func(rel string) {
		t.Helper()
		a, err := os.ReadFile(filepath.Join(fsJob, rel))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the object differs from the shared filesystem's file", rel)
		}
	}
	for _, rel := range []string{"draws/0-of-2/draw.lulcd", "draws/1-of-2/draw.lulcd", "model/model.lulcrf", "model/samples.lulcs", "model/metrics.json"} {
		same(rel)
	}
	tiles := 0
	for i := range 2 {
		task := fmt.Sprintf("shards/%d-of-2", i)
		entries, _ := os.ReadDir(filepath.Join(got, task))
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			tiles++
			for _, f := range []string{"class.tif", "confidence.tif", "quicklook.png", "metrics.json"} {
				same(filepath.Join(task, e.Name(), f))
			}
			item, _ := os.ReadFile(filepath.Join(got, task, e.Name(), "item.json"))
			if !strings.Contains(string(item), `"`+modelURL+`"`) {
				t.Errorf("%s/%s: the item does not link the model as %s", task, e.Name(), modelURL)
			}
		}
	}
	if tiles != 2 {
		t.Errorf("the tasks' objects hold %d tiles, the job has 2", tiles)
	}
	vrts, _ := filepath.Glob(filepath.Join(got, "collection", "class-*.vrt"))
	if len(vrts) != 1 {
		t.Fatalf("collection: %v", vrts)
	}
	same(filepath.Join("collection", filepath.Base(vrts[0])))
	// The mosaic opens in the store: GDAL reads its tiles' COGs by their
	// relative names through /vsis3/ (with .vrt names allowed: the
	// ingests above restricted this process's /vsis3/ to .tif names).
	if err := raster.SetConfig(map[string]string{"CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif,.vrt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := raster.Inspect(raster.GDALPath(exchange.Join(job, "collection", filepath.Base(vrts[0])))); err != nil {
		t.Errorf("the mosaic does not open in the store: %v", err)
	}

	// A rerun of a finished task keeps it and writes nothing.
	commit := exchange.Join(job, "shards", "0-of-2", exchange.CommitFile)
	before := readObject(t, commit)
	if out := mapTask(0, "-q=false"); !strings.Contains(out, "kept from an earlier run") {
		t.Errorf("a rerun of a finished task did not keep it:\n%s", out)
	}
	if !bytes.Equal(before, readObject(t, commit)) {
		t.Error("a rerun of a finished task rewrote its commit")
	}

	// Task 1 killed while it uploaded: no commit, part of its objects.
	c, _, err := exchange.ReadCommit(exchange.Join(job, "shards", "1-of-2"))
	if err != nil {
		t.Fatal(err)
	}
	var class string
	for _, f := range c.Files {
		if strings.HasSuffix(f.Name, "/class.tif") {
			class = exchange.Join(job, "shards", "1-of-2", f.Name)
		}
	}
	for _, p := range []string{exchange.Join(job, "shards", "1-of-2", exchange.CommitFile), class} {
		if err := raster.Remove(raster.GDALPath(p)); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := lulc(t, "collect", "-q", "--work", work, "--out", job)
	if code == 0 || !strings.Contains(stderr, "--shard 1/2 --out "+job) {
		t.Errorf("collect over a task without a commit: exit %d, %s", code, stderr)
	}
	mapTask(1)
	// A committed object damaged since: the rerun finds it and maps the
	// task again.
	if err := exchange.Put(class, []byte("not a COG")); err != nil {
		t.Fatal(err)
	}
	if out := mapTask(1, "-q=false"); strings.Contains(out, "kept from an earlier run") {
		t.Errorf("a task over a damaged object was kept:\n%s", out)
	}
	must(t, "collect", "-q", "--work", work, "--out", job)
	pullAll()
	for _, rel := range []string{"class.tif", "confidence.tif"} {
		entries, _ := os.ReadDir(filepath.Join(got, "shards", "1-of-2"))
		for _, e := range entries {
			if e.IsDir() {
				same(filepath.Join("shards", "1-of-2", e.Name(), rel))
			}
		}
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("workspaces left after the reruns were committed: %v", left)
	}
}

func readObject(t *testing.T, url string) []byte {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "object")
	if err := exchange.Get(url, dst); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
