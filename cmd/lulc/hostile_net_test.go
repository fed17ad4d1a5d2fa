package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lulc/lulc/configs"
)

// The network's hostile cases: servers that never answer, stall, trickle,
// lie or flood, behind a static catalog's COG hrefs, a STAC API, vector
// labels over HTTP and object storage (GDAL's /vsis3/ pointed at them).
// Every case runs with --stall-timeout 1s, so that a wait without end
// shows as a case that takes minutes, and each takes a few seconds.

// netStall is the stall limit the cases run under.
const netStall = "1s"

// netSilent starts a listener that accepts connections and never answers
// nor closes them, and returns its address.
func netSilent(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 1024)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		close(held)
		for c := range held {
			c.Close()
		}
	})
	return l.Addr().String()
}

// netRefused returns an address where nothing listens.
func netRefused(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// netServer starts an HTTP server with handler h and returns its base
// URL. Handlers that stall must also end on stop, closed first at
// cleanup.
func netServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, stop <-chan struct{})) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, stop) }))
	t.Cleanup(func() {
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// netWait blocks until the client goes away or the test ends.
func netWait(r *http.Request, stop <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}

// netFile serves files from dir, ranges included (http.ServeContent), as
// a COG host does, with GDAL's HEAD and range requests logged nowhere.
func netFile(dir string) func(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(r.URL.Path)))
	}
}

// netBehaviour is a hostile server's way to answer a request for a file
// whose true bytes are body.
type netBehaviour func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{})

// The behaviours.
var (
	// netHeadersThenStall answers HEAD truly, then sends a range reply's
	// headers and no byte of it.
	netHeadersThenStall netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{}) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		netWait(r, stop)
	}
	// netTrickle sends the true bytes, one every 1.5 s.
	netTrickle netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{}) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusOK)
		for _, b := range body {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-r.Context().Done():
				return
			case <-stop:
				return
			}
		}
	}
	// netCloseMidBody sends half of what was asked for, then drops the
	// connection.
	netCloseMidBody netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, _ <-chan struct{}) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}
	// netHTML answers every request with a web page: a login wall or a
	// captive portal.
	netHTML netBehaviour = func(w http.ResponseWriter, r *http.Request, _ []byte, _ <-chan struct{}) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><html><head><title>Sign in</title></head><body>Please sign in to continue.</body></html>\n")
	}
	// netStatus answers every request with a status and a short body.
	netStatus = func(code int) netBehaviour {
		return func(w http.ResponseWriter, r *http.Request, _ []byte, _ <-chan struct{}) {
			http.Error(w, http.StatusText(code), code)
		}
	}
	// netRedirectLoop sends every request back to itself.
	netRedirectLoop netBehaviour = func(w http.ResponseWriter, r *http.Request, _ []byte, _ <-chan struct{}) {
		http.Redirect(w, r, r.URL.Path+"?again=1", http.StatusFound)
	}
	// netLongLength claims ten times the true size, and sends the true
	// bytes for any range (so that a reader past the true end is told
	// nothing).
	netLongLength netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, _ <-chan struct{}) {
		w.Header().Set("Content-Length", fmt.Sprint(10*len(body)))
		if r.Method == http.MethodHead {
			return
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
	// netWrongRange answers every range request with 206 and bytes from
	// the file's start, whatever was asked for.
	netWrongRange netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, _ <-chan struct{}) {
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Method == http.MethodHead || r.Header.Get("Range") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			if r.Method != http.MethodHead {
				w.Write(body)
			}
			return
		}
		var from, to int
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to); err != nil || to < from {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		n := min(to-from+1, len(body))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, from+n-1, len(body)))
		w.Header().Set("Content-Length", fmt.Sprint(n))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body[:n])
	}
	// netFlood answers a range request with 200 and an endless body of
	// bytes, at full speed: a reader that buffers it all runs out of
	// memory. It stops after 2 GiB so that a failing test ends.
	netFlood netBehaviour = func(w http.ResponseWriter, r *http.Request, body []byte, stop <-chan struct{}) {
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			return
		}
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte("lulc"), 1<<16)
		for sent := 0; sent < 2<<30; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
)

// netHost serves the files under dir through behaviour b, and returns
// its base URL.
func netHost(t *testing.T, dir string, b netBehaviour) string {
	t.Helper()
	return netServer(t, func(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
		body, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.URL.Path)))
		b(w, r, body, stop)
	})
}

// netRehref points the asset hrefs "./<name>" of the case's scene copy's
// items matching pattern at base/<item dir>/<name> (every asset when name
// is ""), and returns the copy's catalog.
func netRehref(c *hcase, pattern, name, base string) string {
	c.t.Helper()
	cat := c.scene()
	items, _ := filepath.Glob(filepath.Join(c.path("scene"), pattern))
	if len(items) == 0 {
		c.t.Fatalf("scene has no %s", pattern)
	}
	for _, it := range items {
		body, err := os.ReadFile(it)
		if err != nil {
			c.t.Fatal(err)
		}
		rel, _ := filepath.Rel(c.path("scene"), filepath.Dir(it))
		prefix := base + "/" + filepath.ToSlash(rel) + "/"
		var out []byte
		if name == "" {
			out = bytes.ReplaceAll(body, []byte(`"href": "./`), []byte(`"href": "`+prefix))
			// The item's own links stay local.
			out = bytes.ReplaceAll(out, []byte(`"href": "`+prefix+"../"), []byte(`"href": "./../`))
		} else {
			out = bytes.ReplaceAll(body, []byte(`"href": "./`+name+`"`), []byte(`"href": "`+prefix+name+`"`))
		}
		if bytes.Equal(out, body) {
			c.t.Fatalf("%s has no asset %q", it, name)
		}
		if err := os.WriteFile(it, out, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	return cat
}

// netIngest is the command line of an ingest of catalog under the stall
// limit.
// GDAL's retries of a 5xx are made quick (0.1 s apart), the rest kept.
func netIngest(c *hcase, catalog string, extra ...string) []string {
	cfg := netIngestConfig(c)
	return append([]string{"ingest", "--stall-timeout", netStall, "-c", cfg, "--catalog", catalog, "--out", c.out()}, extra...)
}

// netIngestConfig writes ingest-tiny.yaml with quick retries and each
// pair of olds and news replaced, and returns its path.
func netIngestConfig(c *hcase, oldNew ...string) string {
	c.t.Helper()
	raw, err := configs.Read("ingest-tiny.yaml")
	if err != nil {
		c.t.Fatal(err)
	}
	body := string(raw)
	oldNew = append(oldNew, `GDAL_HTTP_RETRY_DELAY: "1"`, `GDAL_HTTP_RETRY_DELAY: "0.1"`)
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(body, oldNew[i]) {
			c.t.Fatalf("ingest-tiny.yaml has no %q", oldNew[i])
		}
		body = strings.Replace(body, oldNew[i], oldNew[i+1], 1)
	}
	return c.file("ingest-net.yaml", []byte(body))
}

// netCOG is a case whose scene's B04 of one item (every band of every
// item with all) is served by a hostile server.
func netCOG(name string, b netBehaviour, all bool, want ...string) hostile {
	return hostile{name: "cog-" + name, code: exitFailure, want: want, setup: func(c *hcase) []string {
		dir := c.path("scene")
		base := netHost(c.t, dir, b)
		if all {
			return netIngest(c, netRehref(c, "sentinel-2-l2a/*/S2*.json", "", base))
		}
		return netIngest(c, netRehref(c, item, "B04.tif", base))
	}}
}

func TestHostileNetwork(t *testing.T) {
	cases := []hostile{
		{name: "cog-silent", code: exitFailure, want: []string{"B04.tif", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netIngest(c, netRehref(c, item, "B04.tif", "http://"+netSilent(c.t)))
		}},
		{name: "cog-refused", code: exitFailure, want: []string{"B04.tif", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netIngest(c, netRehref(c, item, "B04.tif", "http://"+netRefused(c.t)))
		}},
		{name: "cog-every-band-silent", code: exitFailure, want: []string{".tif", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netIngest(c, netRehref(c, "sentinel-2-l2a/*/S2*.json", "", "http://"+netSilent(c.t)))
		}},
		netCOG("headers-then-stall", netHeadersThenStall, false, "B04.tif", "127.0.0.1"),
		netCOG("trickle", netTrickle, false, "B04.tif", "127.0.0.1"),
		netCOG("close-mid-body", netCloseMidBody, false, "B04.tif", "127.0.0.1"),
		netCOG("html", netHTML, false, "B04.tif", "127.0.0.1"),
		netCOG("500-forever", netStatus(http.StatusInternalServerError), false, "B04.tif", "127.0.0.1"),
		netCOG("503-forever", netStatus(http.StatusServiceUnavailable), false, "B04.tif", "127.0.0.1"),
		netCOG("403", netStatus(http.StatusForbidden), false, "B04.tif", "127.0.0.1"),
		netCOG("404", netStatus(http.StatusNotFound), false, "B04.tif", "127.0.0.1"),
		netCOG("redirect-loop", netRedirectLoop, false, "B04.tif", "127.0.0.1"),
		// A size ten times the truth, with the true bytes: the COG's own
		// offsets keep every read within them, and the stack is made.
		{name: "cog-content-length-lies", code: exitOK, setup: func(c *hcase) []string {
			return netIngest(c, netRehref(c, item, "B04.tif", netHost(c.t, c.path("scene"), netLongLength)))
		}},
		netCOG("wrong-range", netWrongRange, false, "B04.tif", "127.0.0.1"),
		netCOG("every-band-trickle", netTrickle, true, ".tif", "127.0.0.1"),
		{name: "scl-silent", code: exitFailure, want: []string{"SCL.tif", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netIngest(c, netRehref(c, item, "SCL.tif", "http://"+netSilent(c.t)))
		}},
		{name: "labels-map-silent", code: exitFailure, want: []string{"_Map.tif", "127.0.0.1"}, setup: func(c *hcase) []string {
			cat := c.scene()
			it, _ := filepath.Glob(filepath.Join(c.path("scene"), litem))
			m, _ := filepath.Glob(filepath.Join(c.path("scene"), label))
			if len(it) == 0 || len(m) == 0 {
				c.t.Fatal("scene has no label item")
			}
			name := filepath.Base(m[0])
			body, _ := os.ReadFile(it[0])
			body = bytes.ReplaceAll(body, []byte(`"href": "./`+name+`"`), []byte(`"href": "http://`+netSilent(c.t)+"/"+name+`"`))
			os.WriteFile(it[0], body, 0o644)
			return netIngest(c, cat)
		}},
	}
	cases = append(cases, netAPICases()...)
	cases = append(cases, netVectorCases()...)
	cases = append(cases, netStoreCases()...)
	runHostile(t, cases)
}

// netAPI is the command line of an ingest whose source is a STAC API at
// base, with short request and search limits.
func netAPI(c *hcase, base string) []string {
	return netAPILimits(c, base, "1s", "4s")
}

// netAPILimits is netAPI with the request and search limits given.
func netAPILimits(c *hcase, base, request, search string) []string {
	cfg := netIngestConfig(c, "catalog: runs/demo/scene/catalog.json",
		"api: "+base+"\n  request_timeout: "+request+"\n  search_timeout: "+search)
	return []string{"ingest", "--stall-timeout", netStall, "-c", cfg, "--out", c.out()}
}

// netAPICases: STAC API searches against hostile servers end within
// source.search_timeout, naming the search's URL and why.
func netAPICases() []hostile {
	api := func(name string, b netBehaviour, want ...string) hostile {
		return hostile{name: "api-" + name, code: exitFailure, want: want, setup: func(c *hcase) []string {
			// An empty page, as a search over nothing returns.
			c.file("api/search", []byte(`{"type": "FeatureCollection", "features": [], "links": []}`))
			return netAPI(c, netHost(c.t, c.path("api"), b))
		}}
	}
	return []hostile{
		{name: "api-silent", code: exitFailure, want: []string{"/search", "source.search_timeout"}, setup: func(c *hcase) []string {
			return netAPI(c, "http://"+netSilent(c.t))
		}},
		{name: "api-refused", code: exitFailure, want: []string{"/search", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netAPI(c, "http://"+netRefused(c.t))
		}},
		api("headers-then-stall", netHeadersThenStall, "/search", "source.search_timeout"),
		api("trickle", netTrickle, "/search", "source.search_timeout"),
		api("html", netHTML, "/search", "decode response"),
		api("500-forever", netStatus(http.StatusInternalServerError), "/search", "HTTP 500"),
		api("redirect-loop", netRedirectLoop, "/search", "redirects"),
		// Limits long enough for 64 MiB on a loaded machine: the size
		// limit, not a timeout, must end each attempt.
		{name: "api-flood", code: exitFailure, want: []string{"/search", "larger than 64 MiB"}, setup: func(c *hcase) []string {
			c.file("api/search", []byte(`{}`))
			return netAPILimits(c, netHost(c.t, c.path("api"), netFlood), "20s", "60s")
		}},
	}
}

// netVector is the command line of an ingest labelled by the vector
// layer at href instead of the label collection.
func netVector(c *hcase, href string) []string {
	cfg := netIngestConfig(c, "label_collection: esa-worldcover", "labels: "+href+"\n  label_field: class", "  labels: mode\n", "")
	return []string{"ingest", "--stall-timeout", netStall, "-c", cfg, "--catalog", c.w.catalog, "--out", c.out()}
}

// netVectorCases: vector labels over HTTP (GDAL's /vsicurl/) from hostile
// servers fail, naming the layer's URL.
func netVectorCases() []hostile {
	geojson := []byte(`{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"class": 10}, "geometry": {"type": "Point", "coordinates": [3.0, 45.14]}}]}`)
	vec := func(name string, b netBehaviour) hostile {
		return hostile{name: "vector-" + name, code: exitFailure, want: []string{"source.labels", "labels.geojson"}, setup: func(c *hcase) []string {
			c.file("layer/labels.geojson", geojson)
			return netVector(c, netHost(c.t, c.path("layer"), b)+"/labels.geojson")
		}}
	}
	return []hostile{
		{name: "vector-silent", code: exitFailure, want: []string{"source.labels", "labels.geojson", "127.0.0.1"}, setup: func(c *hcase) []string {
			return netVector(c, "http://"+netSilent(c.t)+"/labels.geojson")
		}},
		{name: "vector-vsicurl-silent", code: exitFailure, want: []string{"source.labels", "labels.geojson"}, setup: func(c *hcase) []string {
			return netVector(c, "/vsicurl/http://"+netSilent(c.t)+"/labels.geojson")
		}},
		vec("headers-then-stall", netHeadersThenStall),
		vec("trickle", netTrickle),
		vec("close-mid-body", netCloseMidBody),
		vec("html", netHTML),
		vec("500-forever", netStatus(http.StatusInternalServerError)),
		vec("redirect-loop", netRedirectLoop),
	}
}

// netStore points GDAL's /vsis3/ at addr (for the case only) and returns
// the output URL of the case.
func netStore(c *hcase, addr string) string {
	for k, v := range map[string]string{"AWS_S3_ENDPOINT": addr, "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE",
		"AWS_ACCESS_KEY_ID": "LULCNETTEST", "AWS_SECRET_ACCESS_KEY": "lulc-net-secret-key", "AWS_REGION": "us-east-1"} {
		c.t.Setenv(k, v)
	}
	return "s3://lulc-net/" + filepath.Base(c.dir)
}

// netS3 answers object storage requests: reads with rd, writes (PUT,
// POST, DELETE) with wr.
func netS3(c *hcase, rd, wr netBehaviour) string {
	u := netServer(c.t, func(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			rd(w, r, nil, stop)
			return
		}
		wr(w, r, nil, stop)
	})
	return u[len("http://"):]
}

// netStoreCases: an object store that never answers, fails or stalls an
// upload ends `lulc run --out s3://…`, `plan --out s3://…` and inputs
// read from it, naming the object's URL, never passing for an empty
// store. The secret key is never printed.
func netStoreCases() []hostile {
	run := func(c *hcase, out string, extra ...string) []string {
		rc := c.config("run-demo.yaml", "ingest: ingest-tiny.yaml", "ingest: "+netIngestConfig(c))
		return append([]string{"run", "--stall-timeout", netStall, "-c", rc, "--catalog", c.w.catalog, "--work", c.path("work"), "--out", out}, extra...)
	}
	notFound := netStatus(http.StatusNotFound)
	return []hostile{
		{name: "s3-out-silent", code: exitFailure, want: []string{"lulc-commit.json", "s3://lulc-net/", "no answer"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netSilent(c.t)))
		}},
		{name: "s3-out-refused", code: exitFailure, want: []string{"lulc-commit.json", "s3://lulc-net/"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netRefused(c.t)))
		}},
		{name: "s3-out-500-forever", code: exitFailure, want: []string{"lulc-commit.json", "500"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netS3(c, netStatus(http.StatusInternalServerError), netStatus(http.StatusInternalServerError))))
		}},
		{name: "s3-out-403", code: exitFailure, want: []string{"lulc-commit.json", "403"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netS3(c, netStatus(http.StatusForbidden), netStatus(http.StatusForbidden))))
		}},
		{name: "s3-out-headers-then-stall", code: exitFailure, want: []string{"lulc-commit.json", "s3://lulc-net/"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netS3(c, netHeadersThenStall, netHeadersThenStall)))
		}},
		{name: "s3-upload-stalls", code: exitFailure, want: []string{"upload s3://lulc-net/"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netS3(c, notFound, func(w http.ResponseWriter, r *http.Request, _ []byte, stop <-chan struct{}) { netWait(r, stop) })))
		}},
		{name: "s3-upload-500-forever", code: exitFailure, want: []string{"upload s3://lulc-net/"}, setup: func(c *hcase) []string {
			return run(c, netStore(c, netS3(c, notFound, netStatus(http.StatusInternalServerError))))
		}},
		{name: "s3-model-silent", code: exitFailure, want: []string{"s3://lulc-net/", "model/lulc-commit.json", "no answer"}, setup: func(c *hcase) []string {
			return run(c, c.out(), "--model", netStore(c, netSilent(c.t))+"/model/model.lulcrf")
		}},
		{name: "s3-plan-in-silent", code: exitFailure, want: []string{"plan.json", "no answer"}, setup: func(c *hcase) []string {
			return run(c, c.out(), "--plan", netStore(c, netSilent(c.t))+"/plan.json")
		}},
		{name: "s3-plan-out-silent", code: exitFailure, want: []string{"plan.json", "s3://lulc-net/"}, setup: func(c *hcase) []string {
			return []string{"plan", "--stall-timeout", netStall, "--catalog", c.w.catalog, "--out", netStore(c, netSilent(c.t)) + "/plan.json"}
		}},
	}
}

// netSubprocess starts lulc with args as a process of its own (the test
// binary, LULC_TEST_MAIN=1), its stderr into the returned buffer.
func netSubprocess(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "LULC_TEST_MAIN=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

// TestStalledReadEnds: `lulc ingest` of a COG behind a server that never
// answers fails within the stall limit and a margin, naming the URL, and
// logs the wait at the heartbeat interval meanwhile.
func TestStalledReadEnds(t *testing.T) {
	w := hostileWorld(t)
	c := &hcase{t: t, w: w, dir: t.TempDir()}
	cat := netRehref(c, item, "B04.tif", "http://"+netSilent(t))
	start := time.Now()
	cmd, stderr := netSubprocess(t, nil, "ingest", "--stall-timeout", "3s", "--heartbeat", "500ms", "--catalog", cat, "--out", c.out())
	err := cmd.Wait()
	took := time.Since(start)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailure {
		t.Fatalf("exit %v, want %d: %s", err, exitFailure, stderr)
	}
	// GDAL sends up to three requests for one file, each ended after 3 s.
	if took > 15*time.Second {
		t.Errorf("took %s with a 3 s stall limit", took)
	}
	if !strings.Contains(stderr.String(), "B04.tif") || !strings.Contains(stderr.String(), "127.0.0.1") {
		t.Errorf("the error does not name the URL: %s", stderr)
	}
	if !strings.Contains(stderr.String(), "waiting on the network") {
		t.Errorf("no heartbeat line in %s of waiting: %s", took, stderr)
	}
	if exists(c.out()) {
		t.Error("a failed ingest left its output")
	}
}

// TestInterruptDuringStall: SIGINT or SIGTERM while a GDAL read or an
// upload hangs on a server that never answers (the stall limit far off)
// ends lulc within 2 s with exit 130 and nothing committed; a rerun once
// the server answers takes over the lock and finishes.
func TestInterruptDuringStall(t *testing.T) {
	w := hostileWorld(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String()+"/cog", func(t *testing.T) {
			c := &hcase{t: t, w: w, dir: t.TempDir()}
			var answer atomic.Bool
			serve := netFile(c.path("scene"))
			base := netServer(t, func(rw http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
				if answer.Load() {
					serve(rw, r, stop)
					return
				}
				netWait(r, stop)
			})
			cat := netRehref(c, item, "B04.tif", base)
			args := []string{"ingest", "--stall-timeout", "120s", "--catalog", cat, "--out", c.out()}
			netInterrupt(t, sig, filepath.Join(c.dir, ".out.partial"), args...)
			if exists(c.out()) {
				t.Fatal("the interrupted ingest committed its output")
			}
			answer.Store(true)
			if code, _, stderr := lulc(t, append([]string{"-q"}, args...)...); code != 0 {
				t.Fatalf("rerun once the server answers: exit %d: %s", code, stderr)
			}
		})
	}
	t.Run("upload", func(t *testing.T) {
		c := &hcase{t: t, w: w, dir: t.TempDir()}
		addr := netS3(c, netStatus(http.StatusNotFound), func(rw http.ResponseWriter, r *http.Request, _ []byte, stop <-chan struct{}) { netWait(r, stop) })
		out := netStore(c, addr)
		args := []string{"run", "--stall-timeout", "120s", "--catalog", w.catalog, "--work", c.path("work"), "--out", out}
		// The upload has begun once the workspace's output is complete.
		netInterrupt(t, os.Interrupt, filepath.Join(c.path("work"), "lulc-work-*", "out", "report.json"), args...)
	})
}

// netInterrupt runs lulc, sends sig once a file matches pattern and a second
// has passed (the command is then waiting on the network), and expects
// exit 130 within 2 s of the signal.
func netInterrupt(t *testing.T, sig os.Signal, pattern string, args ...string) {
	t.Helper()
	cmd, stderr := netSubprocess(t, nil, args...)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if cmd.ProcessState != nil {
		t.Fatalf("lulc ended before the signal: %s", stderr)
	}
	sent := time.Now()
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(sent)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
			t.Fatalf("exit %v, want %d: %s", err, exitInterrupted, stderr)
		}
		if took > 2*time.Second {
			t.Errorf("exited %s after the signal, want within 2 s", took)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10 s after %s: %s", sig, stderr)
	}
}
