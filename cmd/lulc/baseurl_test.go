package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hrefsOf lists the links' and assets' hrefs of every JSON document in dir.
func hrefsOf(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		var doc struct {
			Version string                       `json:"stac_version"`
			Links   []struct{ Rel, Href string } `json:"links"`
			Assets  map[string]struct{ Href string }
		}
		body, _ := os.ReadFile(p)
		if json.Unmarshal(body, &doc) != nil || doc.Version == "" {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		for _, l := range doc.Links {
			out[rel] = append(out[rel], l.Rel+" "+l.Href)
		}
		for k, a := range doc.Assets {
			out[rel] = append(out[rel], "asset:"+k+" "+a.Href)
		}
		return nil
	})
	return out
}

// TestBaseURL: with --base-url, a run's, a prediction's and a stack's
// STAC documents link themselves, their collection and their assets by
// absolute URLs under it, and what lies outside the output (a model given
// from elsewhere, the scenes) by file:// URLs: no link leaves the
// collection relatively. lulc validate --base-url checks the copy
// offline, checksums included; a bad URL or a sharded run is refused.
func TestBaseURL(t *testing.T) {
	w := hostileWorld(t)
	dir := t.TempDir()
	const base = "https://data.example.org/lulc/maps"
	for _, c := range []struct {
		name string
		args []string
		docs int
	}{
		{"predict", []string{"predict", "-q", "--confidence", "--model", w.model, "--input", w.stack}, 2},
		{"run", []string{"run", "-q", "--stack", "-c", "run-demo.yaml", "--catalog", w.catalog}, 3},
		{"ingest", []string{"ingest", "-q", "--catalog", w.catalog}, 2},
	} {
		out := filepath.Join(dir, c.name)
		if code, _, stderr := lulc(t, append(c.args, "--out", out, "--base-url", base+"/"+c.name+"/")...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		docs := hrefsOf(t, out)
		if len(docs) != c.docs {
			t.Errorf("%s: %d STAC documents, want %d: %v", c.name, len(docs), c.docs, docs)
		}
		for doc, hrefs := range docs {
			for _, h := range hrefs {
				rel, href, _ := strings.Cut(h, " ")
				switch {
				case strings.HasPrefix(href, base+"/"+c.name+"/"):
				case strings.HasPrefix(href, "file:///") && (rel == "derived_from"):
				default:
					t.Errorf("%s %s: %s is neither under the base URL nor absolute", c.name, doc, h)
				}
			}
		}
		if !strings.Contains(strings.Join(docs["collection.json"], "\n"), "self "+base+"/"+c.name+"/collection.json") {
			t.Errorf("%s: collection links %v", c.name, docs["collection.json"])
		}
		code, stdout, stderr := lulc(t, "validate", "--json", out, "--base-url", base+"/"+c.name)
		var v struct{ Documents, Assets int }
		if json.Unmarshal([]byte(stdout), &v); code != 0 || v.Documents != c.docs || v.Assets < 2 {
			t.Errorf("%s: validate --base-url: exit %d, %s %s", c.name, code, stdout, stderr)
		}
	}
	// The run's model is its own: linked under the base URL.
	if !strings.Contains(strings.Join(hrefsOf(t, filepath.Join(dir, "run"))[filepath.Join("31TEJ", "item.json")], "\n"), "derived_from "+base+"/run/model/model.lulcrf") {
		t.Errorf("run's item does not link its model under the base URL: %v", hrefsOf(t, filepath.Join(dir, "run")))
	}
	for _, args := range [][]string{
		{"predict", "--model", w.model, "--input", w.stack, "--out", filepath.Join(dir, "x"), "--base-url", "ftp://example.org/x"},
		{"predict", "--model", w.model, "--input", w.stack, "--out", filepath.Join(dir, "x"), "--base-url", "https://example.org/x?sig=secret"},
		{"run", "-c", "run-demo.yaml", "--model", w.model, "--catalog", w.catalog, "--shard", "1/2", "--out", filepath.Join(dir, "x"), "--base-url", base},
	} {
		if code, _, stderr := lulc(t, args...); code != exitUsage || !strings.Contains(stderr, "base-url") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}
