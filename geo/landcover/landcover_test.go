package landcover

import (
	"fmt"
	"image/color"
	"strings"
	"testing"
)

func TestWorldCover(t *testing.T) {
	t.Parallel()
	if err := WorldCover.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(WorldCover.Classes) != 11 || !WorldCover.Has(95) || WorldCover.Has(15) || WorldCover.Has(0) {
		t.Errorf("codes %v", WorldCover.Codes())
	}
	// Colours as in the official COG palette.
	if c, _ := WorldCover.Class(80); c.Color.R != 0 || c.Color.G != 0x64 || c.Color.B != 0xc8 {
		t.Errorf("water colour %v", c.Color)
	}
	if !strings.Contains(WorldCover.Legend(), "100 Moss and lichen\n") {
		t.Errorf("legend %q", WorldCover.Legend())
	}
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []Scheme{
		{Name: "empty"},
		{Name: "zero", Classes: []Class{{Code: 0, Name: "x"}}},
		{Name: "dup", Classes: []Class{{Code: 1, Name: "a"}, {Code: 1, Name: "b"}}},
		{Name: "noname", Classes: []Class{{Code: 3}}},
	} {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), s.Name) {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

// TestFromSTAC reads WorldCover's own classification:classes (the shared
// item's, as its catalog writes them) into the built-in scheme.
func TestFromSTAC(t *testing.T) {
	t.Parallel()
	var classes []STACClass
	for _, c := range WorldCover.Classes {
		classes = append(classes, STACClass{Value: int(c.Code), Description: c.Name,
			ColorHint: fmt.Sprintf("%02X%02X%02X", c.Color.R, c.Color.G, c.Color.B)})
	}
	classes = append(classes, STACClass{Value: 0, Description: "No data"})
	s, err := FromSTAC("esa-worldcover", classes)
	if err != nil || !s.Equal(WorldCover) {
		t.Fatalf("scheme %+v, %v", s, err)
	}
	if _, err := FromSTAC("x", []STACClass{{Value: 3}}); err == nil {
		t.Error("a class without a name was accepted")
	}
	if io, ok := Builtin("esri-io"); !ok || io.Validate() != nil || len(io.Classes) != 9 {
		t.Errorf("esri-io: %+v", io)
	}
}

func TestNumberedAndCodeOf(t *testing.T) {
	s := Numbered("landcover", []string{"crop", "forest", "water"})
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if c, ok := s.CodeOf(" Forest "); !ok || c != 2 {
		t.Errorf("CodeOf forest = %d %v", c, ok)
	}
	seen := map[color.RGBA]bool{}
	for _, c := range s.Classes {
		if seen[c.Color] || c.Color.A != 0xff {
			t.Errorf("class %s: colour %v repeats or is not opaque", c.Name, c.Color)
		}
		seen[c.Color] = true
	}
	if c, ok := WorldCover.CodeOf("permanent water bodies"); !ok || c != 80 {
		t.Errorf("WorldCover water = %d %v", c, ok)
	}
	if _, ok := WorldCover.CodeOf("paddy"); ok {
		t.Error("paddy found in WorldCover")
	}
}
