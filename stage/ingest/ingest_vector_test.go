package ingest

import "testing"

// TestVectorExtension: a remote layer's extension is read from its path,
// not from its host or its query (GDAL reads over HTTP only the listed
// extensions: configureGDAL adds it).
func TestVectorExtension(t *testing.T) {
	if got := vectorExtension("/vsicurl/https://example.invalid/a.b/points.gpkg?sig=x.y"); got != ".gpkg" {
		t.Errorf("extension %q", got)
	}
}
