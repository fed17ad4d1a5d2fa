package raster

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// TestVSIFiles writes, lists, reads and removes files through GDAL's
// virtual file layer (/vsimem/ here; /vsis3/, with the ingest's .tif
// filter set, in cmd/lulc's TestExchangeS3).
func TestVSIFiles(t *testing.T) {
	body := bytes.Repeat([]byte("lulc "), 300000)
	w, err := CreateFile("/vsimem/vsitest/a/draw.lulcd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !Exists("/vsimem/vsitest/a/draw.lulcd") || Exists("/vsimem/vsitest/a/none") {
		t.Error("Exists")
	}
	if got := ReadDir("/vsimem/vsitest/a"); !slices.Equal(got, []string{"draw.lulcd"}) {
		t.Errorf("ReadDir: %v", got)
	}
	r, err := OpenFile("/vsimem/vsitest/a/draw.lulcd")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("read back %d bytes of %d: %v", len(got), len(body), err)
	}
	if err := Remove("/vsimem/vsitest/a/draw.lulcd"); err != nil || Exists("/vsimem/vsitest/a/draw.lulcd") {
		t.Errorf("Remove: %v", err)
	}
	if _, err := OpenFile("/vsimem/vsitest/a/draw.lulcd"); err == nil {
		t.Error("opened a removed file")
	}
}
