package stage

import (
	"encoding/json"
	"testing"
)

// FuzzParseManifest feeds parseManifest mutated manifests, seeded with a
// real one: it must return an error or a manifest whose grid, bands and
// scaling later stages can use, never panic.
func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(Manifest{Tile: "31TEJ", Bands: []string{"B02", "B04", "B08"}, Scale: StackScale, Offset: StackOffset,
		Grid: ManifestGrid{EPSG: 32631, Transform: [6]float64{499980, 10, 0, 5000040, 0, -10}, Width: 252, Height: 252}})
	if _, err := ParseManifest(good); err != nil {
		f.Fatalf("a good manifest is refused: %v", err)
	}
	f.Add(good)
	f.Add([]byte(`{"tile": "x", "grid": {"width": -1}}`))
	f.Add([]byte(`{"tile": "../x", "grid": {"width": 10, "height": 10, "geotransform": [0, 10, 0, 0, 0, -10]}, "bands": ["B04"], "scale": 1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseManifest(raw)
		if err != nil {
			return
		}
		if m.Grid.Width <= 0 || m.Grid.Height <= 0 || float64(m.Grid.Width)*float64(m.Grid.Height) > MaxGridPixels || len(m.Bands) == 0 || m.Scale == 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}
