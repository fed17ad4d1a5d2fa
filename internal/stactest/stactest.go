// Package stactest validates STAC documents in tests without a network:
// each document against its core schema (by type and stac_version) and
// the schemas of its stac_extensions, with santhosh-tekuri/jsonschema (the
// validator go-stac's own uses), the schemas served from local files.
//
// The schemas are the official ones, vendored under the repository's
// testdata/stac-schemas (its README names each file's source, version,
// commit and licence), in a tree that mirrors their URLs. A schema that is
// not there fails validation rather than being fetched.
package stactest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dlclark/regexp2"
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
		// JSON Schema's patterns are ECMAScript regular expressions (the
		// file extension's use lookaheads, which Go's regexp lacks).
		jsonschema.SetRegexpProvider(func() jsonschema.Regexp { return &ecmaRegexp{} })
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
// crawler: its in-memory queue races (the race detector reports it, even
// for a single document) and can end a crawl before its queued documents
// run.
func Validate(path string) error {
	if err := install(); err != nil {
		return err
	}
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
		links, err := validateDocument(abs)
		if err != nil {
			return err
		}
		for _, l := range links {
			if (l.Rel == "child" || l.Rel == "item") && !strings.Contains(l.Href, "://") {
				queue = append(queue, filepath.Join(filepath.Dir(abs), filepath.FromSlash(l.Href)))
			}
		}
	}
	return nil
}

// coreSchemas are the STAC core schemas by document type, under
// https://schemas.stacspec.org/v<stac_version>/.
var coreSchemas = map[string]string{
	"Feature":    "item-spec/json-schema/item.json",
	"Collection": "collection-spec/json-schema/collection.json",
	"Catalog":    "catalog-spec/json-schema/catalog.json",
}

// compiled caches compiled schemas by URL.
var compiled sync.Map

// validateDocument validates one STAC document against its core schema
// and its extensions' schemas, and returns its links.
func validateDocument(path string) ([]link, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Type       string   `json:"type"`
		Version    string   `json:"stac_version"`
		Extensions []string `json:"stac_extensions"`
		Links      []link   `json:"links"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	core, ok := coreSchemas[head.Type]
	if !ok || head.Version == "" {
		return nil, fmt.Errorf("%s: not a STAC document (type %q, stac_version %q)", path, head.Type, head.Version)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range append([]string{"https://schemas.stacspec.org/v" + head.Version + "/" + core}, head.Extensions...) {
		sch, err := compile(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := sch.Validate(doc); err != nil {
			return nil, fmt.Errorf("%s: invalid against %s: %w", path, u, err)
		}
	}
	return head.Links, nil
}

// link is a STAC link as the walk follows it.
type link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
}

// compile returns the compiled schema at a URL, compiling it once.
func compile(u string) (*jsonschema.Schema, error) {
	if s, ok := compiled.Load(u); ok {
		return s.(*jsonschema.Schema), nil
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	s, err := c.Compile(u)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", u, err)
	}
	compiled.Store(u, s)
	return s, nil
}

// ecmaRegexp is a jsonschema.Regexp in ECMAScript syntax (regexp2).
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r *ecmaRegexp) Compile(expr string) error {
	re, err := regexp2.Compile(expr, regexp2.ECMAScript)
	r.re = re
	return err
}

func (r *ecmaRegexp) MustCompile(expr string) { r.re = regexp2.MustCompile(expr, regexp2.ECMAScript) }

func (r *ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return ok && err == nil
}

func (r *ecmaRegexp) String() string { return r.re.String() }
