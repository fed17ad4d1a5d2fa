package stacext

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/planetlabs/go-stac"
)

// roundTrip encodes e into an asset map as go-stac does, checks that the
// map's JSON holds want's fields, and decodes the map into back.
func roundTrip(t *testing.T, e, back stac.Extension, want string, decode func(map[string]any) error) {
	t.Helper()
	m := map[string]any{"href": "./x.tif"}
	if err := e.Encode(m); err != nil {
		t.Fatal(err)
	}
	var got, w map[string]any
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &got)
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	w["href"] = "./x.tif"
	if !reflect.DeepEqual(got, w) {
		t.Errorf("%T encodes %s, want %s", e, b, want)
	}
	// Decoding reads the fields from JSON-shaped values, as a read item
	// holds them.
	if err := decode(got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, e) {
		t.Errorf("%T decodes to %+v, want %+v", e, back, e)
	}
}

// TestExtensionsRoundTrip: each extension writes the fields its STAC
// schema names and reads back what it wrote, and declares its schema.
func TestExtensionsRoundTrip(t *testing.T) {
	t.Parallel()
	pa := &ProjectionAsset{Shape: []int{252, 300}, Transform: []float64{10, 0, 499980, 0, -10, 5000040}}
	var pb ProjectionAsset
	roundTrip(t, pa, &pb, `{"proj:shape": [252, 300], "proj:transform": [10, 0, 499980, 0, -10, 5000040]}`, pb.Decode)

	ca := &ClassificationAsset{Classes: []Class{{Value: 10, Description: "Tree cover", ColorHint: "006400"}, {Value: 80, Description: "Permanent water bodies", Name: "water"}}}
	var cb ClassificationAsset
	roundTrip(t, ca, &cb, `{"classification:classes": [{"value": 10, "description": "Tree cover", "color-hint": "006400"},
		{"value": 80, "description": "Permanent water bodies", "name": "water"}]}`, cb.Decode)

	fa := &File{Checksum: "1e20" + "ab", Size: 6135}
	var fb File
	roundTrip(t, fa, &fb, `{"file:checksum": "1e20ab", "file:size": 6135}`, fb.Decode)

	for e, uri := range map[stac.Extension]string{&ProjectionItem{}: ProjectionURI, pa: ProjectionURI, ca: ClassificationURI, fa: FileURI} {
		if e.URI() != uri {
			t.Errorf("%T declares %s, want %s", e, e.URI(), uri)
		}
	}
}

// TestProjectionItemProperties: the item's EPSG code goes into its
// properties and comes back.
func TestProjectionItemProperties(t *testing.T) {
	t.Parallel()
	item := map[string]any{"properties": map[string]any{"datetime": "2024-04-18T10:56:29Z"}}
	if err := (&ProjectionItem{EPSG: 32631}).Encode(item); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(item)
	var back map[string]any
	json.Unmarshal(b, &back)
	props := back["properties"].(map[string]any)
	if props["proj:epsg"] != float64(32631) || props["datetime"] != "2024-04-18T10:56:29Z" {
		t.Fatalf("item properties %s", b)
	}
	var p ProjectionItem
	if err := p.Decode(back); err != nil || p.EPSG != 32631 {
		t.Fatalf("decoded %+v, %v", p, err)
	}
}

// TestRadarItemProperties: a radar acquisition's SAR and satellite fields
// go into its properties under the names their schemas give, and come
// back.
func TestRadarItemProperties(t *testing.T) {
	t.Parallel()
	item := map[string]any{"properties": map[string]any{"datetime": "2023-06-14T17:40:00Z"}}
	sar := &SARItem{InstrumentMode: "IW", FrequencyBand: "C", CenterFrequency: 5.405, Polarizations: []string{"VV", "VH"}, ProductType: "GRD"}
	sat := &SatItem{OrbitState: "descending", RelativeOrbit: 37}
	for _, e := range []stac.Extension{sar, sat} {
		if err := e.Encode(item); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(item)
	var back map[string]any
	json.Unmarshal(b, &back)
	props := back["properties"].(map[string]any)
	if props["sar:instrument_mode"] != "IW" || props["sar:frequency_band"] != "C" || props["sat:orbit_state"] != "descending" ||
		props["sat:relative_orbit"] != float64(37) || !reflect.DeepEqual(props["sar:polarizations"], []any{"VV", "VH"}) {
		t.Fatalf("item properties %s", b)
	}
	var sar2 SARItem
	var sat2 SatItem
	if err := sar2.Decode(back); err != nil || !reflect.DeepEqual(&sar2, sar) {
		t.Fatalf("decoded %+v, %v", sar2, err)
	}
	if err := sat2.Decode(back); err != nil || sat2 != *sat {
		t.Fatalf("decoded %+v, %v", sat2, err)
	}
	if sar.URI() != SARURI || sat.URI() != SatURI {
		t.Errorf("declared %s and %s", sar.URI(), sat.URI())
	}
}
