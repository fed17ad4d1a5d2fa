package raster

import (
	"fmt"
	"github.com/lulc/lulc/geo"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// geoJSONLayer writes a GeoJSON layer of one-square features whose class
// property holds each of values (raw JSON: 3, null, "forest").
func geoJSONLayer(t *testing.T, values ...string) string {
	t.Helper()
	var feats []string
	for i, v := range values {
		x := 3.0 + float64(i)*0.001
		feats = append(feats, fmt.Sprintf(`{"type":"Feature","properties":{"class":%s},"geometry":{"type":"Polygon","coordinates":[[[%g,45.13],[%g,45.13],[%g,45.131],[%g,45.131],[%g,45.13]]]}}`,
			v, x, x+0.0005, x+0.0005, x, x))
	}
	p := filepath.Join(t.TempDir(), "labels.geojson")
	body := `{"type":"FeatureCollection","features":[` + strings.Join(feats, ",") + `]}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCensusLabels(t *testing.T) {
	p := geoJSONLayer(t, "10", "10", "null", "0", "0", "-3", "300", "12.5")
	c, err := CensusLabels(p, VectorLabels{Field: "class"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Features != 8 || c.Usable != 2 || c.Bad() != 6 {
		t.Fatalf("census %+v", c)
	}
	d := c.Describe(10)
	for _, w := range []string{"0 ×2 (0 means no label)", "NULL ×1 (no value)", "-3 ×1 (negative)", "300 ×1 (above 255)", "12.5 ×1 (not a whole number)"} {
		if !strings.Contains(d, w) {
			t.Errorf("%q lacks %q", d, w)
		}
	}
	if !strings.HasPrefix(d, "0 ×2") {
		t.Errorf("the most frequent value is not first: %q", d)
	}
	if d := c.Describe(2); !strings.Contains(d, "and 3 other value(s)") {
		t.Errorf("Describe(2): %q", d)
	}

	// Text: numbers written as text burn (GDAL reads them), words do not.
	text := geoJSONLayer(t, `"12"`, `"forest"`, `"forest"`)
	c, err = CensusLabels(text, VectorLabels{Field: "class"})
	if err != nil || c.Usable != 1 || !strings.Contains(c.Describe(5), `"forest" ×2 (text, not a class code)`) {
		t.Errorf("text: %+v %v", c, err)
	}

	if _, err := CensusLabels(p, VectorLabels{Field: "code"}); err == nil || !strings.Contains(err.Error(), `no class field "code" (fields: class)`) {
		t.Errorf("missing field: %v", err)
	}
}

// TestTextLabels burns a layer whose class field is text through a map of
// its values: case and spaces do not matter, an unmapped word and a NULL
// burn nothing and are counted, and the burn agrees with the census.
func TestTextLabels(t *testing.T) {
	p := geoJSONLayer(t, `" Forest "`, `"forest"`, `"water"`, `"paddy"`, "null", `"7"`, `"forest"`)
	v := VectorLabels{Field: "class", Codes: map[string]uint8{"forest": 10, "water": 80}}
	c, err := CensusLabels(p, v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Features != 7 || c.Usable != 5 || c.Bad() != 2 {
		t.Fatalf("census %+v", c)
	}
	if d := c.Describe(5); !strings.Contains(d, `"paddy" ×1 (text the label codes do not map)`) || !strings.Contains(d, "NULL ×1") {
		t.Errorf("describe: %q", d)
	}
	// The most frequent spelling names a value.
	want := []LabelValue{{Value: "forest", Count: 3}, {Value: "paddy", Count: 1}, {Value: "water", Count: 1}}
	if fmt.Sprint(c.Text) != fmt.Sprint(want) {
		t.Errorf("text values %v, want %v", c.Text, want)
	}

	// One pixel per feature square: a 0.0001° grid over the six squares
	// (0.0005° wide, 0.001° apart), sampled at each square's centre.
	g := geo.Grid{EPSG: 4326, Width: 70, Height: 10, Transform: [6]float64{3, 0.0001, 0, 45.131, 0, -0.0001}}
	got, err := RasterizeLabels(p, v, g)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint8{10, 10, 80, 0, 0, 7, 10} {
		col := i*10 + 2
		if c := got[5*g.Width+col]; c != want {
			t.Errorf("feature %d burns %d, want %d", i, c, want)
		}
	}
}
