package stacext

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/digest"
)

// TestSchemasMatchTheirURLs: every embedded schema lies at the path its
// $id names, so that the loader serves each URL the schema it declares.
func TestSchemasMatchTheirURLs(t *testing.T) {
	t.Parallel()
	n := 0
	err := fs.WalkDir(schemas, "schemas", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		body, err := schemas.ReadFile(p)
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
		id := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s.ID, "https://"), "http://"), "#")
		if "schemas/"+id != p {
			t.Errorf("%s declares $id %q", p, s.ID)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 19 {
		t.Errorf("%d schemas embedded, want at least 19", n)
	}
}

// writeDoc writes a JSON document.
func writeDoc(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestValidate: a catalog with an item and its asset validates, schema
// and checksum; an item the item schema refuses, an extension lulc does
// not carry, an asset whose bytes changed or went missing, are errors
// that name the document and the fault.
func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	asset := []byte("a class map's bytes")
	if err := os.WriteFile(filepath.Join(dir, "class.tif"), asset, 0o644); err != nil {
		t.Fatal(err)
	}
	// BLAKE3-256 of the bytes above as a multihash, as lulc records it.
	sum := "1e20" + digest.Bytes(asset)
	item := map[string]any{
		"type": "Feature", "stac_version": "1.0.0", "id": "t", "stac_extensions": []string{FileURI},
		"geometry": map[string]any{"type": "Point", "coordinates": []float64{3, 45}}, "bbox": []float64{3, 45, 3, 45},
		"properties": map[string]any{"datetime": "2024-04-18T10:56:29Z"},
		"links":      []any{},
		"assets":     map[string]any{"map": map[string]any{"href": "./class.tif", "file:checksum": sum, "file:size": len(asset)}},
	}
	writeDoc(t, filepath.Join(dir, "item.json"), item)
	writeDoc(t, filepath.Join(dir, "catalog.json"), map[string]any{
		"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "test",
		"links": []any{map[string]any{"rel": "item", "href": "./item.json"}},
	})
	c, err := Validate(filepath.Join(dir, "catalog.json"))
	if err != nil || c.Documents != 2 || c.Assets != 1 {
		t.Fatalf("a valid catalog: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   string
	}{
		{"no datetime", func() { item["properties"] = map[string]any{} }, "invalid against https://schemas.stacspec.org/v1.0.0/item-spec"},
		{"unknown extension", func() {
			item["stac_extensions"] = []string{"https://stac-extensions.github.io/nope/v9.9.9/schema.json"}
		}, "not available offline"},
		{"changed bytes", func() { os.WriteFile(filepath.Join(dir, "class.tif"), []byte("other bytes of one size"), 0o644) }, "file:size says"},
		{"same size, other bytes", func() { os.WriteFile(filepath.Join(dir, "class.tif"), []byte("A class map's bytes"), 0o644) }, "does not match its file:checksum"},
		{"missing asset", func() { os.Remove(filepath.Join(dir, "class.tif")) }, "asset map"},
	} {
		saved := map[string]any{}
		for k, v := range item {
			saved[k] = v
		}
		tc.change()
		writeDoc(t, filepath.Join(dir, "item.json"), item)
		_, err := Validate(filepath.Join(dir, "catalog.json"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "item.json") {
			t.Errorf("%s: %v, want an error naming item.json and %q", tc.name, err, tc.want)
		}
		item = saved
		os.WriteFile(filepath.Join(dir, "class.tif"), asset, 0o644)
	}
}
