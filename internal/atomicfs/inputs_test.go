package atomicfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckInputs(t *testing.T) {
	dir := t.TempDir()
	stack := filepath.Join(dir, "stack")
	model := filepath.Join(dir, "run", "model.lulcrf")
	for _, d := range []string{stack, filepath.Dir(model)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(model, []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(stack, link); err != nil {
		t.Fatal(err)
	}
	inputs := []string{stack, model, "https://example.com/stack", "/vsis3/b/k.tif", filepath.Join(dir, "missing")}
	cases := []struct {
		name, out, want string
	}{
		{"same directory", stack, "is the input " + stack},
		{"same, with a trailing slash and dots", stack + "/./", "is the input"},
		{"inside the input", filepath.Join(stack, "maps"), "lies inside the input " + stack},
		{"contains the input", dir, "contains the input"},
		{"the model file", model, "is the input " + model},
		{"a link to the input", link, "is the input " + stack},
		{"inside a link to the input", filepath.Join(link, "x"), "lies inside the input"},
		{"file URL", "file://" + stack, "is the input"},
		{"sibling", filepath.Join(dir, "maps"), ""},
		{"name sharing a prefix", stack + "2", ""},
		{"missing input's place", filepath.Join(dir, "missing", "x"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckInputs(c.out, inputs...)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrOverlapsInput) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.out) {
				t.Fatalf("error %v, want %q naming %s", err, c.want, c.out)
			}
		})
	}
}
