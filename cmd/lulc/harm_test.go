package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
)

// treeHashes maps every file under root (relative path) to its SHA-256, and
// every directory to "dir", so that a deleted, replaced, changed or added
// entry shows as a difference.
func treeHashes(t *testing.T, root string) map[string]string {
	t.Helper()
	h := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			h[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h[rel] = "link " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			h[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// assertUnchanged fails on any file under root that differs from before.
func assertUnchanged(t *testing.T, root string, before map[string]string) {
	t.Helper()
	after := treeHashes(t, root)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed (before %.12s, after %.12s)", p, h, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// refused runs a command line that must fail with a message containing
// every string of want, leaving every file under root as it was.
func refused(t *testing.T, root string, want []string, args ...string) {
	t.Helper()
	before := treeHashes(t, root)
	code, _, stderr := lulc(t, args...)
	if code == 0 {
		t.Errorf("%v: exit 0, want a failure", args)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%v: message %q does not name %q", args, stderr, w)
		}
	}
	assertUnchanged(t, root, before)
}

// TestInputsAreNeverTouched runs every command with an --out that is, lies
// inside or contains one of its inputs, with --force: each is refused before
// any work, naming both paths, and no file changes.
func TestInputsAreNeverTouched(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	scene := filepath.Join(dir, "scene")
	catalog := filepath.Join(scene, "catalog.json")
	labels := filepath.Join(stack, "31TEJ", "labels.tif")
	cfgDir := filepath.Join(dir, "configs")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"synth-tiny.yaml", "train-demo.yaml", "bench-demo.yaml"} {
		raw, err := configs.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trainCfg := filepath.Join(cfgDir, "train-demo.yaml")
	link := filepath.Join(dir, "stack-link")
	if err := os.Symlink(stack, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want []string
		args []string
	}{
		{"predict into its stack", []string{"--out " + stack, "is the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", stack}},
		{"predict inside its stack", []string{"lies inside the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", filepath.Join(stack, "maps")}},
		{"predict over the directory holding its inputs", []string{"--out " + dir, "contains the input"},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", dir}},
		{"predict onto its model", []string{"is the input " + model},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", model}},
		{"predict through a link to its stack", []string{"--out " + link, "is the input " + stack},
			[]string{"predict", "-q", "--force", "--model", model, "--input", stack, "--out", link}},
		{"predict from STAC into the scene", []string{"--out " + scene, "is the input " + scene},
			[]string{"predict", "-q", "--force", "--model", model, "--catalog", catalog, "--out", scene}},
		{"predict from STAC whose stack would land in the scene", []string{"lies inside the input " + scene},
			[]string{"predict", "-q", "--force", "--model", model, "--catalog", catalog, "--out", filepath.Join(scene, "maps")}},
		{"ingest into its catalog's directory", []string{"--out " + scene, "is the input " + scene},
			[]string{"ingest", "-q", "--force", "--catalog", catalog, "--out", scene}},
		{"ingest inside its catalog's directory", []string{"lies inside the input " + scene},
			[]string{"ingest", "-q", "--force", "--catalog", catalog, "--out", filepath.Join(scene, "stack")}},
		{"train into its stack", []string{"--out " + stack, "is the input " + stack},
			[]string{"train", "-q", "--force", "--stack", stack, "--out", stack}},
		{"train over its config's directory", []string{"--out " + cfgDir, "contains the input " + trainCfg},
			[]string{"train", "-q", "--force", "-c", trainCfg, "--stack", stack, "--out", cfgDir}},
		{"evaluate over its labels' directory", []string{"contains the input " + labels},
			[]string{"evaluate", "-q", "--force", "--prediction", labels, "--labels", labels, "--out", filepath.Dir(labels)}},
		{"synth over its config's directory", []string{"--out " + cfgDir, "contains the input"},
			[]string{"synth", "-q", "--force", "-c", filepath.Join(cfgDir, "synth-tiny.yaml"), "--out", cfgDir}},
		{"bench over its config's directory", []string{"--out " + cfgDir, "contains the input"},
			[]string{"bench", "-q", "--force", "-c", filepath.Join(cfgDir, "bench-demo.yaml"), "--out", cfgDir}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { refused(t, dir, c.want, c.args...) })
	}
}

// secretsIn returns the secrets found in any file under root or in text.
func secretsIn(t *testing.T, root string, texts []string, secrets ...string) []string {
	t.Helper()
	var found []string
	check := func(where, body string) {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				found = append(found, where+" holds "+s)
			}
		}
	}
	for i, txt := range texts {
		check("output stream "+string(rune('0'+i)), txt)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			check(p, string(b))
		}
		return nil
	})
	return found
}

// TestIngestWritesNoSecrets ingests with a SAS token and cloud keys in the
// config: the stack, its manifests, the resolved config and the debug log
// hold none of them, and the resolved config uses the config's own keys.
func TestIngestWritesNoSecrets(t *testing.T) {
	dir := t.TempDir()
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", scene); code != 0 {
		t.Fatal(stderr)
	}
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"TopSecretSig0123", "wJalrXUtnFEMIK7MDENGbPxRfiCY", "pa55word99"}
	cfg := strings.Replace(string(raw), "  gdal:\n", "  sas_token: sv=2024-05-04&sr=c&sig="+secrets[0]+"\n  gdal:\n"+
		"    AWS_SECRET_ACCESS_KEY: "+secrets[1]+"\n    GDAL_HTTP_USERPWD: alice:"+secrets[2]+"\n", 1)
	cfgPath := filepath.Join(dir, "ingest.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "stack")
	code, stdout, stderr := lulc(t, "ingest", "-v", "-c", cfgPath, "--catalog", filepath.Join(scene, "catalog.json"), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if leaks := secretsIn(t, out, []string{stdout, stderr}, secrets...); len(leaks) > 0 {
		t.Errorf("secrets written: %v", leaks)
	}
	resolved, err := os.ReadFile(filepath.Join(out, "ingest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"source:\n", "sas_token: REDACTED", "AWS_SECRET_ACCESS_KEY: REDACTED", "GDAL_HTTP_MAX_RETRY: \"4\"", "max_cloud_cover: 60"} {
		if !strings.Contains(string(resolved), want) {
			t.Errorf("ingest.yaml lacks %q:\n%s", want, resolved)
		}
	}
	if strings.Contains(string(resolved), "SASToken") {
		t.Errorf("ingest.yaml uses Go field names:\n%s", resolved)
	}
	// The resolved config is a config: ingest takes it back.
	code, _, stderr = lulc(t, "ingest", "-q", "-c", filepath.Join(out, "ingest.yaml"), "--catalog", filepath.Join(scene, "catalog.json"), "--out", filepath.Join(dir, "again"))
	if code != 0 {
		t.Errorf("ingest from the resolved config: exit %d: %s", code, stderr)
	}
}

// sceneWithHref makes a tiny scene whose first Sentinel-2 item's red asset
// points at href (a copy of the real file lies where a relative href
// leads), and returns the catalog and the item's path.
func sceneWithHref(t *testing.T, dir string, href func(itemDir string) string) (catalog, item string) {
	t.Helper()
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", scene); code != 0 {
		t.Fatal(stderr)
	}
	items, _ := filepath.Glob(filepath.Join(scene, "sentinel-2-l2a", "*", "*.json"))
	if len(items) == 0 {
		t.Fatal("no items in the scene")
	}
	item = items[0]
	body, err := os.ReadFile(item)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	red := doc["assets"].(map[string]any)["red"].(map[string]any)
	real, _ := red["href"].(string)
	if !filepath.IsAbs(real) {
		real = filepath.Join(filepath.Dir(item), real)
	}
	raw, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	// The file the hostile href names exists and is a valid band: only the
	// policy stands between lulc and it.
	if err := os.WriteFile(filepath.Join(dir, "outside.tif"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	red["href"] = href(filepath.Dir(item))
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(item, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(scene, "catalog.json"), item
}

// TestHrefsStayInTheCatalog gives a static item a relative href that
// climbs out of the catalog, and an absolute one elsewhere: ingest refuses
// each, naming the href and the rule, writes nothing and changes nothing;
// source.allow_hrefs lets the same file be read.
func TestHrefsStayInTheCatalog(t *testing.T) {
	for _, c := range []struct {
		name string
		href func(dir, itemDir string) string
	}{
		{"relative", func(dir, itemDir string) string {
			rel, _ := filepath.Rel(itemDir, filepath.Join(dir, "outside.tif"))
			return rel
		}},
		{"absolute", func(dir, _ string) string { return filepath.Join(dir, "outside.tif") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			catalog, _ := sceneWithHref(t, dir, func(itemDir string) string { return c.href(dir, itemDir) })
			refused(t, dir, []string{"outside.tif", "is outside the catalog directory", "source.allow_hrefs"},
				"ingest", "-q", "--catalog", catalog, "--out", filepath.Join(dir, "stack"))

			raw, _ := configs.Read("ingest-tiny.yaml")
			cfg := strings.Replace(string(raw), "  gdal:\n", "  allow_hrefs: ["+dir+"]\n  gdal:\n", 1)
			cfgPath := filepath.Join(t.TempDir(), "ingest.yaml")
			os.WriteFile(cfgPath, []byte(cfg), 0o644)
			if code, _, stderr := lulc(t, "ingest", "-q", "-c", cfgPath, "--catalog", catalog, "--out", filepath.Join(t.TempDir(), "stack")); code != 0 {
				t.Errorf("with allow_hrefs: exit %d: %s", code, stderr)
			}
		})
	}
}

// stacAPI serves /search from a handler and counts the requests.
func stacAPI(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, self string)) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		// A handler notices the client leaving only once it has read the
		// request body.
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/geo+json")
		handle(w, r, srv.URL+"/search")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// apiConfig writes an ingest config that searches api.
func apiConfig(t *testing.T, api string) string {
	t.Helper()
	raw, _ := configs.Read("ingest-tiny.yaml")
	cfg := strings.Replace(string(raw), "  catalog: runs/demo/scene/catalog.json\n", "  api: "+api+"\n  request_timeout: 2s\n  search_timeout: 10s\n", 1)
	p := filepath.Join(t.TempDir(), "ingest.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const oneFeature = `{"type": "Feature", "stac_version": "1.0.0", "id": "S2A_31TEJ_20240418_0_L2A", "collection": "sentinel-2-l2a",
 "bbox": [2.99, 45.12, 3.04, 45.16], "geometry": null,
 "properties": {"datetime": "2024-04-18T10:56:29Z", "s2:mgrs_tile": "31TEJ", "eo:cloud_cover": 1},
 "assets": {"red": {"href": "%s"}}}`

// TestSTACAPIHostile searches APIs that answer with a local href, a next
// link that loops (GET, and POST with merge) and a stalled response: each
// ingest stops with a message saying why, within a few requests, and
// leaves every file as it was.
func TestSTACAPIHostile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("pre-existing"), 0o644)
	page := func(href string, links string) string {
		return `{"type": "FeatureCollection", "features": [` + fmt.Sprintf(oneFeature, href) + `], "links": [` + links + `]}`
	}
	cases := []struct {
		name    string
		handle  func(w http.ResponseWriter, r *http.Request, self string)
		want    []string
		maxReqs int64
	}{
		{"local href", func(w http.ResponseWriter, _ *http.Request, _ string) {
			io.WriteString(w, page("/etc/passwd", ""))
		}, []string{`"/etc/passwd"`, "is a local path", "source.allow_hrefs"}, 2},
		{"next link loops (GET)", func(w http.ResponseWriter, _ *http.Request, self string) {
			io.WriteString(w, page("https://example.com/B04.tif", `{"rel": "next", "href": "`+self+`", "method": "GET"}`))
		}, []string{"would repeat page", "loop"}, 3},
		{"next link loops (POST, merge)", func(w http.ResponseWriter, _ *http.Request, self string) {
			io.WriteString(w, page("https://example.com/B04.tif", `{"rel": "next", "href": "`+self+`", "method": "POST", "merge": true, "body": {"limit": 100}}`))
		}, []string{"would repeat page", "loop"}, 3},
		{"stalled response", func(w http.ResponseWriter, r *http.Request, _ string) {
			<-r.Context().Done()
		}, []string{"source.request_timeout"}, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api, n := stacAPI(t, c.handle)
			start := time.Now()
			refused(t, dir, c.want, "ingest", "-q", "-c", apiConfig(t, api), "--out", filepath.Join(dir, "stack"))
			if got := n.Load(); got > c.maxReqs {
				t.Errorf("%d requests, want at most %d", got, c.maxReqs)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("gave up after %s", d)
			}
		})
	}
}
