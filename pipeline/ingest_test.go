package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/source/synth"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
)

// demoScenes caches synthetic scenes by name for the package's tests.
var demoScenes = map[string]string{}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range demoScenes {
		os.RemoveAll(filepath.Dir(dir))
	}
	os.Exit(code)
}

func synthConfig(t testing.TB) synth.Config {
	t.Helper()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := synth.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func makeScene(t testing.TB, name string, cfg synth.Config) string {
	t.Helper()
	if dir, ok := demoScenes[name]; ok {
		return dir
	}
	tmp, err := os.MkdirTemp("", "lulc-ingest-"+name)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "scene")
	if _, err := synth.Run(context.Background(), cfg, synth.Options{Out: dir}); err != nil {
		t.Fatal(err)
	}
	demoScenes[name] = dir
	return dir
}

func ingestConfig(t testing.TB, catalogPath string) config.IngestConfig {
	t.Helper()
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseIngestConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source.Catalog = catalogPath
	return cfg
}

func mustIngest(t *testing.T, cfg config.IngestConfig) (ingest.Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stack")
	res, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

func readU16(t *testing.T, path string, band int) ([]uint16, geo.Grid) {
	t.Helper()
	v, g, err := raster.ReadBand[uint16](path, band)
	if err != nil {
		t.Fatal(err)
	}
	return v, g
}

func TestIngestTinyScene(t *testing.T) {
	scfg := synthConfig(t)
	scene := makeScene(t, "tiny", scfg)
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	res, out := mustIngest(t, cfg)
	if len(res.Tiles) != 1 || res.Tiles[0].Tile != "31TEJ" || res.Tiles[0].Dates != 3 {
		t.Fatalf("tiles %+v", res.Tiles)
	}
	dir := filepath.Join(out, "31TEJ")

	// The area covers the whole chip: the stack is the scene's 10 m grid.
	info, err := raster.Inspect(filepath.Join(dir, "stack.tif"))
	if err != nil {
		t.Fatal(err)
	}
	want := geo.Grid{EPSG: 32631, Width: 252, Height: 252, Transform: [6]float64{499980, 10, 0, 5000040, 0, -10}}
	if info.Grid != want || info.Bands != 10 || info.Layout != "COG" || info.DataType != "UInt16" {
		t.Errorf("stack %+v", info)
	}
	for _, f := range []string{"labels.tif", "valid_count.tif"} {
		li, err := raster.Inspect(filepath.Join(dir, f))
		if err != nil || li.Grid != want || li.Layout != "COG" {
			t.Errorf("%s: %+v %v", f, li.Grid, err)
		}
	}

	// Hand-computed composite for the red band: read each date's DN and SCL
	// from the source files, mask, take the median by the documented rule.
	items, err := catalog.Crawl(context.Background(), filepath.Join(scene, "catalog.json"), catalog.Query{
		Collections: []string{"sentinel-2-l2a"}, BBox: [4]float64{-180, -90, 180, 90}}, catalog.HrefPolicy{})
	if err != nil || len(items) != 3 {
		t.Fatalf("%d items, %v", len(items), err)
	}
	var reds [][]uint16
	var scls [][]uint8
	for _, it := range items {
		a, _ := it.Asset("B04", nil)
		v, _ := readU16(t, a.Href, 1)
		reds = append(reds, v)
		s, _ := it.Asset("SCL", nil)
		c, _, err := raster.ReadBand[uint8](s.Href, 1)
		if err != nil {
			t.Fatal(err)
		}
		scls = append(scls, c)
	}
	stackRed, _ := readU16(t, filepath.Join(dir, "stack.tif"), 3)
	count, _, _ := raster.ReadBand[uint8](filepath.Join(dir, "valid_count.tif"), 1)
	dropped := map[uint8]bool{0: true, 1: true, 3: true, 8: true, 9: true, 10: true}
	checked, cloudy := 0, 0
	for i := 0; i < 252*252; i += 37 {
		r, c := i/252, i%252
		var vals []float32
		for d := range reds {
			dn, cls := reds[d][i], scls[d][(r/2)*126+c/2]
			if dn == 0 || dropped[cls] {
				cloudy++
				continue
			}
			vals = append(vals, float32(float32(dn)*float32(0.0001))+float32(-0.1))
		}
		slices.Sort(vals)
		var wantDN uint16
		switch n := len(vals); {
		case n%2 == 1:
			wantDN = uint16(math.Round((float64(vals[n/2]) + 0.1) / 0.0001))
		case n > 0:
			wantDN = uint16(math.Round((float64((vals[n/2-1]+vals[n/2])*0.5) + 0.1) / 0.0001))
		}
		if stackRed[i] != wantDN || int(count[i]) != len(vals) {
			t.Fatalf("pixel (%d, %d): stack %d count %d, want %d from %v", r, c, stackRed[i], count[i], wantDN, vals)
		}
		checked++
	}
	if cloudy == 0 {
		t.Error("no masked observation among the checked pixels: the test proves little")
	}

	// Labels: mode-resampled WorldCover agrees with the label under each
	// pixel centre almost everywhere.
	labels, _, _ := raster.ReadBand[uint8](filepath.Join(dir, "labels.tif"), 1)
	wc, _ := filepath.Glob(filepath.Join(scene, "esa-worldcover", "*", "*_Map.tif"))
	src, lg, err := raster.ReadBand[uint8](wc[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := raster.NewTransformer(32631, 4326)
	defer tr.Close()
	agree, total := 0, 0
	for i := 0; i < 252*252; i += 11 {
		x := []float64{499980 + (float64(i%252)+0.5)*10}
		y := []float64{5000040 - (float64(i/252)+0.5)*10}
		tr.Transform(x, y)
		col := int((x[0] - lg.Transform[0]) / lg.Transform[1])
		row := int((y[0] - lg.Transform[3]) / lg.Transform[5])
		if labels[i] == src[row*lg.Width+col] {
			agree++
		}
		if labels[i] == 0 {
			t.Fatalf("unlabelled pixel %d", i)
		}
		total++
	}
	if frac := float64(agree) / float64(total); frac < 0.85 {
		t.Errorf("labels agree with the source at %.2f of pixels", frac)
	}

	// The manifest records inputs and outputs.
	var m stage.Manifest
	body, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Sources) != 3 || m.Sources[0].Assets["B04"].Size == 0 || len(m.Labels) != 1 || len(m.Outputs) != 3 || m.ConfigHash != cfg.Hash() {
		t.Errorf("manifest %+v", m)
	}
	for _, o := range m.Outputs {
		if sum, _, _ := digest.File(filepath.Join(dir, o.File)); sum != o.BLAKE3 || o.SHA256 != "" {
			t.Errorf("manifest checksum of %s is stale", o.File)
		}
	}
}

// stacServer serves a synthetic scene as a STAC API: POST /search pages
// over the scene's items with absolute http hrefs, and the files with HTTP
// range support, like Earth Search and its bucket.
type stacServer struct {
	*httptest.Server
	ranges   atomic.Int64
	searches atomic.Int64
	fail     func(r *http.Request) int // status to answer instead, or 0
}

func newStacServer(t *testing.T, scene string) *stacServer {
	t.Helper()
	s := &stacServer{}
	var items []map[string]any
	files := http.FileServer(http.Dir(scene))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /search", func(w http.ResponseWriter, r *http.Request) {
		s.searches.Add(1)
		var body struct {
			Collections []string `json:"collections"`
			Next        int      `json:"next"`
			Limit       int      `json:"limit"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		var match []map[string]any
		for _, it := range items {
			if slices.Contains(body.Collections, it["collection"].(string)) {
				match = append(match, it)
			}
		}
		limit := 2
		end := min(body.Next+limit, len(match))
		page := map[string]any{"type": "FeatureCollection", "features": match[body.Next:end]}
		if end < len(match) {
			page["links"] = []any{map[string]any{"rel": "next", "method": "POST", "merge": true,
				"href": s.URL + "/search", "body": map[string]any{"next": end}}}
		}
		json.NewEncoder(w).Encode(page)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.fail != nil {
			if code := s.fail(r); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		if r.Header.Get("Range") != "" {
			s.ranges.Add(1)
		}
		files.ServeHTTP(w, r)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	err := filepath.WalkDir(scene, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".json") || strings.HasSuffix(p, "collection.json") || strings.HasSuffix(p, "catalog.json") {
			return err
		}
		var it map[string]any
		body, _ := os.ReadFile(p)
		json.Unmarshal(body, &it)
		rel, _ := filepath.Rel(scene, filepath.Dir(p))
		for _, a := range it["assets"].(map[string]any) {
			asset := a.(map[string]any)
			asset["href"] = s.URL + "/" + filepath.ToSlash(rel) + "/" + strings.TrimPrefix(asset["href"].(string), "./")
		}
		items = append(items, it)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIngestFromSTACAPI(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	lres, local := mustIngest(t, ingestConfig(t, filepath.Join(scene, "catalog.json")))
	if n := lres.Tiles[0].Timings.RawRects; n != 0 {
		t.Errorf("local bands: %d rectangles went compressed, want GDAL's reads", n)
	}

	srv := newStacServer(t, scene)
	cfg := ingestConfig(t, "")
	cfg.Source.Catalog, cfg.Source.API = "", srv.URL
	res, remote := mustIngest(t, cfg)
	if srv.searches.Load() < 3 || srv.ranges.Load() == 0 {
		t.Errorf("%d searches (want paging), %d range requests", srv.searches.Load(), srv.ranges.Load())
	}
	// The CPU takes remote bands compressed, read rows of windows
	// ahead; with LULC_REMOTE_AHEAD=off (Compare.RemoteGDAL), GDAL reads
	// them window by window. Both give the local files' bytes.
	if n := res.Tiles[0].Timings.RawRects; n == 0 {
		t.Error("remote bands were not read ahead compressed")
	}
	gdalOut := filepath.Join(t.TempDir(), "gdal")
	gres, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: gdalOut, Version: "test", Compare: stage.Compare{RemoteGDAL: true}})
	if err != nil {
		t.Fatal(err)
	}
	if n := gres.Tiles[0].Timings.RawRects; n != 0 {
		t.Errorf("with RemoteGDAL, %d band rectangles went compressed", n)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif"} {
		a, _ := os.ReadFile(filepath.Join(local, "31TEJ", f))
		for _, dir := range []string{remote, gdalOut} {
			b, _ := os.ReadFile(filepath.Join(dir, "31TEJ", f))
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between the static catalog and the API over HTTP (%s)", f, filepath.Base(dir))
			}
		}
	}

	var m stage.Manifest
	body, _ := os.ReadFile(filepath.Join(remote, "31TEJ", "manifest.json"))
	json.Unmarshal(body, &m)
	if a := m.Sources[0].Assets["B04"]; !strings.HasPrefix(a.Href, srv.URL) || a.Size == 0 {
		t.Errorf("remote asset recorded as %+v", a)
	}
	// The stack's item links its sources' assets by their URLs.
	items := checkCatalog(t, filepath.Join(remote, stage.CollectionFile))
	if len(items) != 1 || !strings.Contains(string(must(os.ReadFile(items[0]))), `"href": "`+srv.URL+"/") {
		t.Errorf("stack items %v do not link the sources' URLs", items)
	}
}

func TestIngestResumeGivesSameBytes(t *testing.T) {
	scfg := synthConfig(t)
	scfg.Size, scfg.Bands60m = 1200, false
	scfg.Dates = scfg.Dates[:2]
	scene := makeScene(t, "mid", scfg)
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	cfg.Area.BBox = []float64{2.9, 45.0, 3.2, 45.2}
	cfg.Window = 512
	_, want := mustIngest(t, cfg)

	out := filepath.Join(t.TempDir(), "stack")
	ctx, cancel := context.WithCancel(context.Background())
	var windows atomic.Int32
	_, err := ingest.Ingest(ctx, cfg, stage.Options{Out: out, Version: "test", NewBar: func(int64, string) progress.Bar {
		return hookBar{func() {
			if windows.Add(1) == 3 {
				cancel()
			}
		}}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted ingest: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("interrupted ingest left its output")
	}
	res, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out, Version: "test"})
	if err != nil || !res.Resumed {
		t.Fatalf("resume: %v, resumed %v", err, res.Resumed)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif", "manifest.json", stage.StackItemFile, filepath.Join("..", stage.CollectionFile)} {
		a, _ := os.ReadFile(filepath.Join(want, "31TEJ", f))
		b, _ := os.ReadFile(filepath.Join(out, "31TEJ", f))
		if f == "manifest.json" {
			// Only the hrefs' temporary directory differs.
			a = bytes.ReplaceAll(a, []byte(filepath.Dir(want)), nil)
			b = bytes.ReplaceAll(b, []byte(filepath.Dir(out)), nil)
		}
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs after resume", f)
		}
	}
}

type hookBar struct{ f func() }

func (b hookBar) Add(int) error { b.f(); return nil }
func (hookBar) Describe(string) {}
func (hookBar) Finish() error   { return nil }

func TestIngestAllCloud(t *testing.T) {
	scfg := synthConfig(t)
	for i := range scfg.Dates {
		scfg.Dates[i].CloudCover, scfg.Dates[i].Cirrus = 100, 0
	}
	scene := makeScene(t, "overcast", scfg)
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	cfg.MaxCloudCover = 100
	res, out := mustIngest(t, cfg)
	if res.Tiles[0].NoValidFrac != 1 {
		t.Errorf("no-valid fraction %g, want 1", res.Tiles[0].NoValidFrac)
	}
	red, _ := readU16(t, filepath.Join(out, "31TEJ", "stack.tif"), 3)
	for _, v := range red {
		if v != 0 {
			t.Fatal("an all-cloud composite holds data")
		}
	}
}

func TestIngestBadInput(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	cat := filepath.Join(scene, "catalog.json")

	// A copy of the scene with one COG truncated.
	broken := filepath.Join(t.TempDir(), "scene")
	if err := os.CopyFS(broken, os.DirFS(scene)); err != nil {
		t.Fatal(err)
	}
	b03, _ := filepath.Glob(filepath.Join(broken, "sentinel-2-l2a", "S2B_*", "B03.tif"))
	body, _ := os.ReadFile(b03[0])
	os.WriteFile(b03[0], body[:len(body)/3], 0o644)

	srv := newStacServer(t, scene)
	srv.fail = func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "S2A_31TEJ_20240418_0_L2A/B11.tif") {
			return http.StatusNotFound
		}
		return 0
	}

	cases := []struct {
		name string
		edit func(c *config.IngestConfig)
		want []string
	}{
		{"missing band asset", func(c *config.IngestConfig) { c.Source.Assets = map[string]string{"B04": "nope"} }, []string{"no asset for band B04", "nope"}},
		{"truncated COG", func(c *config.IngestConfig) { c.Source.Catalog = filepath.Join(broken, "catalog.json") }, []string{"B03.tif"}},
		{"404 asset", func(c *config.IngestConfig) { c.Source.Catalog, c.Source.API = "", srv.URL }, []string{"B11.tif"}},
		{"area outside every item", func(c *config.IngestConfig) { c.Area.BBox = []float64{10, 10, 10.1, 10.1} }, []string{"no sentinel-2-l2a items"}},
		{"no dates match", func(c *config.IngestConfig) { c.Dates.Start, c.Dates.End = "2020-01-01", "2020-02-01" }, []string{"no sentinel-2-l2a items", "2020-01-01"}},
		{"unusable CRS", func(c *config.IngestConfig) { c.Grid.EPSG, c.Grid.Bounds = 999999, []float64{0, 0, 100, 100} }, []string{"EPSG:999999"}},
		{"resolution in the wrong unit", func(c *config.IngestConfig) { c.Grid.Resolution = 0.001 }, []string{"grid.resolution: 0.001", "at most 2147483648"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ingestConfig(t, cat)
			c.edit(&cfg)
			ingestFails(t, cfg, c.want)
		})
	}
}

// ingestFails checks that ingesting cfg fails with an error holding every
// want and leaves no output.
func ingestFails(t *testing.T, cfg config.IngestConfig, want []string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stack")
	_, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: out})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Error("failed ingest left its output")
	}
}

func TestIngestLabelsNotOverlapping(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	moved := filepath.Join(t.TempDir(), "scene")
	if err := os.CopyFS(moved, os.DirFS(scene)); err != nil {
		t.Fatal(err)
	}
	// Replace the label raster by one 5° away; the item still claims the area.
	maps, _ := filepath.Glob(filepath.Join(moved, "esa-worldcover", "*", "*_Map.tif"))
	g := geo.Grid{EPSG: 4326, Width: 100, Height: 100, Transform: [6]float64{8, 1.0 / 12000, 0, 50, 0, -1.0 / 12000}}
	labels := make([]uint8, 100*100)
	for i := range labels {
		labels[i] = 10
	}
	os.Remove(maps[0])
	if err := raster.WriteCOG(maps[0], g, labels, raster.COGOptions{NoData: stage.Ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	_, err := ingest.Ingest(context.Background(), ingestConfig(t, filepath.Join(moved, "catalog.json")), stage.Options{Out: filepath.Join(t.TempDir(), "o")})
	if err == nil || !strings.Contains(err.Error(), "labels do not overlap") || !strings.Contains(err.Error(), "_Map.tif") {
		t.Fatalf("got %v", err)
	}
}

func TestIngestConfigErrors(t *testing.T) {
	raw, _ := configs.Read("ingest-tiny.yaml")
	for _, c := range []struct{ old, new, want string }{
		{"window: 1024", "window: 1000", "window"},
		{"labels: mode", "labels: bilinear", "resampling.labels"},
		{"max_cloud_cover: 60", "max_cloud_cover: 160", "max_cloud_cover"},
		{"start: 2024-04-01", "start: 2024-13-01", "dates.start"},
		{"B12]", "B12, SCL]", "bands"},
		{"bbox: [2.99, 45.12, 3.04, 45.16]", "bbox: [3.04, 45.12, 2.99, 45.16]", "area.bbox"},
		{"catalog: runs", "catlog: runs", "catlog"},
	} {
		_, err := config.ParseIngestConfig([]byte(strings.Replace(string(raw), c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v", c.old, c.new, err)
		}
	}
}

// TestIngestAssetServerFailures: an asset that answers 500, or stalls, is
// retried by GDAL (settings from source.gdal), then fails naming the href.
func TestIngestAssetServerFailures(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	for _, c := range []struct {
		name  string
		asset string
		mode  string
	}{{"500", "B12.tif", "500"}, {"stall", "B06.tif", "stall"}} {
		t.Run(c.name, func(t *testing.T) {
			srv := newStacServer(t, scene)
			var hits atomic.Int32
			srv.fail = func(r *http.Request) int {
				if !strings.HasSuffix(r.URL.Path, "S2A_31TEJ_20240915_0_L2A/"+c.asset) {
					return 0
				}
				hits.Add(1)
				if c.mode == "stall" {
					select {
					case <-r.Context().Done():
					case <-time.After(1500 * time.Millisecond):
					}
				}
				return http.StatusInternalServerError
			}
			cfg := ingestConfig(t, "")
			cfg.Source.Catalog, cfg.Source.API = "", srv.URL
			cfg.Source.GDAL = map[string]string{"GDAL_HTTP_MAX_RETRY": "2", "GDAL_HTTP_RETRY_DELAY": "0.05", "GDAL_HTTP_TIMEOUT": "1"}
			_, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "o")})
			if err == nil || !strings.Contains(err.Error(), "S2A_31TEJ_20240915_0_L2A/"+c.asset) {
				t.Fatalf("got %v", err)
			}
			if hits.Load() < 2 {
				t.Errorf("the failing asset was requested %d times: no retry", hits.Load())
			}
		})
	}
}

func TestIngestGeoJSONArea(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	area := filepath.Join(t.TempDir(), "area.geojson")
	// A triangle over the chip's western half, as a one-feature collection.
	os.WriteFile(area, []byte(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},
		"geometry":{"type":"Polygon","coordinates":[[[3.0,45.13],[3.015,45.13],[3.0,45.16],[3.0,45.13]]]}}]}`), 0o644)
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	cfg.Area.BBox, cfg.Area.GeoJSON = nil, area
	res, out := mustIngest(t, cfg)
	info, err := raster.Inspect(filepath.Join(out, "31TEJ", "stack.tif"))
	if err != nil {
		t.Fatal(err)
	}
	// The area's bbox, snapped to 60 m, clips the chip's east side.
	if info.Width >= 252 || info.Width < 100 || info.Height != 252 || info.Transform[0] != 499980 || res.Tiles[0].Pixels != info.Width*info.Height {
		t.Errorf("grid %+v", info.Grid)
	}
	for _, bad := range []string{`{"type":"Point","coordinates":[3,45]}`, `{"type":"FeatureCollection","features":[]}`, `not json`} {
		os.WriteFile(area, []byte(bad), 0o644)
		if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "o")}); err == nil || !strings.Contains(err.Error(), "area.geojson") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestCheckedInIngestConfigsParse(t *testing.T) {
	for _, name := range []string{"ingest-tiny.yaml", "ingest-full.yaml", "ingest-earth-search.yaml"} {
		raw, err := configs.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.ParseIngestConfig(raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestIngestUserGrid stacks onto a user grid at 20 m in the tile's CRS but
// offset by half a pixel, so that every band goes through GDAL's warper.
func TestIngestUserGrid(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	cfg := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	cfg.Grid.EPSG, cfg.Grid.Resolution = 32631, 20
	cfg.Grid.Bounds = []float64{500010, 4997530, 502010, 5000030}
	_, out := mustIngest(t, cfg)
	info, err := raster.Inspect(filepath.Join(out, "31TEJ", "stack.tif"))
	if err != nil {
		t.Fatal(err)
	}
	want := geo.Grid{EPSG: 32631, Width: 100, Height: 125, Transform: [6]float64{500010, 20, 0, 5000030, 0, -20}}
	if info.Grid != want {
		t.Fatalf("grid %+v, want %+v", info.Grid, want)
	}
	red, _ := readU16(t, filepath.Join(out, "31TEJ", "stack.tif"), 3)
	valid := 0
	for _, v := range red {
		if v != 0 {
			valid++
		}
	}
	if valid < len(red)/2 {
		t.Errorf("only %d of %d pixels valid on the user grid", valid, len(red))
	}
}

// TestIngestWarnsOfShortBands replaces one date's B05 by a raster that
// covers only the top half of the tile: ingest still succeeds and says
// which band of which date covers how much; a whole scene is not warned
// about.
func TestIngestWarnsOfShortBands(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	moved := filepath.Join(t.TempDir(), "scene")
	if err := os.CopyFS(moved, os.DirFS(scene)); err != nil {
		t.Fatal(err)
	}
	bands, _ := filepath.Glob(filepath.Join(moved, "sentinel-2-l2a", "*", "B05.tif"))
	slices.Sort(bands)
	src, g, err := raster.ReadBand[uint16](bands[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := raster.Open(bands[0])
	if err != nil {
		t.Fatal(err)
	}
	half := s.Grid
	s.Close()
	half.Height = g.Height / 2
	os.Remove(bands[0])
	if err := raster.WriteCOG(bands[0], half, src[:half.Width*half.Height], raster.COGOptions{NoData: stage.Ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := ingestConfig(t, filepath.Join(moved, "catalog.json"))
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "o"), Log: log}); err != nil {
		t.Fatal(err)
	}
	item := filepath.Base(filepath.Dir(bands[0]))
	if !strings.Contains(logs.String(), "do not cover the whole grid") || !strings.Contains(logs.String(), item+" B05 covers 50.0 %") {
		t.Fatalf("no warning naming %s B05 and its share: %s", item, logs.String())
	}
	logs.Reset()
	if _, err := ingest.Ingest(context.Background(), ingestConfig(t, filepath.Join(scene, "catalog.json")), stage.Options{Out: filepath.Join(t.TempDir(), "o"), Log: log}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "do not cover") {
		t.Fatalf("a whole scene was warned about: %s", logs.String())
	}
}

// TestIngestWithoutSCL: with mask.drop_scl: [] the scene classes are not
// needed; a scene whose items have no SCL ingests, and gives the stack of
// the same scene with SCL present (nothing to drop either way).
func TestIngestWithoutSCL(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	moved := filepath.Join(t.TempDir(), "scene")
	if err := os.CopyFS(moved, os.DirFS(scene)); err != nil {
		t.Fatal(err)
	}
	items, _ := filepath.Glob(filepath.Join(moved, "sentinel-2-l2a", "*", "*_L2A.json"))
	for _, p := range items {
		body, _ := os.ReadFile(p)
		var it map[string]any
		if err := json.Unmarshal(body, &it); err != nil {
			t.Fatal(err)
		}
		delete(it["assets"].(map[string]any), "scl")
		body, _ = json.Marshal(it)
		os.WriteFile(p, body, 0o644)
		os.Remove(filepath.Join(filepath.Dir(p), "SCL.tif"))
	}
	cfg := ingestConfig(t, filepath.Join(moved, "catalog.json"))
	if _, err := ingest.Ingest(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "o")}); err == nil || !strings.Contains(err.Error(), "SCL") {
		t.Fatalf("with the default mask, a scene without SCL: %v", err)
	}
	// As a user writes it: mask.drop_scl: [] in the YAML.
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = config.ParseIngestConfig([]byte(strings.Replace(string(raw), "drop_scl: [0, 1, 3, 8, 9, 10]", "drop_scl: []", 1)))
	if err != nil || cfg.Mask.DropSCL == nil || len(cfg.Mask.DropSCL) != 0 {
		t.Fatalf("drop_scl: [] parsed as %v (%v)", cfg.Mask.DropSCL, err)
	}
	cfg.Source.Catalog = filepath.Join(moved, "catalog.json")
	_, without := mustIngest(t, cfg)
	with := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	with.Mask.DropSCL = []int{}
	_, withSCL := mustIngest(t, with)
	a, _ := readU16(t, filepath.Join(without, "31TEJ", "stack.tif"), 1)
	b, _ := readU16(t, filepath.Join(withSCL, "31TEJ", "stack.tif"), 1)
	if !slices.Equal(a, b) {
		t.Fatal("the stack without SCL differs from the one with SCL and nothing dropped")
	}
}

// TestIngestMaskBand checks mask as a band: the scene's SCL raster named
// as a mask asset drops every nonzero pixel, which is what dropping SCL
// classes 1–11 does; and the word forms of mask parse as documented.
// TestMaskHashUnchanged checks that a config without a mask band hashes
// as before the band existed, so that its plans and runs still resume:
// the band is left out of the hashed JSON when empty, drop_scl is not
// (none, [], differs from the default, null).
func TestMaskHashUnchanged(t *testing.T) {
	for _, m := range []config.MaskConfig{{}, {DropSCL: []int{}}, {DropSCL: []int{3}}} {
		body, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(body, []byte("Band")) || !bytes.Contains(body, []byte("DropSCL")) {
			t.Errorf("mask %+v hashes as %s", m, body)
		}
	}
	a, _ := json.Marshal(config.MaskConfig{})
	b, _ := json.Marshal(config.MaskConfig{DropSCL: []int{}})
	if bytes.Equal(a, b) {
		t.Error("mask: none hashes as the default")
	}
}

func TestIngestMaskBand(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	band := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	band.Mask = config.MaskConfig{Band: "scl"} // the asset's key
	_, byBand := mustIngest(t, band)
	classes := ingestConfig(t, filepath.Join(scene, "catalog.json"))
	classes.Mask = config.MaskConfig{DropSCL: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	_, bySCL := mustIngest(t, classes)
	for _, f := range []string{"stack.tif", "valid_count.tif"} {
		a, _ := os.ReadFile(filepath.Join(byBand, "31TEJ", f))
		b, _ := os.ReadFile(filepath.Join(bySCL, "31TEJ", f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the mask band's output differs from dropping SCL 1–11", f)
		}
	}
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for yaml, want := range map[string]config.MaskConfig{
		"mask: none":               {DropSCL: []int{}},
		"mask: CLM":                {Band: "CLM"},
		"mask: {band: CLM}":        {Band: "CLM"},
		"mask: {drop_scl: [3]}":    {DropSCL: []int{3}},
		"mask: scl":                {DropSCL: []int{0, 1, 3, 8, 9, 10}},
		"mask:\n  drop_scl: [8]\n": {DropSCL: []int{8}},
	} {
		text := regexp.MustCompile(`(?m)^mask:\n(  .*\n)+`).ReplaceAllString(string(raw), yaml+"\n")
		cfg, err := config.ParseIngestConfig([]byte(text))
		if err != nil {
			t.Errorf("%q: %v", yaml, err)
			continue
		}
		if cfg.Mask.Band != want.Band || !slices.Equal(cfg.Mask.DropSCL, want.DropSCL) || (cfg.Mask.DropSCL == nil) != (want.DropSCL == nil) {
			t.Errorf("%q parsed as %+v, want %+v", yaml, cfg.Mask, want)
		}
	}
	for yaml, want := range map[string]string{
		"mask: {band: CLM, drop_scl: [3]}": "exclude each other",
		"mask: {bnd: CLM}":                 "unknown key",
		"mask: B04":                        "one of the stacked bands",
		"mask: SCL":                        "lowercase",
		"mask: {band: none}":               "lowercase",
	} {
		text := regexp.MustCompile(`(?m)^mask:\n(  .*\n)+`).ReplaceAllString(string(raw), yaml+"\n")
		if _, err := config.ParseIngestConfig([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", yaml, err, want)
		}
	}
}

// TestIngestWarnsOfCodesOutsideScheme ingests the tiny scene with a label
// item whose classification:classes leave out tree cover (10): the tile's
// result, its manifest and a warning count the tile's pixels of code 10,
// as labels.tif holds them. The scene as written (every code declared)
// records nothing.
func TestIngestWarnsOfCodesOutsideScheme(t *testing.T) {
	scene := makeScene(t, "tiny", synthConfig(t))
	edited := filepath.Join(t.TempDir(), "scene")
	if err := os.CopyFS(edited, os.DirFS(scene)); err != nil {
		t.Fatal(err)
	}
	items, _ := filepath.Glob(filepath.Join(edited, "esa-worldcover", "*", "ESA_*.json"))
	if len(items) != 1 {
		t.Fatalf("label items %v", items)
	}
	body, _ := os.ReadFile(items[0])
	var item map[string]any
	if err := json.Unmarshal(body, &item); err != nil {
		t.Fatal(err)
	}
	asset := item["assets"].(map[string]any)["map"].(map[string]any)
	var kept []any
	for _, c := range asset["classification:classes"].([]any) {
		if c.(map[string]any)["value"].(float64) != 10 {
			kept = append(kept, c)
		}
	}
	asset["classification:classes"] = kept
	body, _ = json.Marshal(item)
	if err := os.WriteFile(items[0], body, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	out := filepath.Join(t.TempDir(), "stack")
	res, err := ingest.Ingest(context.Background(), ingestConfig(t, filepath.Join(edited, "catalog.json")),
		stage.Options{Out: out, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := readU16(t, filepath.Join(out, "31TEJ", "labels.tif"), 1)
	var trees int64
	for _, v := range labels {
		if v == 10 {
			trees++
		}
	}
	if trees == 0 || len(res.Tiles) != 1 || !maps.Equal(res.Tiles[0].Outside, map[uint8]int64{10: trees}) {
		t.Fatalf("%d tree pixels; outside the scheme %v", trees, res.Tiles[0].Outside)
	}
	if !strings.Contains(logs.String(), "tile 31TEJ") || !strings.Contains(logs.String(), fmt.Sprintf("10 (%d)", trees)) {
		t.Errorf("no warning of code 10 in the log:\n%s", logs.String())
	}
	manifest, _ := os.ReadFile(filepath.Join(out, "31TEJ", "manifest.json"))
	if !strings.Contains(string(manifest), fmt.Sprintf(`"10": %d`, trees)) {
		t.Error("the manifest does not count code 10 outside the scheme")
	}
	plain, _ := os.ReadFile(filepath.Join(demoStack(t), "31TEJ", "manifest.json"))
	if strings.Contains(string(plain), "labels_outside_scheme") {
		t.Error("a scene whose codes are all in its scheme records codes outside it")
	}
}

// TestResolvedIngestConfigRoundTrip writes every embedded ingest config,
// and variants of its mask and labels, as ingest writes its resolved
// ingest.yaml, and reads it back: it must be accepted and hash the same,
// so that a run given its own ingest.yaml resumes rather than refusing a
// different config.
func TestResolvedIngestConfigRoundTrip(t *testing.T) {
	var raws []string
	for _, name := range configs.Names() {
		if !strings.HasPrefix(name, "ingest-") {
			continue
		}
		raw, err := configs.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, string(raw))
	}
	if len(raws) < 4 {
		t.Fatalf("only %d embedded ingest configs", len(raws))
	}
	base := raws[0]
	if !strings.Contains(base, "  label_collection: esa-worldcover\n") || !strings.Contains(base, "  labels: mode\n") {
		t.Fatalf("%s has no label collection or label resampling to vary", configs.Names()[0])
	}
	unmasked := regexp.MustCompile(`(?m)^mask:.*\n(  .*\n)*`).ReplaceAllString(base, "")
	if unmasked == base {
		t.Fatal("no mask key to vary")
	}
	for _, mask := range []string{"none", "CLM", "{band: CLM}", "{drop_scl: [3, 8]}", "{drop_scl: []}", "scl"} {
		raws = append(raws, unmasked+"mask: "+mask+"\n")
	}
	raws = append(raws, strings.NewReplacer("  label_collection: esa-worldcover\n", "  labels: /data/field.gpkg\n  label_field: class\n",
		"  labels: mode\n", "").Replace(base))
	ungridded := regexp.MustCompile(`(?m)^grid:.*\n(  .*\n)*`).ReplaceAllString(base, "")
	raws = append(raws, ungridded+"grid: {resolution: 10, epsg: 32631, bounds: [500000, 5000000, 510000, 5010000]}\n")
	dir := t.TempDir()
	for i, raw := range raws {
		cfg, err := config.ParseIngestConfig([]byte(raw))
		if err != nil {
			t.Fatalf("config %d: %v\n%s", i, err, raw)
		}
		path := filepath.Join(dir, fmt.Sprintf("ingest-%d.yaml", i))
		if err := stage.WriteResolvedConfig(path, cfg.Redacted()); err != nil {
			t.Fatal(err)
		}
		written, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		back, err := config.ParseIngestConfig(written)
		if err != nil {
			t.Errorf("config %d: its resolved config is refused: %v\n%s", i, err, written)
			continue
		}
		if back.Hash() != cfg.Hash() {
			a, _ := json.Marshal(cfg.Redacted())
			b, _ := json.Marshal(back.Redacted())
			t.Errorf("config %d: hash changed when read back\nread:    %s\nwritten: %s", i, a, b)
		}
	}
}
