package stacext

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/lulc/lulc/internal/digest"
)

// schemas are the official JSON schemas of STAC and of the extensions
// lulc's documents declare (with the GeoJSON and PROJJSON schemas they
// reference), copied unmodified in a tree that mirrors their URLs
// (schemas/README.md names each file's source, version, commit and
// licence), so that documents validate without a network.
//
//go:embed schemas
var schemas embed.FS

// Checked is what Validate read: the STAC documents and the local assets
// whose checksums it verified.
type Checked struct {
	Documents, Assets int
}

// Validate validates the STAC document at path and every catalog,
// collection and item it links as child or item by a relative href,
// against the core schema of its type and version and the schemas of its
// stac_extensions (embedded; a schema lulc does not carry is an error,
// never fetched), and verifies each local asset that records a
// file:checksum (BLAKE3 or SHA-256 multihash) and file:size. The links
// are followed one document at a time, each once. The error names the
// document and what is wrong with it.
func Validate(path string) (Checked, error) {
	return ValidatePublished(path, "")
}

// ValidatePublished is Validate for a collection written to be published
// at base (lulc's --base-url): links and assets under base are read from
// the local copy, base standing for the directory of the document at path.
func ValidatePublished(path, base string) (Checked, error) {
	root, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return Checked{}, err
	}
	local := func(doc, href string) (string, bool) {
		if isRelative(href) {
			return filepath.Join(filepath.Dir(doc), filepath.FromSlash(href)), true
		}
		if rest, ok := strings.CutPrefix(href, strings.TrimRight(base, "/")+"/"); base != "" && ok {
			if rel, err := url.PathUnescape(rest); err == nil && filepath.IsLocal(filepath.FromSlash(rel)) {
				return filepath.Join(root, filepath.FromSlash(rel)), true
			}
		}
		return "", false
	}
	var c Checked
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		abs, err := filepath.Abs(p)
		if err != nil {
			return c, err
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		doc, err := validateDocument(abs)
		if err != nil {
			return c, err
		}
		c.Documents++
		for _, l := range doc.Links {
			if p, ok := local(abs, l.Href); ok && (l.Rel == "child" || l.Rel == "item") {
				queue = append(queue, p)
			}
		}
		n, err := checkAssets(abs, doc.Assets, local)
		c.Assets += n
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// isRelative says whether href is a path relative to its document.
func isRelative(href string) bool {
	return href != "" && !strings.Contains(href, "://") && !path.IsAbs(href)
}

// document is what Validate reads of a STAC document besides its schema.
type document struct {
	Type       string   `json:"type"`
	Version    string   `json:"stac_version"`
	Extensions []string `json:"stac_extensions"`
	Links      []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	} `json:"links"`
	Assets map[string]docAsset `json:"assets"`
}

// docAsset is what Validate reads of an asset.
type docAsset struct {
	Href     string `json:"href"`
	Checksum string `json:"file:checksum"`
	Size     *int64 `json:"file:size"`
}

// coreSchemas are the STAC core schemas by document type, under
// https://schemas.stacspec.org/v<stac_version>/.
var coreSchemas = map[string]string{
	"Feature":    "item-spec/json-schema/item.json",
	"Collection": "collection-spec/json-schema/collection.json",
	"Catalog":    "catalog-spec/json-schema/catalog.json",
}

// validateDocument validates one document against its core schema and its
// extensions' schemas.
func validateDocument(path string) (document, error) {
	var head document
	body, err := os.ReadFile(path)
	if err != nil {
		return head, err
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return head, fmt.Errorf("%s: not JSON: %w", path, err)
	}
	core, ok := coreSchemas[head.Type]
	if !ok || head.Version == "" {
		return head, fmt.Errorf("%s: not a STAC document (type %q, stac_version %q)", path, head.Type, head.Version)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return head, fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range append([]string{"https://schemas.stacspec.org/v" + head.Version + "/" + core}, head.Extensions...) {
		sch, err := compile(u)
		if err != nil {
			return head, fmt.Errorf("%s: %w", path, err)
		}
		if err := sch.Validate(doc); err != nil {
			return head, fmt.Errorf("%s: invalid against %s: %w", path, u, err)
		}
	}
	return head, nil
}

// checkAssets verifies the checksum and size of a document's local
// assets that record them, and says how many it verified.
func checkAssets(doc string, assets map[string]docAsset, local func(doc, href string) (string, bool)) (int, error) {
	n := 0
	for key, a := range assets {
		p, ok := local(doc, a.Href)
		if a.Checksum == "" || !ok {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return n, fmt.Errorf("%s: asset %s: %w", doc, key, err)
		}
		if a.Size != nil && fi.Size() != *a.Size {
			return n, fmt.Errorf("%s: asset %s: %s holds %d bytes, file:size says %d", doc, key, a.Href, fi.Size(), *a.Size)
		}
		if !digest.Matches(p, a.Checksum) {
			return n, fmt.Errorf("%s: asset %s: %s does not match its file:checksum %s", doc, key, a.Href, a.Checksum)
		}
		n++
	}
	return n, nil
}

var (
	// compiled caches compiled schemas by URL.
	compiled sync.Map
	// ecma sets, once, the pattern syntax JSON Schema specifies.
	ecma sync.Once
)

// compile returns the compiled schema at a URL, compiling it once from
// the embedded copies.
func compile(u string) (*jsonschema.Schema, error) {
	if s, ok := compiled.Load(u); ok {
		return s.(*jsonschema.Schema), nil
	}
	// JSON Schema's patterns are ECMAScript regular expressions (the file
	// extension's use lookaheads, which Go's regexp lacks).
	ecma.Do(func() { jsonschema.SetRegexpProvider(func() jsonschema.Regexp { return &ecmaRegexp{} }) })
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	c.LoadURL = loadSchema
	s, err := c.Compile(u)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", u, err)
	}
	compiled.Store(u, s)
	return s, nil
}

// loadSchema opens the embedded copy of the schema at a URL.
func loadSchema(raw string) (io.ReadCloser, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", raw, err)
	}
	rel := path.Clean(u.Host + u.Path)
	if !fs.ValidPath(rel) {
		return nil, fmt.Errorf("schema %s is not available offline", raw)
	}
	f, err := schemas.Open("schemas/" + rel)
	if err != nil {
		return nil, fmt.Errorf("schema %s is not available offline (lulc carries the schemas of the extensions it writes: source/stacext/schemas)", raw)
	}
	return f, nil
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
