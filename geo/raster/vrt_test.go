package raster

import (
	"github.com/lulc/lulc/geo"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildVRT mosaics two overlapping rasters, moves the directory tree
// and reads the mosaic: the later source wins the overlap, and the VRT
// names its sources relative to itself.
func TestBuildVRT(t *testing.T) {
	root := t.TempDir()
	a := geo.Grid{EPSG: 32631, Width: 40, Height: 30, Transform: [6]float64{500000, 10, 0, 4000000, 0, -10}}
	b := a
	b.Transform[0] += 200 // 20 pixels east: 20 columns overlap
	for name, g := range map[string]geo.Grid{"a": a, "b": b} {
		px := make([]uint8, g.Width*g.Height)
		for i := range px {
			px[i] = name[0]
		}
		if err := os.MkdirAll(filepath.Join(root, "tiles", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteCOG(filepath.Join(root, "tiles", name, "class.tif"), g, px, COGOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "mosaic"), 0o755); err != nil {
		t.Fatal(err)
	}
	vrt := filepath.Join(root, "mosaic", "class.vrt")
	if err := BuildVRT(vrt, []string{filepath.Join(root, "tiles", "a", "class.tif"), filepath.Join(root, "tiles", "b", "class.tif")}); err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(vrt)
	if strings.Contains(string(body), root) || !strings.Contains(string(body), `relativeToVRT="1">../tiles/a/class.tif<`) {
		t.Errorf("sources not relative to the VRT:\n%s", body)
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(root, moved); err != nil {
		t.Fatal(err)
	}
	px, g, err := ReadBand[uint8](filepath.Join(moved, "mosaic", "class.vrt"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if g.Width != 60 || g.Height != 30 {
		t.Fatalf("mosaic %d×%d", g.Width, g.Height)
	}
	for _, c := range []struct {
		x    int
		want byte
	}{{0, 'a'}, {19, 'a'}, {20, 'b'}, {39, 'b'}, {59, 'b'}} {
		if v := px[5*g.Width+c.x]; v != c.want {
			t.Errorf("column %d: %c, want %c", c.x, v, c.want)
		}
	}
}
