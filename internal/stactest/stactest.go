// Package stactest validates STAC documents in tests without a network:
// go-stac's validator with the JSON schemas served from local files.
//
// The STAC core, GeoJSON and eo schemas come from go-stac's own module
// (validator/testdata, found through `go list`). The projection, raster,
// view and classification schemas, which no dependency ships, are lulc's
// stand-ins under schemas/, written from the extensions' specifications.
package stactest

import (
	"context"
	"embed"
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

//go:embed schemas/*.json
var own embed.FS

var ownSchemas = map[string]string{
	"stac-extensions.github.io/projection/v1.1.0/schema.json":     "schemas/projection-v1.1.0.json",
	"stac-extensions.github.io/raster/v1.1.0/schema.json":         "schemas/raster-v1.1.0.json",
	"stac-extensions.github.io/view/v1.0.0/schema.json":           "schemas/view-v1.0.0.json",
	"stac-extensions.github.io/classification/v1.0.0/schema.json": "schemas/classification-v1.0.0.json",
	"stac-extensions.github.io/file/v2.1.0/schema.json":           "schemas/file-v2.1.0.json",
}

// eo v1.1.0 only adds optional fields to v1.0.0, the version go-stac ships:
// v1.0.0's schema stands in for it, with its own URI rewritten.
const (
	eoV110 = "stac-extensions.github.io/eo/v1.1.0/schema.json"
	eoV100 = "stac-extensions.github.io/eo/v1.0.0/schema.json"
)

var (
	setup    sync.Once
	setupErr error
	goStac   string
)

func install() error {
	setup.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/planetlabs/go-stac").Output()
		if err != nil {
			setupErr = fmt.Errorf("locate go-stac module: %w", err)
			return
		}
		goStac = filepath.Join(strings.TrimSpace(string(out)), "validator", "testdata", "schema")
		load := func(raw string) (io.ReadCloser, error) {
			u, err := url.Parse(raw)
			if err != nil {
				return nil, err
			}
			key := u.Host + u.Path
			if key == eoV110 {
				body, err := os.ReadFile(filepath.Join(goStac, filepath.FromSlash(eoV100)))
				if err != nil {
					return nil, fmt.Errorf("schema %s is not available offline: %w", raw, err)
				}
				return io.NopCloser(strings.NewReader(strings.ReplaceAll(string(body), eoV100, eoV110))), nil
			}
			if p, ok := ownSchemas[key]; ok {
				return own.Open(p)
			}
			f, err := os.Open(filepath.Join(goStac, filepath.FromSlash(key)))
			if err != nil {
				return nil, fmt.Errorf("schema %s is not available offline: %w", raw, err)
			}
			return f, nil
		}
		jsonschema.Loaders["http"] = load
		jsonschema.Loaders["https"] = load
	})
	return setupErr
}

// Validate validates the STAC resource at path and, recursively, everything
// it links to.
func Validate(path string) error {
	if err := install(); err != nil {
		return err
	}
	return validator.New().Validate(context.Background(), path)
}
