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

// Validate validates the STAC resource at path and, recursively, everything
// it links to.
func Validate(path string) error {
	if err := install(); err != nil {
		return err
	}
	return validator.New().Validate(context.Background(), path)
}
