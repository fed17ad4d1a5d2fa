package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/lulc/lulc/"

// TestImportsPointDown parses every Go file of the module and fails on an
// import from a folder above the importer's, from a folder Order does not
// know, or, outside tests, of a package Apart keeps from the importer's
// folder. External test packages (package x_test) are exempt: they use
// a package from outside, as its callers do.
func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// Nested modules (the notebooks' tools) and hidden folders
			// keep rules of their own.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == filepath.Join("notebooks", "tools")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		from := top(filepath.ToSlash(rel))
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			return nil
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			seen++
			to := top(strings.TrimPrefix(p, module))
			fi, ti := slices.Index(Order, from), slices.Index(Order, to)
			switch {
			case fi < 0:
				t.Errorf("%s: folder %q is not in layout.Order", rel, from)
			case ti < 0:
				t.Errorf("%s imports %s: folder %q is not in layout.Order", rel, p, to)
			case ti < fi:
				t.Errorf("%s imports %s: %s/ is above %s/ (imports point down: docs/architecture.md, Layout)", rel, p, to, from)
			case slices.Contains(Apart[from], strings.TrimPrefix(p, module)) && !strings.HasSuffix(path, "_test.go"):
				t.Errorf("%s imports %s, which hangs off the side of %s/ (layout.Apart: docs/architecture.md, Packages)", rel, p, from)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 100 {
		t.Fatalf("only %d imports of lulc's packages found under %s: not the module's root?", seen, root)
	}
}

// top is the first element of a slash-separated path.
func top(p string) string {
	first, _, _ := strings.Cut(p, "/")
	return first
}

// TestStagesImportTheirBase checks the rule inside stage/ (Stages): the
// stages meet only through the base and the configs, but for the arrows
// Stages lists.
func TestStagesImportTheirBase(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pkgs, err := filepath.Glob(filepath.Join(root, "stage", "*"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := append([]string{filepath.Join(root, "stage")}, pkgs...)
	seen := 0
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		rel, _ := filepath.Rel(root, dir)
		from := filepath.ToSlash(rel)
		allowed, ok := Stages[from]
		if !ok {
			allowed = StageBase
		}
		for _, file := range files {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f.Name.Name, "_test") {
				continue
			}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				to := strings.TrimPrefix(p, module)
				if to != "stage" && !strings.HasPrefix(to, "stage/") {
					continue
				}
				seen++
				if to != from && !slices.Contains(allowed, to) && !strings.HasSuffix(file, "_test.go") {
					t.Errorf("%s imports %s: %s may import only %v of stage/ (layout.Stages)", filepath.Base(file), to, from, allowed)
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d imports within stage/ found: not the module's root?", seen)
	}
}
