package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// item is a tile's item.json as lulc predict writes it, cut to what the
// page reads.
const item = `{
  "type": "Feature",
  "properties": {"proj:epsg": 32631, "lulc:aoa_threshold": 0.18},
  "assets": {
    "classification": {
      "href": "./class.tif",
      "proj:shape": [252, 250],
      "proj:transform": [10, 0, 499980, 0, -10, 5000040],
      "classification:classes": [
        {"value": 20, "description": "Shrubland", "color-hint": "FFBB22"},
        {"value": 10, "description": "Tree cover", "color-hint": "006400"}
      ]
    },
    "aoa": {"href": "./aoa.tif", "proj:shape": [26, 26], "proj:transform": [100, 0, 499980, 0, -100, 5000040]}
  }
}`

const stackItem = `{"assets": {"stack": {"href": "./stack.tif",
  "eo:bands": [{"name": "B02", "common_name": "blue"}, {"name": "B03", "common_name": "green"}, {"name": "B04", "common_name": "red"}, {"name": "B08", "common_name": "nir"}],
  "raster:bands": [{"scale": 0.0001, "offset": -0.1}, {"scale": 0.0001, "offset": -0.1}, {"scale": 0.0001, "offset": -0.1}, {"scale": 0.0001, "offset": -0.1}]}}}`

// write creates the files of a fake run under dir: name → content.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeRun writes a run of two tiles: 31TEJ as lulc predict writes it, and
// 31TFJ as lulc run writes it with its stack kept; and beside them a
// directory that is no tile.
func fakeRun(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "run")
	write(t, dir, map[string]string{
		"collection.json":            `{}`,
		"31TEJ/class.tif":            strings.Repeat("c", 1000),
		"31TEJ/confidence.tif":       "confidence",
		"31TEJ/aoa.tif":              "aoa",
		"31TEJ/item.json":            item,
		"31TEJ/notes.txt":            "not a run's file",
		"31TFJ/class.tif":            "class of 31TFJ",
		"31TFJ/labels.tif":           "labels",
		"31TFJ/stack.tif":            "stack",
		"31TFJ/stack-item.json":      stackItem,
		"31TFJ/metrics.json":         `{"overall_accuracy": 0.9}`,
		"31TFJ/item.json":            item,
		"model/model.lulcrf":         "model",
		".hidden/class.tif":          "hidden",
		"31TGJ-incomplete/item.json": item,
	})
	return dir
}

func TestDiscoverRun(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Tiles) != 2 || run.Tiles[0].Name != "31TEJ" || run.Tiles[1].Name != "31TFJ" {
		t.Fatalf("tiles %+v, want 31TEJ and 31TFJ", run.Tiles)
	}
	tej, tfj := run.Tiles[0], run.Tiles[1]
	want := map[string]string{LayerClass: "31TEJ/class.tif", LayerConfidence: "31TEJ/confidence.tif", LayerAOA: "31TEJ/aoa.tif"}
	if fmt.Sprint(tej.Layers) != fmt.Sprint(want) {
		t.Errorf("31TEJ layers %v, want %v", tej.Layers, want)
	}
	want = map[string]string{LayerClass: "31TFJ/class.tif", LayerLabels: "31TFJ/labels.tif", LayerStack: "31TFJ/stack.tif"}
	if fmt.Sprint(tfj.Layers) != fmt.Sprint(want) {
		t.Errorf("31TFJ layers %v, want %v", tfj.Layers, want)
	}
	if fmt.Sprint(tfj.Side) != "[31TFJ/item.json 31TFJ/metrics.json]" {
		t.Errorf("31TFJ side files %v", tfj.Side)
	}
	wantClasses := []Class{{10, "Tree cover", "#006400"}, {20, "Shrubland", "#ffbb22"}}
	if fmt.Sprint(tej.Classes) != fmt.Sprint(wantClasses) {
		t.Errorf("classes %v, want %v", tej.Classes, wantClasses)
	}
	g := tej.Grid
	if g.EPSG != 32631 || g.Width != 250 || g.Height != 252 || g.Transform != [6]float64{499980, 10, 0, 5000040, 0, -10} {
		t.Errorf("grid %+v: want the class asset's, in GDAL's order", g)
	}
	if tej.AOAThreshold != 0.18 {
		t.Errorf("AOA threshold %g", tej.AOAThreshold)
	}
	if tej.RGB != nil {
		t.Errorf("31TEJ has no stack but RGB %+v", tej.RGB)
	}
	if tfj.RGB == nil || tfj.RGB.Bands != [3]int{3, 2, 1} || tfj.RGB.Scale != 0.0001 || tfj.RGB.Offset != -0.1 {
		t.Errorf("31TFJ RGB %+v, want bands 3, 2, 1 scaled by 0.0001 from -0.1", tfj.RGB)
	}
}

// TestDiscoverOneTile: a tile's own directory is a run of one tile, and
// without item.json the scheme comes from class.qml, else from GDAL's
// category names.
func TestDiscoverOneTile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "31TEJ")
	write(t, dir, map[string]string{
		"class.tif": "class",
		"class.qml": `<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>
<qgis version="3.28"><pipe><rasterrenderer type="paletted" band="1"><colorPalette>
<paletteEntry value="10" color="#006400" alpha="255" label="Tree cover"></paletteEntry>
<paletteEntry value="80" color="#0064c8" alpha="255" label="Water"></paletteEntry>
</colorPalette></rasterrenderer></pipe></qgis>`,
		"class.tif.aux.xml": `<PAMDataset><PAMRasterBand band="1"><CategoryNames>
<Category></Category><Category>One</Category><Category></Category><Category>Three</Category>
</CategoryNames></PAMRasterBand></PAMDataset>`,
	})
	run, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Tiles) != 1 || run.Tiles[0].Name != "31TEJ" || run.Tiles[0].Layers[LayerClass] != "class.tif" {
		t.Fatalf("tiles %+v", run.Tiles)
	}
	if got := fmt.Sprint(run.Tiles[0].Classes); got != "[{10 Tree cover #006400} {80 Water #0064c8}]" {
		t.Errorf("classes from class.qml: %s", got)
	}
	os.Remove(filepath.Join(dir, "class.qml"))
	run, err = Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := run.Tiles[0].Classes
	if len(c) != 2 || c[0].Value != 1 || c[0].Name != "One" || c[1].Value != 3 || c[1].Name != "Three" || c[0].Color == c[1].Color {
		t.Errorf("classes from the category names: %v", c)
	}
}

func TestDiscoverNoRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"stack/31TEJ/stack.tif": "a stack, not a map"})
	for _, d := range []string{dir, filepath.Join(dir, "stack")} {
		_, err := Discover(d)
		if !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), "class.tif") {
			t.Errorf("%s: %v, want ErrNoRun naming the directory and class.tif", d, err)
		}
	}
	_, err := Discover(filepath.Join(dir, "missing"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing directory: %v", err)
	}
	_, err = Discover(filepath.Join(dir, "stack/31TEJ/stack.tif"))
	if !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// serve starts a server for the run in dir on a free port of 127.0.0.1.
func serve(t *testing.T, run *Run) *Server {
	t.Helper()
	srv, err := Listen(run, DefaultHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return srv
}

// get sends a GET for the raw path (not cleaned) with headers.
func get(t *testing.T, srv *Server, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = path
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestServeBindsLoopbackAndRanges(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, run)
	if !srv.Addr().IP.Equal(net.IPv4(127, 0, 0, 1)) || srv.Addr().Port == 0 {
		t.Errorf("bound %v, want 127.0.0.1 and a port", srv.Addr())
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(srv.Addr().Port) + "/"; srv.URL() != want {
		t.Errorf("URL %s, want %s", srv.URL(), want)
	}
	resp, body := get(t, srv, "/files/31TEJ/class.tif", map[string]string{"Range": "bytes=10-19"})
	if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != "bytes 10-19/1000" || body != strings.Repeat("c", 10) {
		t.Errorf("range: %s, Content-Range %q, %q", resp.Status, resp.Header.Get("Content-Range"), body)
	}
	if resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("Accept-Ranges %q", resp.Header.Get("Accept-Ranges"))
	}
	resp, body = get(t, srv, "/files/31TEJ/class.tif", nil)
	if resp.StatusCode != http.StatusOK || len(body) != 1000 || resp.Header.Get("Content-Type") != "image/tiff" {
		t.Errorf("whole file: %s, %d bytes, %s", resp.Status, len(body), resp.Header.Get("Content-Type"))
	}
	resp, _ = get(t, srv, "/files/31TEJ/class.tif", map[string]string{"Range": "bytes=2000-"})
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("range past the end: %s", resp.Status)
	}
}

// TestServeOnlyTheRunsFiles: no path leaves the run's directory, no file
// of it but the tiles' maps and metadata is served, nothing is listed.
func TestServeOnlyTheRunsFiles(t *testing.T) {
	dir := fakeRun(t)
	secret := filepath.Join(filepath.Dir(dir), "secret.txt")
	write(t, filepath.Dir(dir), map[string]string{"secret.txt": "SECRET"})
	// A link inside a tile's directory to a file outside the run.
	if err := os.Symlink(secret, filepath.Join(dir, "31TFJ", "confidence.tif")); err != nil {
		t.Fatal(err)
	}
	run, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, run)
	for _, path := range []string{
		"/files/../secret.txt", "/files/31TEJ/../../secret.txt", "/files/31TEJ/%2e%2e/%2e%2e/secret.txt",
		"/files/31TEJ/..%2f..%2fsecret.txt", "/files/31TEJ%2f..%2f..%2fsecret.txt", "/../secret.txt",
		"/files/31TFJ/confidence.tif", // the link out
		"/files/31TEJ/notes.txt", "/files/model/model.lulcrf", "/files/.hidden/class.tif", "/collection.json",
		"/files/", "/files/31TEJ/", "/files/31TEJ", "/web/index.html", "/view.js",
	} {
		resp, body := get(t, srv, path, nil)
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent ||
			strings.Contains(body, "SECRET") || strings.Contains(body, "not a run's file") || strings.Contains(body, "31TEJ/class.tif") {
			t.Errorf("%s: %s, %q: served what it must not", path, resp.Status, body[:min(len(body), 80)])
		}
	}
	// Labels the user named are served, outside the directory as they are.
	labels := filepath.Join(filepath.Dir(dir), "my-labels.tif")
	write(t, filepath.Dir(dir), map[string]string{"my-labels.tif": "MYLABELS"})
	if err := run.SetLabels("31TEJ", labels); err != nil {
		t.Fatal(err)
	}
	if err := run.SetLabels("31TXX", labels); err == nil || !strings.Contains(err.Error(), "31TXX") {
		t.Errorf("labels for a tile the run lacks: %v", err)
	}
	srv = serve(t, run)
	if resp, body := get(t, srv, "/files/31TEJ/labels.tif", nil); resp.StatusCode != http.StatusOK || body != "MYLABELS" {
		t.Errorf("labels given: %s %q", resp.Status, body)
	}
}

// TestServeRefusesOtherHosts: a page elsewhere cannot read the run through
// a DNS name rebound to 127.0.0.1; a tunnel's localhost:PORT can.
func TestServeRefusesOtherHosts(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, run)
	for host, want := range map[string]int{"evil.example:80": http.StatusForbidden, "localhost:9999": http.StatusOK, "[::1]:8765": http.StatusOK} {
		req, _ := http.NewRequest("GET", srv.URL()+"run.json", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
}

func TestServePageAndRun(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, run)
	resp, body := get(t, srv, "/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `src="bundle.js"`) {
		t.Errorf("page: %s", resp.Status)
	}
	resp, body = get(t, srv, "/bundle.js", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "generated by scripts/web") || !strings.Contains(body, "Licences of the bundled packages") {
		t.Errorf("bundle: %s, %d bytes", resp.Status, len(body))
	}
	resp, body = get(t, srv, "/run.json", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run.json: %s", resp.Status)
	}
	var p page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "run" || len(p.Tiles) != 2 || p.Tiles[0].EPSG != 32631 || len(p.Tiles[0].Classes) != 2 || p.Tiles[1].RGB == nil {
		t.Fatalf("run.json: %s", body)
	}
	if strings.Contains(body, filepath.Dir(run.Dir)) {
		t.Errorf("run.json names the directory above the run's: %s", body)
	}
	// Every URL run.json names is served.
	for _, tile := range p.Tiles {
		for _, urls := range []map[string]string{tile.Layers, tile.Files} {
			for name, url := range urls {
				if resp, _ := get(t, srv, url, nil); resp.StatusCode != http.StatusOK {
					t.Errorf("%s %s at %s: %s", tile.Name, name, url, resp.Status)
				}
			}
		}
	}
	if fmt.Sprint(p.Tiles[1].Layers) != "map[class:/files/31TFJ/class.tif labels:/files/31TFJ/labels.tif stack:/files/31TFJ/stack.tif]" {
		t.Errorf("31TFJ's layers: %v", p.Tiles[1].Layers)
	}
}

func TestListenPortInUse(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = Listen(run, DefaultHost, port)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("port in use: %v", err)
	}
}

// TestServeStops: Serve returns once its context ends and the port is
// free again.
func TestServeStops(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(run, DefaultHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	ln, err := net.Listen("tcp", srv.Addr().String())
	if err != nil {
		t.Fatalf("port still held: %v", err)
	}
	ln.Close()
}

// TestListenEveryInterface: --host 0.0.0.0 answers any Host, and its
// address for this machine is 127.0.0.1's.
func TestListenEveryInterface(t *testing.T) {
	run, err := Discover(fakeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(run, "0.0.0.0", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if !srv.Addr().IP.IsUnspecified() || !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		t.Errorf("bound %v, URL %s", srv.Addr(), srv.URL())
	}
	req, _ := http.NewRequest("GET", srv.URL()+"run.json", nil)
	req.Host = "gpu-host.example:8765"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Host gpu-host.example: %s", resp.Status)
	}
}
