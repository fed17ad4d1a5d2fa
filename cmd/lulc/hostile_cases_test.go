package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
)

// mut is a config mutation: replace old by new; the message must name want.
type mut struct{ old, new, want string }

func configCases(kind, file string, args func(c *hcase, cfg string) []string, muts []mut) []hostile {
	var out []hostile
	for i, m := range muts {
		out = append(out, hostile{
			name:  fmt.Sprintf("%s-%02d-%s", kind, i, m.want),
			setup: func(c *hcase) []string { return args(c, c.config(file, m.old, m.new)) },
			code:  exitFailure,
			want:  []string{m.want},
		})
	}
	return out
}

func TestHostileConfigs(t *testing.T) {
	var cases []hostile
	cases = append(cases, configCases("synth", "synth-tiny.yaml", func(c *hcase, cfg string) []string {
		return []string{"synth", "-c", cfg, "--out", c.out()}
	}, []mut{
		{"size: 252", "size: -4", "size"},
		{"size: 252", "size: abc", "size"},
		{"size: 252", "size: 0", "size"},
		{"blocksize: 512", "blocksize: 100", "blocksize"},
		{"compress: DEFLATE", "compress: JPEG9", "compress"},
		{"epsg: 32631", "epsg: 0", "epsg"},
		{"epsg: 32631", "epsg: 99999", "epsg"},
		{"label_noise: 0.10", "label_noise: 3", "label_noise"},
		{"patch_size_m: 300", "patch_size_m: 0", "patch_size_m"},
		{"origin: [499980, 5000040]", "origin: [1]", "origin"},
		{"  10: 0.22   # tree cover", "  10: -0.22", "classes"},
		{"  10: 0.22   # tree cover", "  7: 0.22", "7"},
		{"datetime: 2024-04-18T10:56:29Z", "datetime: yesterday", "datetime"},
		{"cloud_cover: 12", "cloud_cover: 140", "cloud_cover"},
		{"seed: 20260101", "sede: 1", "sede"},
		{"worldcover_year: 2021", "worldcover_year: 1850", "worldcover_year"},
		{"tile: 31TEJ", "tile: [unclosed", "line"},
		{"platform: sentinel-2a, cloud_cover: 12", "platform: landsat-9, cloud_cover: 12", "platform"},
		{"nodata: 18}", "nodata: 120}", "nodata"},
		{"bands_60m: true", "bands_60m: maybe", "bands_60m"},
		{"bands_60m: true", "bands_60m: true\ndem: maybe", "dem"},
		{"bands_60m: true", "bands_60m: true\nsentinel1: [{datetime: 2024-04-20T17:40:12Z, platform: sentinel-1a, orbit_state: polar}]", "orbit_state"},
		{"bands_60m: true", "bands_60m: true\nsentinel1: [{datetime: 2024-04-20T17:40:12Z, platform: sentinel-2a, orbit_state: ascending}]", "sentinel1[0]: platform"},
		{"bands_60m: true", "bands_60m: true\nsentinel1: [{platform: sentinel-1a, orbit_state: ascending}]", "sentinel1[0]: datetime"},
	})...)
	cases = append(cases, configCases("ingest", "ingest-tiny.yaml", func(c *hcase, cfg string) []string {
		return []string{"ingest", "-c", cfg, "--catalog", c.w.catalog, "--out", c.out()}
	}, []mut{
		{"bands: [B02, B03", "bands: [B99, B03", "B99"},
		{"resolution: 10", "resolution: 0.001", "resolution"},
		{"resolution: 10", "resolution: -10", "resolution"},
		{"reflectance: bilinear", "reflectance: lanczos", "reflectance"},
		{"labels: mode", "labels: average", "labels"},
		{"drop_scl: [0, 1, 3, 8, 9, 10]", "drop_scl: [0, 300]", "drop_scl"},
		{"window: 1024", "window: 1000", "window"},
		{"compress: DEFLATE", "compress: GIF", "compress"},
		{"blocksize: 512", "blocksize: 7", "blocksize"},
		{"bbox: [2.99, 45.12, 3.04, 45.16]", "bbox: [3.04, 45.16, 2.99, 45.12]", "bbox"},
		{"bbox: [2.99, 45.12, 3.04, 45.16]", "bbox: [2.99, 45.12]", "bbox"},
		{"start: 2024-04-01", "start: 2024-13-01", "start"},
		{"end: 2024-10-31", "end: 2023-01-01", "end"},
		{"max_cloud_cover: 60", "max_cloud_cover: 160", "max_cloud_cover"},
		{"cloud_filter: query", "cloud_filter: sometimes", "cloud_filter"},
		{"limit: 100", "limit: -1", "limit"},
		{"window: 1024", "windw: 1024", "windw"},
		{"  GDAL_HTTP_MAX_RETRY: \"4\"", "  \"BAD KEY\": \"4\"", "BAD KEY"},
		{"max_cloud_cover: 60", "max_cloud_cover: 60\n\ttabbed: 1", "line"},
		// Layers: names, sources and keys that do not fit, and sources the
		// scene does not have.
		{"window: 1024", "window: 1024\nlayers: [{name: ndvi, raster: dem.tif}]", "spectral index"},
		{"window: 1024", "window: 1024\nlayers: [{name: slope, derive: slope, of: elevation}]", "layers[0] (slope).of"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, collection: cop-dem-glo-30}]", "exclude each other"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, units: db}]", "layers[0] (el).units"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, range: [5, 1]}]", "layers[0] (el).range"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, resampling: mode}]", "layers[0] (el).resampling"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, scale: .nan}]", "scale and offset must be finite"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: dem.tif, bogus: 1}]", "bogus"},
		{"window: 1024", "window: 1024\nlayers: [{name: VV, collection: sentinel-1-rtc, asset: vv, temporal: mean}]", "layers[0] (VV).temporal"},
		{"window: 1024", "window: 1024\nlayers: [elevation]", "layers[0] (elevation): no source"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, raster: nonexistent-dem.tif}]", "nonexistent-dem.tif"},
		{"window: 1024", "window: 1024\nlayers: [{name: el, collection: cop-dem-glo-30}]", "no cop-dem-glo-30 items"},
		{"window: 1024", "window: 1024\nlayers: [{name: VV, collection: sentinel-1-rtc, asset: vv}]", "no sentinel-1-rtc items"},
	})...)
	cases = append(cases, configCases("train", "train-demo.yaml", func(c *hcase, cfg string) []string {
		return []string{"train", "-c", cfg, "--stack", c.w.stack, "--out", c.out()}
	}, []mut{
		{"features: [B02, B03", "features: [FOO, B03", "FOO"},
		{"range(ndbi, 15)]", "range(ndbi, 15), nd(B02)]", "nd(B02)"},
		{"scheme: esa-worldcover", "scheme: corine", "scheme"},
		{"max_per_class: 2000", "max_per_class: 0", "max_per_class"},
		{"block_size: 32", "block_size: 0", "block_size"},
		{"validation_fraction: 0.3", "validation_fraction: 1.5", "validation_fraction"},
		{"min_per_class: 50", "min_per_class: -5", "min_per_class"},
		{"engine: lulc", "engine: xgboost", "engine"},
		{"trees: 100", "trees: 0", "trees"},
		{"max_depth: 16", "max_depth: 99", "max_depth"},
		{"min_samples_leaf: 1", "min_samples_leaf: 0", "min_samples_leaf"},
		{"bins: 128", "bins: 1000", "bins"},
		{"bins: 128", "bins: 1", "bins"},
		{"max_features: 0 ", "max_features: 500 ", "max_features"},
		{"features_per_tree: 20", "features_per_tree: 0", "features_per_tree"},
		{"max_samples: 5000", "max_samples: -1", "max_samples"},
		{"bootstrap: true", "bootstrp: true", "bootstrp"},
		{"min_per_class: 50", "min_per_class: 5000", "too few"},
		{"features: [B02, B03", "features: [elevation, B02, B03", "the stack has no layers"},
		{"range(ndbi, 15)]", "range(ndbi, 15), mean(slope, 7)]", "the stack has no layers"},
	})...)
	cases = append(cases, configCases("run", "run-demo.yaml", func(c *hcase, cfg string) []string {
		return []string{"run", "-c", cfg, "--catalog", c.w.catalog, "--out", c.out()}
	}, runMuts(t))...)
	runHostile(t, cases)
}

// runMuts mutates the run config's own keys.
func runMuts(t *testing.T) []mut {
	raw, err := readConfig("run-demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ms []mut
	for _, m := range []mut{
		{"memory_gb: ", "memory_gb: -1 #", "memory_gb"},
		{"window: ", "window: 999 #", "window"},
		{"compress: ", "compress: BMP #", "compress"},
		{"ingest: ", "ingest: nonexistent.yaml #", "nonexistent.yaml"},
		{"train: ", "train: nonexistent.yaml #", "nonexistent.yaml"},
		{"stack: ", "stack: perhaps #", "stack"},
	} {
		if bytes.Contains(raw, []byte(m.old)) {
			ms = append(ms, m)
		}
	}
	return ms
}

func readConfig(name string) ([]byte, error) { return configs.Read(name) }

var _ = os.Getenv
var _ = filepath.Join
var _ = strings.Contains
