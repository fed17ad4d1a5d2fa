package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseItem feeds ParseItem mutated STAC items, and the search-page
// decoder mutated pages, seeded with the real items and API responses in
// ../shared/data: they must return an error or an item, never panic.
func FuzzParseItem(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(shared, "stac-responses", "*", "*.json"))
	more, _ := filepath.Glob(filepath.Join(shared, "earthsearch-s2-l2a-29RKH-2020-02-19", "*.json"))
	for _, p := range append(seeds, more...) {
		if body, err := os.ReadFile(p); err == nil {
			f.Add(body)
		}
	}
	f.Add([]byte(`{"type": "Feature", "id": "x", "bbox": [1, 2, 3], "properties": {"datetime": "soon"}, "assets": {"a": {"href": "../../x"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if it, err := ParseItem(body, "/catalog/items/x.json"); err == nil && it.ID == "" {
			t.Fatal("an item without an id parsed")
		}
		var pg searchPage
		if json.Unmarshal(body, &pg) == nil {
			for _, feat := range pg.Features {
				ParseItem(feat, "https://example.com/search")
			}
		}
	})
}

// FuzzHrefPolicy checks the policy on arbitrary hrefs: no panic, and no
// href with a ".." segment or outside every allowed place passes.
func FuzzHrefPolicy(f *testing.F) {
	for _, s := range []string{"/catalog/a/b.tif", "../../../../etc/passwd", "https://h/x.tif", "file:///etc/passwd", "/vsis3/b/k.tif", "s3://b/../k", "%2e%2e/x", ""} {
		f.Add(s)
	}
	p := HrefPolicy{Root: "/catalog", Allow: []string{"https://example.com/data/"}}
	f.Fuzz(func(t *testing.T, href string) {
		if p.Check(href) != nil {
			return
		}
		if filepath.IsAbs(href) && !inDir(filepath.Clean(href), "/catalog") {
			t.Fatalf("%q passed outside /catalog", href)
		}
	})
}

func inDir(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}
