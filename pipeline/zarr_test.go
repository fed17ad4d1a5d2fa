package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/geo/zarr"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/stacext"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/train"
)

// zarrIngest is the layers scene's ingest with a temporal plane (a name
// Zarr must rewrite) and the stack in the formats given.
func zarrIngest(t *testing.T, formats ...string) config.IngestConfig {
	t.Helper()
	cfg := layersIngest(t, "")
	cfg.Temporal = &config.TemporalConfig{Of: []string{"ndvi"}, Percentiles: []int{10}}
	f, err := config.ParseStackFormats(formats)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Output.Stack = f
	return cfg
}

// checkZarrMatchesCOG compares every array of a tile's store with the
// COG stack's band, labels and counts, value for value, with the reader
// given (lulc's, or zarrita's dump).
func checkZarrMatchesCOG(t *testing.T, cogDir string, read func(name string) []float64) {
	t.Helper()
	m := readManifest(t, cogDir)
	for i, plane := range m.Bands {
		want, _ := readU16(t, filepath.Join(cogDir, "stack.tif"), i+1)
		got := read(config.ZarrName(plane))
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, the COG %d", plane, len(got), len(want))
		}
		for k := range want {
			if got[k] != float64(want[k]) {
				t.Fatalf("%s (array %s) pixel %d: zarr %v, COG %d", plane, config.ZarrName(plane), k, got[k], want[k])
			}
		}
	}
	for _, name := range []string{"labels", "valid_count"} {
		want, _, err := raster.ReadBand[uint8](filepath.Join(cogDir, name+".tif"), 1)
		if err != nil {
			t.Fatal(err)
		}
		got := read(name)
		for k := range want {
			if got[k] != float64(want[k]) {
				t.Fatalf("%s pixel %d: zarr %v, COG %d", name, k, got[k], want[k])
			}
		}
	}
}

// TestZarrStack ingests the layers scene (bands, a temporal plane, five
// layers) as COGs and as a Zarr v3 store at once: every array of the
// store holds the COG's values, read by lulc's reader and by zarrita (npm)
// where it installs; the coordinates are the pixel centres; the
// attributes decode DNs to reflectance and layer units; the manifest
// checksums every file of the store and the STAC item names it; a Zarr-only
// ingest writes no COG and train refuses it with what to do; lulc run
// writes the store as outputs.stack: zarr and resumes over it.
func TestZarrStack(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "stack")
	cfg := zarrIngest(t, "cog", "zarr")
	if _, err := ingest.Ingest(ctx, cfg, stage.Options{Out: out, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	tile := filepath.Join(out, "31TEJ")
	store := filepath.Join(tile, ingest.ZarrStackDir)
	s, err := zarr.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkZarrMatchesCOG(t, tile, func(name string) []float64 {
		v, err := s.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	})

	m := readManifest(t, tile)
	if !slices.Contains(m.Bands, "p10(ndvi)") || !slices.Contains(s.Names(), "p10_ndvi") {
		t.Errorf("temporal plane: bands %v, arrays %v", m.Bands, s.Names())
	}
	// Coordinates: pixel centres on the manifest's grid.
	tr := m.Grid.Transform
	xs, _ := s.Read("x")
	ys, _ := s.Read("y")
	if len(xs) != m.Grid.Width || len(ys) != m.Grid.Height || xs[0] != tr[0]+tr[1]/2 || ys[2] != tr[3]+2.5*tr[5] {
		t.Errorf("coordinates: x %v… y %v… for transform %v", xs[:2], ys[:3], tr)
	}
	ref := s.Arrays["spatial_ref"].Attributes
	if wkt, _ := ref["crs_wkt"].(string); !strings.Contains(wkt, "UTM zone 31N") {
		t.Errorf("crs_wkt %q", wkt)
	}
	if s.Group.Attributes["proj:code"] != fmt.Sprintf("EPSG:%d", m.Grid.EPSG) {
		t.Errorf("group attributes %v", s.Group.Attributes)
	}
	// Attributes decode each plane: reflectance for bands, the layer's
	// units for layers (to float32's precision of lulc's own mapping).
	b04 := s.Arrays["B04"]
	if b04.Attributes["scale_factor"] != m.Scale || b04.Attributes["add_offset"] != m.Offset || b04.DimensionNames[1] != "x" {
		t.Errorf("B04 metadata %+v", b04)
	}
	elev := s.Arrays["elevation"].Attributes
	dn, err := s.Read("elevation")
	if err != nil {
		t.Fatal(err)
	}
	lulcValues := layerValues(t, tile, "elevation")
	for k, d := range dn {
		if d == 0 {
			continue
		}
		cf := d*elev["scale_factor"].(float64) + elev["add_offset"].(float64)
		if math.Abs(cf-float64(lulcValues[k])) > 1e-3*math.Max(1, math.Abs(cf)) {
			t.Fatalf("elevation pixel %d: CF decoding %v, lulc's %v", k, cf, lulcValues[k])
		}
	}
	if lab := s.Arrays["labels"].Attributes; lab["flag_values"] == nil || !strings.Contains(fmt.Sprint(lab["flag_meanings"]), "Tree_cover") {
		t.Errorf("labels attributes %v", lab)
	}
	// The manifest checksums the store's files; the item names the store
	// and validates.
	var listed int
	for _, o := range m.Outputs {
		if strings.HasPrefix(o.File, "stack.zarr/") {
			listed++
		}
	}
	var onDisk int
	filepath.WalkDir(store, func(_ string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			onDisk++
		}
		return nil
	})
	if listed == 0 || listed != onDisk || !stackKept(tile) {
		t.Errorf("manifest lists %d of the store's %d files (kept %v)", listed, onDisk, stackKept(tile))
	}
	item, err := os.ReadFile(filepath.Join(tile, stage.StackItemFile))
	if err != nil || !strings.Contains(string(item), `"href": "./stack.zarr"`) || !strings.Contains(string(item), stage.ZarrType) {
		t.Errorf("stack item: %v\n%s", err, item)
	}
	if _, err := stacext.Validate(filepath.Join(out, "collection.json")); err != nil {
		t.Errorf("validate: %v", err)
	}

	// zarrita, a Zarr v3 reader of another hand, reads the same values.
	t.Run("zarrita", func(t *testing.T) {
		dump := t.TempDir()
		b, err := exec.Command("../scripts/zarr-check", store, dump).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			t.Skipf("zarrita: %s", b)
		}
		if err != nil {
			t.Fatalf("zarrita: %v\n%s", err, b)
		}
		checkZarrMatchesCOG(t, tile, func(name string) []float64 {
			raw, err := os.ReadFile(filepath.Join(dump, name+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			e := 1
			if s.Arrays[name].DataType == zarr.Uint16 {
				e = 2
			}
			v := make([]float64, len(raw)/e)
			for i := range v {
				if e == 2 {
					v[i] = float64(binary.LittleEndian.Uint16(raw[2*i:]))
				} else {
					v[i] = float64(raw[i])
				}
			}
			return v
		})
	})

	t.Run("zarr only", func(t *testing.T) {
		// An interrupted ingest's staging: the tile's store renamed into
		// place, its manifest never written, a half store beside it.
		zout := filepath.Join(t.TempDir(), "stack")
		zcfg := zarrIngest(t, "zarr")
		staged := filepath.Join(atomicfs.StagingDir(zout), "31TEJ")
		for _, d := range []string{"stack.zarr/B04/c/0", ".stack.zarr.partial/B02"} {
			if err := os.MkdirAll(filepath.Join(staged, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(staged, "stack.zarr", "B04", "c", "0", "0"), []byte("torn"), 0o644)
		os.WriteFile(filepath.Join(atomicfs.StagingDir(zout), ".lulc-stage"), []byte("ingest "+zcfg.Hash()+"\n"), 0o644)
		if res, err := ingest.Ingest(ctx, zcfg, stage.Options{Out: zout, Version: "test"}); err != nil || !res.Resumed {
			t.Fatalf("resumed ingest: %v (resumed %v)", err, res.Resumed)
		}
		if _, err := os.Stat(filepath.Join(zout, "31TEJ", ".stack.zarr.partial")); !os.IsNotExist(err) {
			t.Errorf("a half store is left: %v", err)
		}
		zt := filepath.Join(zout, "31TEJ")
		for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
			if _, err := os.Stat(filepath.Join(zt, f)); !os.IsNotExist(err) {
				t.Errorf("%s written by a Zarr-only ingest: %v", f, err)
			}
		}
		// The same store, byte for byte, as beside the COGs.
		for _, o := range readManifest(t, zt).Outputs {
			if !slices.Contains(m.Outputs, o) {
				t.Errorf("Zarr-only output %+v differs from the store written beside the COGs", o)
			}
		}
		tc := trainConfig(t, "train-layers.yaml", zout)
		_, err := train.InputsOf(tc)
		if err == nil || !strings.Contains(err.Error(), "output.stack: [cog, zarr]") {
			t.Errorf("train on a Zarr-only stack: %v", err)
		}
	})

	t.Run("run", func(t *testing.T) {
		raw, err := configs.Read("run-layers.yaml")
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(raw), "stack: false", "stack: zarr", 1)
		if text == string(raw) {
			t.Fatal("run-layers.yaml has no outputs.stack to set")
		}
		rc, err := ParseRunConfig([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		tc := trainConfig(t, "train-layers.yaml", "")
		job := Job{Config: rc, Ingest: zarrIngest(t), Train: &tc}
		rout := filepath.Join(t.TempDir(), "run")
		res := runJob(t, job, rout, stage.Options{Version: "test"})
		rt := filepath.Join(rout, "31TEJ")
		rs, err := zarr.Open(filepath.Join(rt, ingest.ZarrStackDir))
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		if _, err := os.Stat(filepath.Join(rt, "stack.tif")); !os.IsNotExist(err) {
			t.Errorf("stack.tif written with outputs.stack: zarr: %v", err)
		}
		// The run's store holds the ingest's values.
		for _, name := range []string{"B04", "p10_ndvi", "VV", "labels"} {
			a, _ := rs.Read(name)
			b, _ := s.Read(name)
			if !slices.Equal(a, b) {
				t.Errorf("run's %s differs from ingest's", name)
			}
		}
		// A resumed run keeps the tile when the store verifies, and maps
		// it again when a file of the store is damaged.
		if !stackKept(rt) || len(res.Tiles) != 1 {
			t.Errorf("the run's store does not verify against its manifest (%d tiles)", len(res.Tiles))
		}
		shard := filepath.Join(rt, ingest.ZarrStackDir, "B04", "c", "0", "0")
		body, _ := os.ReadFile(shard)
		body[0] ^= 1
		os.WriteFile(shard, body, 0o644)
		if stackKept(rt) {
			t.Error("a damaged store verifies")
		}
	})
}
