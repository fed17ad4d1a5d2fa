package stactest

import (
	"encoding/json"
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
