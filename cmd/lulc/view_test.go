package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
)

// viewDemo makes, once per test binary, a small real map to look at: the
// tiny scene ingested, a model trained and its map predicted with
// confidence and the area of applicability (lulc predict), whose stack's
// labels stand for --labels.
var viewDemo = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "lulc-view-")
	if err != nil {
		return "", err
	}
	viewDemoDir = dir
	for _, args := range [][]string{
		{"synth", "-q", "--out", filepath.Join(dir, "scene")},
		{"ingest", "-q", "--catalog", filepath.Join(dir, "scene", "catalog.json"), "--out", filepath.Join(dir, "stack")},
		{"train", "-q", "--stack", filepath.Join(dir, "stack"), "--out", filepath.Join(dir, "train")},
		{"predict", "-q", "--confidence", "--model", filepath.Join(dir, "train", "model.lulcrf"), "--input", filepath.Join(dir, "stack"), "--out", filepath.Join(dir, "predict")},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			return dir, fmt.Errorf("lulc %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
	}
	return dir, nil
})

func demoDir(t *testing.T) string {
	t.Helper()
	dir, err := viewDemo()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// viewDemoDir is viewDemo's directory once made, removed by TestMain.
var viewDemoDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if viewDemoDir != "" {
		os.RemoveAll(viewDemoDir)
	}
	os.Exit(code)
}

// startView runs lulc view in-process until the test ends and returns the
// address it printed.
func startView(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"view", "--no-browser", "--port", "0"}, args...), pw, &errb)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("lulc view: exit %d after the interrupt, want %d: %s", code, exitOK, errb.String())
		}
	})
	lines := bufio.NewScanner(pr)
	var text []string
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	for lines.Scan() {
		text = append(text, lines.Text())
		if u := url.FindString(lines.Text()); u != "" && strings.HasPrefix(lines.Text(), "lulc view: ") {
			go io.Copy(io.Discard, pr)
			if !lines.Scan() || !strings.Contains(lines.Text(), "ssh -L ") {
				t.Errorf("lulc view does not say how to reach it over SSH: %q", lines.Text())
			}
			return u
		}
	}
	t.Fatalf("lulc view printed no address: %q; stderr %s", text, errb.String())
	return ""
}

func TestViewServesARun(t *testing.T) {
	dir := demoDir(t)
	url := startView(t, filepath.Join(dir, "predict"))
	resp, err := http.Get(url + "run.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Tiles []struct {
			Name   string            `json:"name"`
			EPSG   int               `json:"epsg"`
			Layers map[string]string `json:"layers"`
		} `json:"tiles"`
	}
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tiles) != 1 || p.Tiles[0].Name != "31TEJ" || p.Tiles[0].EPSG != 32631 || len(p.Tiles[0].Layers) != 3 {
		t.Fatalf("run.json: %+v, want 31TEJ with its class, confidence and aoa layers", p)
	}
	req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/")+p.Tiles[0].Layers["class"], nil)
	req.Header.Set("Range", "bytes=0-3")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes 0-3/") || string(b) != "II*\x00" {
		t.Errorf("class.tif's header: %s, %q, %q", resp.Status, resp.Header.Get("Content-Range"), b)
	}
}

func TestViewBadInput(t *testing.T) {
	dir := demoDir(t)
	predict := filepath.Join(dir, "predict")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no run", []string{filepath.Join(dir, "stack")}, []string{filepath.Join(dir, "stack"), "no run's outputs", "class.tif"}},
		{"no directory", []string{filepath.Join(dir, "nowhere")}, []string{"nowhere"}},
		{"no argument", nil, []string{"give the run's output directory"}},
		{"port in use", []string{predict, "--port", busy}, []string{"port " + busy, "in use", "--port 0"}},
		{"bad port", []string{predict, "--port", "70000"}, []string{"--port 70000"}},
		{"labels missing", []string{predict, "--labels", filepath.Join(dir, "nolabels.tif")}, []string{"--labels", "nolabels.tif"}},
		{"labels off the grid", []string{predict, "--labels", filepath.Join(predict, "31TEJ", "aoa.tif")},
			[]string{"aoa.tif", "26×26 px of 100 m", "none of the run's grids", "31TEJ EPSG:32631, 252×252 px of 10 m from (499980, 5000040)", "gdalwarp -t_srs EPSG:32631 -te 499980 4997520 502500 5000040 -ts 252 252"}},
	} {
		args := append([]string{"view", "--no-browser"}, c.args...)
		if c.name != "port in use" && c.name != "bad port" {
			args = append(args, "--port", "0")
		}
		code, _, stderr := lulc(t, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, exitUsage, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: %q does not say %q", c.name, stderr, w)
			}
		}
	}
}

// chromium finds a Chromium or Chrome to drive, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install -y --no-install-recommends chromium): the page is not tested")
	return ""
}

// pixelValues are a pixel's values in the demo's rasters, read with GDAL.
type pixelValues struct {
	col, row          int
	class, confidence int
	di                float64
	inside            bool
	label             int
}

// TestViewPage drives the page in headless Chromium on a real map with
// labels given by --labels: every layer draws, and the inspector, clicked
// at a pixel and asked at another outside the area of applicability,
// reports what GDAL reads in the COGs there. LULC_VIEW_SCREENSHOT=FILE
// keeps a screenshot of the page (docs/img/view.png).
func TestViewPage(t *testing.T) {
	browser := chromium(t)
	dir := demoDir(t)
	tile := filepath.Join(dir, "predict", "31TEJ")
	labels := filepath.Join(dir, "stack", "31TEJ", "labels.tif")
	url := startView(t, filepath.Join(dir, "predict"), "--labels", labels)

	class, g, err := raster.ReadBand[uint8](filepath.Join(tile, "class.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	conf, _, err := raster.ReadBand[uint8](filepath.Join(tile, "confidence.tif"), 1)
	if err != nil {
		t.Fatal(err)
	}
	di, ag := readFloat(t, filepath.Join(tile, "aoa.tif"), 1)
	mask, _ := readFloat(t, filepath.Join(tile, "aoa.tif"), 2)
	lab, _, err := raster.ReadBand[uint8](labels, 1)
	if err != nil {
		t.Fatal(err)
	}
	at := func(col, row int) pixelValues {
		i := row*g.Width + col
		// The AOA's grid is coarser: its cell holding the pixel's centre.
		x := g.Transform[0] + (float64(col)+0.5)*g.Transform[1]
		y := g.Transform[3] + (float64(row)+0.5)*g.Transform[5]
		ac := int((x - ag.Transform[0]) / ag.Transform[1])
		ar := int((y - ag.Transform[3]) / ag.Transform[5])
		j := ar*ag.Width + ac
		return pixelValues{col, row, int(class[i]), int(conf[i]), float64(di[j]), mask[j] == 1, int(lab[i])}
	}
	// A mapped pixel to click, and one outside the area of applicability
	// (or, if the model covers the whole scene, another mapped one).
	clicked := at(137, 91)
	asked := at(20, 230)
	for row := 0; row < g.Height; row++ {
		for col := 0; col < g.Width; col++ {
			if v := at(col, row); v.class != 0 && !v.inside && !math.IsNaN(v.di) {
				asked = v
			}
		}
	}
	if clicked.class == 0 || asked.class == 0 {
		t.Fatalf("the demo's pixels are not mapped: %+v %+v", clicked, asked)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.WindowSize(1200, 800),
		// WebGL on the CPU, where the machine has no GPU.
		chromedp.Flag("use-angle", "swiftshader"),
		chromedp.Flag("enable-unsafe-swiftshader", true),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	var logs []string
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }))
	defer cancel()
	// The first action starts the browser, which lives as long as ctx:
	// no timeout on it, but on the waits.
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"?beside=1&layers=class,confidence,aoa")); err != nil {
		t.Fatalf("page: %v (%s)", err, strings.Join(logs, "; "))
	}
	wait := chromedp.WithPollingTimeout(90 * time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!window.lulcView && (window.lulcView.ready || window.lulcView.error !== null)`, wait)); err != nil {
		t.Fatalf("page never ready: %v", err)
	}
	if pageErr, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.lulcView.error || ""`)); err != nil || pageErr != "" {
		t.Fatalf("page failed: %q %v", pageErr, err)
	}

	// Every layer shown draws: class, confidence, labels beside the map
	// (and the AOA's, most of it transparent: inside).
	drawn, err := measureUntil(ctx, func(d map[string]int) bool {
		return d["class"] >= 100_000 && d["confidence"] >= 100_000 && d["besideLabels"] >= 100_000
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pixels drawn: %v", drawn)
	for _, kind := range []string{"class", "confidence", "besideLabels"} {
		if drawn[kind] < 100_000 {
			t.Errorf("%s drew %d pixels, want the map's ≥ 100000 (all drawn: %v)", kind, drawn[kind], drawn)
		}
	}
	if _, ok := drawn["aoa"]; !ok {
		t.Errorf("the area of applicability's layer did not draw: %v", drawn)
	}

	// A click at a pixel's centre.
	where, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ X, Y float64 }](
		fmt.Sprintf(`window.lulcView.pixelOf("31TEJ", %d, %d)`, clicked.col, clicked.row), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(where.X, where.Y)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Poll[inspected](fmt.Sprintf(
		`window.lulcView.last && window.lulcView.last.col === %d && window.lulcView.last.row === %d && window.lulcView.last`,
		clicked.col, clicked.row), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("click at %+v: %v", where, err)
	}
	checkInspected(t, "clicked", got, clicked)
	panel, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#inspector")))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{got.ClassName, fmt.Sprintf("%d %%", clicked.confidence), "dissimilarity", "label"} {
		if !strings.Contains(panel, w) {
			t.Errorf("the inspector's panel %q does not show %q", panel, w)
		}
	}

	// Another pixel, asked through the page's inspector.
	got, err = chromedp.Run(ctx, chromedp.Evaluate[inspected](fmt.Sprintf(
		`window.lulcView.pixelOf("31TEJ", %d, %d).then((p) => window.lulcView.inspect(p.coordinate))`, asked.col, asked.row), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	checkInspected(t, "asked", got, asked)

	// The confidence's checkbox hides its layer.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#toggles input[data-layer="confidence"]`))); err != nil {
		t.Fatal(err)
	}
	drawn, err = measureUntil(ctx, func(d map[string]int) bool {
		_, ok := d["confidence"]
		return !ok && d["class"] >= 100_000
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := drawn["confidence"]; ok || drawn["class"] < 100_000 {
		t.Errorf("confidence unchecked, the page draws %v, want the class and not the confidence", drawn)
	}

	if shot := os.Getenv("LULC_VIEW_SCREENSHOT"); shot != "" {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]int](`window.lulcView.measure()`, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Two tiles, one of a run that kept its stack (stack.tif, its item and
	// labels.tif in the tile's directory): the selector offers both and
	// all; the stack draws in true colour.
	two := filepath.Join(t.TempDir(), "two")
	kept := filepath.Join(two, "31TEJ-kept")
	for _, f := range []string{"class.tif", "class.tif.aux.xml", "confidence.tif", "aoa.tif", "item.json"} {
		copyFile(t, filepath.Join(tile, f), filepath.Join(two, "31TEJ", f))
		copyFile(t, filepath.Join(tile, f), filepath.Join(kept, f))
	}
	for _, f := range []string{"stack.tif", "stack-item.json", "labels.tif"} {
		copyFile(t, filepath.Join(dir, "stack", "31TEJ", f), filepath.Join(kept, f))
	}
	url = startView(t, two)
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"?tile=*&layers=stack,aoa")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!window.lulcView && (window.lulcView.ready || window.lulcView.error !== null)`, wait)); err != nil {
		t.Fatalf("two tiles: page never ready: %v", err)
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Error   *string  `json:"error"`
		Shown   []string `json:"shown"`
		Options string   `json:"options"`
	}](`({error: lulcView.error, shown: lulcView.shown, options: [...document.querySelectorAll('#tile option')].map((o) => o.value).join(' ')})`))
	if err != nil {
		t.Fatal(err)
	}
	if state.Error != nil || fmt.Sprint(state.Shown) != "[31TEJ 31TEJ-kept]" || state.Options != "* 31TEJ 31TEJ-kept" {
		t.Errorf("two tiles, all shown: %+v", state)
	}
	drawn, err = measureUntil(ctx, func(d map[string]int) bool {
		_, ok := d["class"]
		return !ok && d["stack"] >= 100_000
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := drawn["class"]; ok || drawn["stack"] < 100_000 {
		t.Errorf("two tiles: drawn %v, want the stack in true colour and not the classes", drawn)
	}
	// The stack's own labels, inspected.
	got, err = chromedp.Run(ctx, chromedp.Evaluate[inspected](fmt.Sprintf(
		`window.lulcView.pixelOf("31TEJ-kept", %d, %d).then((p) => window.lulcView.inspect(p.coordinate))`, asked.col, asked.row), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got.Label != asked.label || got.Class != asked.class {
		t.Errorf("two tiles: the page reports %+v at column %d, row %d, GDAL reads %+v", got, asked.col, asked.row, asked)
	}
}

// copyFile copies a file, making the directories it goes in.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readFloat reads a band of a float raster on its own grid.
func readFloat(t *testing.T, path string, band int) ([]float32, geo.Grid) {
	t.Helper()
	info, err := raster.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := raster.OpenLayer(raster.LayerSource{Hrefs: []string{path}, Band: band})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	buf := make([]float32, info.Width*info.Height)
	if err := l.Read(info.Grid, "nearest", buf); err != nil {
		t.Fatal(err)
	}
	return buf, info.Grid
}

// inspected is what the page's inspector reports of a pixel.
type inspected struct {
	Tile       string   `json:"tile"`
	Col        int      `json:"col"`
	Row        int      `json:"row"`
	Class      int      `json:"class"`
	ClassName  string   `json:"className"`
	Confidence int      `json:"confidence"`
	DI         *float64 `json:"di"`
	InsideAOA  bool     `json:"insideAOA"`
	Label      int      `json:"label"`
}

func checkInspected(t *testing.T, what string, got inspected, want pixelValues) {
	t.Helper()
	if got.Tile != "31TEJ" || got.Col != want.col || got.Row != want.row || got.Class != want.class ||
		got.Confidence != want.confidence || got.Label != want.label || got.InsideAOA != want.inside ||
		got.DI == nil || math.Abs(*got.DI-want.di) > 1e-6 || got.ClassName == "" || got.ClassName == "not in the scheme" {
		di := "none"
		if got.DI != nil {
			di = fmt.Sprint(*got.DI)
		}
		t.Errorf("%s pixel: the page reports %+v (DI %s), GDAL reads %+v", what, got, di, want)
	}
}

// measureUntil asks the page to render and count each layer's pixels
// until done accepts the counts, at most 20 times a quarter of a second
// apart, and returns the last counts: a render can complete before a
// layer's GeoTIFF tiles have arrived (seen once in CI on a busy 2-core
// host), and the next one draws them. The caller checks the counts.
func measureUntil(ctx context.Context, done func(map[string]int) bool) (map[string]int, error) {
	var drawn map[string]int
	for try := 0; try < 20; try++ {
		var err error
		drawn, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]int](`window.lulcView.measure()`, chromedp.EvalAwaitPromise))
		if err != nil || done(drawn) {
			return drawn, err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return drawn, nil
}
