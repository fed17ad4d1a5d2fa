// Package stactest validates STAC documents in tests without a network:
// go-stac's validator with the JSON schemas served from local files.
//
// The schemas are the official ones, vendored under the repository's
// testdata/stac-schemas (its README names each file's source, version,
// commit and licence), in a tree that mirrors their URLs. A schema that is
// not there fails validation rather than being fetched.
package stactest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/planetlabs/go-stac/validator"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// SchemaDir is where the vendored schemas lie, relative to the module's
// root.
const SchemaDir = "testdata/stac-schemas"

var (
	setup    sync.Once
	setupErr error
	dir      string
)

// install points jsonschema's http and https loaders at the vendored
// schemas, once.
func install() error {
	setup.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/lulc/lulc").Output()
		if err != nil {
			setupErr = fmt.Errorf("locate the lulc module: %w", err)
			return
		}
		dir = filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(SchemaDir))
		jsonschema.Loaders["http"] = load
		jsonschema.Loaders["https"] = load
	})
	return setupErr
}

// load opens the vendored copy of the schema at a URL.
func load(raw string) (io.ReadCloser, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", raw, err)
	}
	rel := filepath.Clean(filepath.FromSlash(u.Host + u.Path))
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("schema %s is not available offline", raw)
	}
	f, err := os.Open(filepath.Join(dir, rel))
	if err != nil {
		return nil, fmt.Errorf("schema %s is not available offline (vendor it under %s): %w", raw, SchemaDir, err)
	}
	return f, nil
}

// Validate validates the STAC resource at path and, recursively, every
// catalog, collection and item it links to as child or item. The links are
// followed here, one document at a time, rather than by go-stac's
// crawler: its in-memory queue races (the race detector reports it) and
// can end a crawl before its queued documents run.
func Validate(path string) error {
	if err := install(); err != nil {
		return err
	}
	v := validator.New(&validator.Options{NoRecursion: true})
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		if err := v.Validate(context.Background(), abs); err != nil {
			return err
		}
		body, err := os.ReadFile(abs)
		if err != nil {
			return err
		}
		var doc struct {
			Links []struct{ Rel, Href string }
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("%s: %w", abs, err)
		}
		for _, l := range doc.Links {
			if (l.Rel == "child" || l.Rel == "item") && !strings.Contains(l.Href, "://") {
				queue = append(queue, filepath.Join(filepath.Dir(abs), filepath.FromSlash(l.Href)))
			}
		}
	}
	return nil
}
