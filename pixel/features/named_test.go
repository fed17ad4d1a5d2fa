package features

import (
	"slices"
	"testing"
)

// TestNamedSets checks that every named set parses into a feature set
// over the stack bands it needs, and their sizes: 20 per-pixel, 36
// context, 56 default.
func TestNamedSets(t *testing.T) {
	t.Parallel()
	sizes := map[string]int{"per-pixel": 20, "context": 36, "default": 56, "temporal": 71}
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	for _, name := range SetNames() {
		f, ok := Named(name)
		if !ok || len(f) != sizes[name] {
			t.Errorf("%s: %d features, want %d", name, len(f), sizes[name])
		}
		if name == "temporal" {
			continue // its planes come from a temporal stack
		}
		if _, err := NewSet(f, bands); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := Expand([]string{"ndvi", "per-pixel", "mean(B08,31)"})
	if len(got) != 21 || got[0] != "ndvi" || got[1] != "B02" || got[20] != "mean(B08,31)" || slices.Index(got, "ndvi") != 0 {
		t.Errorf("expand: %v", got)
	}
	if _, ok := Named("nope"); ok {
		t.Error("nope is a set")
	}
}

// TestExpandKeepsRepeats checks that an item written twice stays twice
// (NewSet names it), while sets and items overlapping are merged.
func TestExpandKeepsRepeats(t *testing.T) {
	t.Parallel()
	if got := Expand([]string{"ndvi", "ndvi"}); len(got) != 2 {
		t.Errorf("a repeated item: %v", got)
	}
	if got := Expand([]string{"per-pixel", "ndvi", "per-pixel"}); len(got) != 20 {
		t.Errorf("a set with an item it holds: %d features", len(got))
	}
	if _, err := NewSet(Expand([]string{"ndvi", "ndvi"}), []string{"B04", "B08"}); err == nil {
		t.Error("a repeated feature is accepted")
	}
}
