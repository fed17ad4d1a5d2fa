package stactest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVendoredSchemasMatchTheirURLs checks that every vendored schema
// lies at the path its $id names, so that the loader serves each URL the
// schema it declares.
func TestVendoredSchemasMatchTheirURLs(t *testing.T) {
	if err := install(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var s struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(body, &s); err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		id := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s.ID, "https://"), "http://"), "#")
		if id != filepath.ToSlash(rel) {
			t.Errorf("%s declares $id %q", rel, s.ID)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 17 {
		t.Errorf("%d schemas vendored, want at least 17", n)
	}
}

const item = `{
  "type": "Feature", "stac_version": "1.0.0", "id": "x",
  "stac_extensions": [%q],
  "geometry": {"type": "Point", "coordinates": [0, 0]}, "bbox": [0, 0, 0, 0],
  "properties": {"datetime": "2024-01-01T00:00:00Z"},
  "links": [],
  "assets": {"a": {"href": "./a.tif", "file:checksum": %s}}
}`

// TestValidateUsesTheOfficialSchemas checks the vendored schemas reject
// what the specification rejects, and that an undeclared version is not
// fetched.
func TestValidateUsesTheOfficialSchemas(t *testing.T) {
	cases := []struct {
		name, ext, checksum string
		ok                  bool
	}{
		{"valid", "https://stac-extensions.github.io/file/v2.1.0/schema.json", `"1220` + strings.Repeat("ab", 32) + `"`, true},
		{"checksum not hex", "https://stac-extensions.github.io/file/v2.1.0/schema.json", `"sha256:xyz"`, false},
		{"checksum not a string", "https://stac-extensions.github.io/file/v2.1.0/schema.json", `12`, false},
		{"version not vendored", "https://stac-extensions.github.io/file/v9.9.9/schema.json", `"1220"`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "item.json")
			if err := os.WriteFile(p, []byte(strings.Replace(strings.Replace(item, "%q", `"`+c.ext+`"`, 1), "%s", c.checksum, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Validate(p)
			if c.ok && err != nil {
				t.Errorf("valid item refused: %v", err)
			}
			if !c.ok && err == nil {
				t.Error("invalid item validated")
			}
		})
	}
}

// TestValidateFollowsItems checks that a collection's items are validated
// too: one bad item of many fails the collection.
func TestValidateFollowsItems(t *testing.T) {
	dir := t.TempDir()
	good := `"1220` + strings.Repeat("ab", 32) + `"`
	var links []string
	for i := range 12 {
		sum := good
		if i == 9 {
			sum = `12`
		}
		body := strings.Replace(strings.Replace(item, "%q", `"https://stac-extensions.github.io/file/v2.1.0/schema.json"`, 1), "%s", sum, 1)
		body = strings.Replace(body, `"id": "x"`, fmt.Sprintf(`"id": "x%d"`, i), 1)
		name := fmt.Sprintf("i%d/item.json", i)
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("i%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		links = append(links, fmt.Sprintf(`{"rel": "item", "href": "./%s"}`, name))
	}
	coll := `{"type": "Collection", "stac_version": "1.0.0", "id": "c", "description": "d", "license": "proprietary",
  "extent": {"spatial": {"bbox": [[0, 0, 1, 1]]}, "temporal": {"interval": [["2024-01-01T00:00:00Z", null]]}},
  "links": [` + strings.Join(links, ", ") + `]}`
	p := filepath.Join(dir, "collection.json")
	if err := os.WriteFile(p, []byte(coll), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Validate(p); err == nil {
		t.Error("a collection with an invalid item validated")
	}
}
