package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

// stacItem is an item that every test query matches, with one asset "red".
func stacItem(id, href string) map[string]any {
	return map[string]any{
		"type": "Feature", "stac_version": "1.0.0", "id": id, "collection": "sentinel-2-l2a",
		"bbox": []float64{2.9, 45.0, 3.1, 45.2}, "geometry": nil, "links": []any{},
		"properties": map[string]any{"datetime": "2024-04-01T10:56:00Z", "s2:mgrs_tile": "31TEJ"},
		"assets":     map[string]any{"red": map[string]any{"href": href}},
	}
}

func stacCatalog(links ...map[string]any) map[string]any {
	return map[string]any{"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "test", "links": links}
}

func stacLink(rel, href string) map[string]any {
	return map[string]any{"rel": rel, "href": href, "type": "application/json"}
}

var everywhere = Query{BBox: [4]float64{-180, -90, 180, 90}}

func itemIDs(items []Item) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids
}

// TestCrawlPolicy crawls a static catalog whose item (or child link) points
// outside its directory: the default policy refuses, naming the href and
// the rule, and source.allow_hrefs widens it.
func TestCrawlPolicy(t *testing.T) {
	cases := []struct {
		name  string
		href  string // the asset href of the item inside; {base} is replaced
		child bool   // whether the root links ../other/catalog.json as a child
		want  []string
		allow string
		items []string // with allow
	}{
		{name: "inside", href: "./B04.tif", items: []string{"inside"}},
		{name: "dotdot", href: "../../../../outside.tif",
			want:  []string{`item inside asset red: href "{base}/outside.tif" is outside the catalog directory {base}/scene (local hrefs must lie under the catalog's directory; add a directory to source.allow_hrefs to read it)`},
			allow: "{base}", items: []string{"inside"}},
		{name: "absolute", href: "{base}/elsewhere/x.tif",
			want:  []string{`href "{base}/elsewhere/x.tif" is outside the catalog directory {base}/scene`},
			allow: "{base}/elsewhere", items: []string{"inside"}},
		{name: "symlink", href: "./link.tif",
			want:  []string{`href "{base}/scene/s2/2024/a/link.tif" resolves to {base}/realdata/B04.tif, outside the catalog directory {base}/scene`},
			allow: "{base}/realdata", items: []string{"inside"}},
		{name: "symlinked dir", href: "./data/B04.tif",
			want:  []string{`href "{base}/scene/s2/2024/a/data/B04.tif" resolves to {base}/realdata/B04.tif`},
			allow: "{base}/realdata", items: []string{"inside"}},
		{name: "ftp", href: "ftp://h/a.tif",
			want:  []string{`item inside asset red: href "ftp://h/a.tif": scheme ftp is not http, https, s3, gs or az (add a prefix to source.allow_hrefs to read it)`},
			allow: "ftp://h/", items: []string{"inside"}},
		{name: "child outside", href: "./B04.tif", child: true,
			want:  []string{`a link was refused and not read: href "{base}/other/catalog.json" is outside the catalog directory {base}/scene`},
			allow: "{base}/other", items: []string{"inside", "outside-item"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			sub := func(s string) string { return strings.ReplaceAll(s, "{base}", base) }
			writeFile(t, filepath.Join(base, "outside.tif"), []byte("outside"))
			writeFile(t, filepath.Join(base, "elsewhere", "x.tif"), []byte("elsewhere"))
			writeFile(t, filepath.Join(base, "realdata", "B04.tif"), []byte("real"))
			writeJSON(t, filepath.Join(base, "other", "catalog.json"), stacCatalog(stacLink("item", "./item.json")))
			writeJSON(t, filepath.Join(base, "other", "item.json"), stacItem("outside-item", "./B04.tif"))
			writeFile(t, filepath.Join(base, "other", "B04.tif"), []byte("other"))
			itemDir := filepath.Join(base, "scene", "s2", "2024", "a")
			writeJSON(t, filepath.Join(itemDir, "item.json"), stacItem("inside", sub(c.href)))
			writeFile(t, filepath.Join(itemDir, "B04.tif"), []byte("inside"))
			if err := os.Symlink(filepath.Join(base, "realdata", "B04.tif"), filepath.Join(itemDir, "link.tif")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../../../realdata", filepath.Join(itemDir, "data")); err != nil {
				t.Fatal(err)
			}
			links := []map[string]any{stacLink("item", "./s2/2024/a/item.json")}
			if c.child {
				links = append(links, stacLink("child", "../other/catalog.json"))
			}
			root := filepath.Join(base, "scene", "catalog.json")
			writeJSON(t, root, stacCatalog(links...))

			// A read sets the access time of a file whose access time is
			// older than its modification; check that this filesystem
			// does, so that an unchanged time proves nothing was read.
			old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
			outsideCatalog := filepath.Join(base, "other", "catalog.json")
			control := filepath.Join(base, "control.json")
			writeFile(t, control, []byte("{}"))
			for _, p := range []string{outsideCatalog, control} {
				if err := os.Chtimes(p, old, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			os.ReadFile(control)
			at, ok := accessTime(control)
			atimeWorks := ok && !at.Equal(old)

			items, err := Crawl(context.Background(), root, everywhere, HrefPolicy{Root: CatalogRoot(root)})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err == nil {
					t.Fatalf("no error; items %v", itemIDs(items))
				}
				if !errors.Is(err, ErrHrefRefused) {
					t.Errorf("error %v does not wrap ErrHrefRefused", err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), sub(w)) {
						t.Errorf("error %q lacks %q", err, sub(w))
					}
				}
				if items != nil {
					t.Errorf("items %v returned with the error", itemIDs(items))
				}
				if at, _ := accessTime(outsideCatalog); atimeWorks && !at.Equal(old) {
					t.Errorf("%s was read (access time %v)", outsideCatalog, at)
				}
				if !atimeWorks {
					t.Log("access times are not kept here: not checking that nothing outside was read")
				}
				items, err = Crawl(context.Background(), root, everywhere, HrefPolicy{Root: CatalogRoot(root), Allow: []string{sub(c.allow)}})
				if err != nil {
					t.Fatalf("allowed %s: %v", sub(c.allow), err)
				}
			}
			if got := strings.Join(itemIDs(items), ","); got != strings.Join(c.items, ",") {
				t.Errorf("items %s, want %s", got, strings.Join(c.items, ","))
			}
		})
	}
}

// TestCrawlDefaults: an empty policy Root gets the root's directory, and a
// catalog that links itself still ends.
func TestCrawlDefaults(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "catalog.json")
	writeJSON(t, root, stacCatalog(stacLink("child", "./catalog.json"), stacLink("child", "../"+filepath.Base(dir)+"/catalog.json"), stacLink("item", "item.json")))
	writeJSON(t, filepath.Join(dir, "item.json"), stacItem("a", "./B04.tif"))
	done := make(chan struct{})
	var items []Item
	var err error
	go func() {
		defer close(done)
		items, err = Crawl(context.Background(), root, everywhere, HrefPolicy{})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("crawl of a catalog that links itself does not end")
	}
	if err != nil || len(items) != 1 || items[0].Assets["red"].Href != filepath.Join(dir, "B04.tif") {
		t.Fatalf("items %+v, %v", items, err)
	}
	if got := CatalogRoot(root); got != dir {
		t.Errorf("CatalogRoot(%s) = %s", root, got)
	}
	if got := CatalogRoot("file://" + root); got != dir {
		t.Errorf("CatalogRoot(file://%s) = %s", root, got)
	}
	if got := CatalogRoot("https://example.com/stac/catalog.json"); got != "" {
		t.Errorf("CatalogRoot of a URL = %q", got)
	}
}

// TestCrawlRemoteLocalLink: a remote catalog has no local directory, so a
// file:// link in it is refused before it is read.
func TestCrawlRemoteLocalLink(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "item.json"), stacItem("local", "./B04.tif"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(stacCatalog(stacLink("item", "file://"+filepath.Join(dir, "item.json"))))
	}))
	defer srv.Close()
	_, err := Crawl(context.Background(), srv.URL+"/catalog.json", everywhere, HrefPolicy{})
	want := fmt.Sprintf(`href %q is a local path and the source (a STAC API or remote catalog) has no local directory (add a directory to source.allow_hrefs to read it)`, filepath.Join(dir, "item.json"))
	if err == nil || !errors.Is(err, ErrHrefRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one with %q", err, want)
	}
}

func TestHrefPolicyCheck(t *testing.T) {
	root := t.TempDir()
	wd, _ := os.Getwd()
	for _, c := range []struct {
		policy HrefPolicy
		href   string
		want   string // "" when allowed
	}{
		{HrefPolicy{Root: root}, filepath.Join(root, "a", "b.tif"), ""},
		{HrefPolicy{Root: root}, "file://" + filepath.Join(root, "b.tif"), ""},
		{HrefPolicy{Root: root}, filepath.Join(root, "a", "..", "..", "b.tif"), "is outside the catalog directory " + root},
		{HrefPolicy{Root: root}, "file://h/b.tif", "a file URL on host h is not a local file"},
		{HrefPolicy{Root: root}, "relative.tif", "is outside the catalog directory"},
		{HrefPolicy{Root: wd}, "relative.tif", ""},
		{HrefPolicy{}, "/etc/passwd", `href "/etc/passwd" is a local path and the source (a STAC API or remote catalog) has no local directory`},
		{HrefPolicy{}, "file:///etc/passwd", "has no local directory"},
		{HrefPolicy{Allow: []string{"/etc"}}, "/etc/passwd", ""},
		{HrefPolicy{Allow: []string{"/etc"}}, "/etc/../root/x", "has no local directory"},
		{HrefPolicy{}, "https://example.com/a.tif", ""},
		{HrefPolicy{}, "HTTP://example.com/a.tif", ""},
		{HrefPolicy{}, "s3://bucket/a.tif", ""},
		{HrefPolicy{}, "gs://bucket/a.tif", ""},
		{HrefPolicy{}, "az://container/a.tif", ""},
		{HrefPolicy{}, "ftp://h/a.tif", `href "ftp://h/a.tif": scheme ftp is not http, https, s3, gs or az (add a prefix to source.allow_hrefs to read it)`},
		{HrefPolicy{Allow: []string{"ftp://"}}, "ftp://h/a.tif", ""},
		{HrefPolicy{Allow: []string{"ftp://h/data/"}}, "ftp://h/data/../etc/x", `has a ".." segment`},
		{HrefPolicy{Allow: []string{"ftp://h/data/"}}, "ftp://h/data/%2e%2e/etc/x", `has a ".." segment`},
		{HrefPolicy{Root: root}, "/vsis3/bucket/a.tif", "is a GDAL virtual file system path"},
		{HrefPolicy{Allow: []string{"/vsis3/"}}, "/vsis3/bucket/a.tif", ""},
		{HrefPolicy{Allow: []string{"/vsis3/"}}, "/vsicurl/http://h/a.tif", "is a GDAL virtual file system path"},
		{HrefPolicy{Root: root}, "", "is empty"},
	} {
		err := c.policy.Check(c.href)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v Check(%q): %v", c.policy, c.href, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrHrefRefused) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v Check(%q) = %v, want an ErrHrefRefused with %q", c.policy, c.href, err, c.want)
		}
	}
}

// apiServer answers every request with page(n, r), n counting from 1.
func apiServer(t *testing.T, page func(n int32, r *http.Request) any) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(page(n.Add(1), r))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func featurePage(next map[string]any, items ...map[string]any) map[string]any {
	p := map[string]any{"type": "FeatureCollection", "features": items}
	if next != nil {
		p["links"] = []any{next}
	}
	return p
}

func TestSearchPolicy(t *testing.T) {
	srv, _ := apiServer(t, func(int32, *http.Request) any {
		return featurePage(nil, stacItem("a", "/etc/passwd"))
	})
	c := NewClient(nil)
	_, err := c.Search(context.Background(), srv.URL, everywhere)
	want := `item a asset red: href "/etc/passwd" is a local path and the source (a STAC API or remote catalog) has no local directory (add a directory to source.allow_hrefs to read it)`
	if err == nil || !errors.Is(err, ErrHrefRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one with %q", err, want)
	}
	c.Policy.Allow = []string{"/etc"}
	items, err := c.Search(context.Background(), srv.URL, everywhere)
	if err != nil || len(items) != 1 || items[0].Assets["red"].Href != "/etc/passwd" {
		t.Fatalf("allowed: %+v, %v", items, err)
	}
}

// TestSearchPagingLoops: next links that ask again for a page already read
// stop the search after a few requests, naming the href and the page.
func TestSearchPagingLoops(t *testing.T) {
	cases := []struct {
		name string
		next func(n int32, r *http.Request) map[string]any
		want []string
	}{
		{"GET same href", func(_ int32, r *http.Request) map[string]any {
			return map[string]any{"rel": "next", "href": "http://" + r.Host + "/search", "method": "GET"}
		}, []string{"page 3 would repeat page 2 (GET http://{host}/search)", "next links loop"}},
		{"POST merge same body", func(_ int32, r *http.Request) map[string]any {
			return map[string]any{"rel": "next", "href": "http://" + r.Host + "/search", "method": "POST", "merge": true, "body": map[string]any{"next": "abc"}}
		}, []string{"page 3 would repeat page 2 (POST http://{host}/search with the same body)"}},
		{"POST same body as page 1", func(_ int32, r *http.Request) map[string]any {
			return map[string]any{"rel": "next", "href": "http://" + r.Host + "/search", "method": "POST", "merge": true, "body": map[string]any{}}
		}, []string{"page 2 would repeat page 1 (POST http://{host}/search with the same body)"}},
		{"token repeats", func(n int32, r *http.Request) map[string]any {
			return map[string]any{"rel": "next", "href": fmt.Sprintf("http://%s/search?token=abc&n=%d", r.Host, n), "method": "GET"}
		}, []string{`page 3 (GET http://{host}/search?token=abc&n=2) repeats the paging token "abc" of page 2`}},
		{"token in body repeats", func(n int32, r *http.Request) map[string]any {
			return map[string]any{"rel": "next", "href": "http://" + r.Host + "/search", "method": "POST", "merge": true, "body": map[string]any{"token": "abc", "n": n}}
		}, []string{`repeats the paging token "abc" of page 2`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, n := apiServer(t, func(k int32, r *http.Request) any {
				return featurePage(c.next(k, r), stacItem(fmt.Sprint("item", k), "./B04.tif"))
			})
			_, err := NewClient(nil).Search(context.Background(), srv.URL, everywhere)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				w = strings.ReplaceAll(w, "{host}", strings.TrimPrefix(srv.URL, "http://"))
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n.Load() > 3 {
				t.Errorf("%d requests", n.Load())
			}
		})
	}
}

func TestSearchCaps(t *testing.T) {
	// An API that never runs out of pages, two new items each.
	srv, n := apiServer(t, func(k int32, r *http.Request) any {
		next := map[string]any{"rel": "next", "href": fmt.Sprintf("http://%s/search?page=%d", r.Host, k+1)}
		return featurePage(next, stacItem(fmt.Sprint("a", k), "./B04.tif"), stacItem(fmt.Sprint("b", k), "./B04.tif"))
	})
	for _, c := range []struct {
		client   Client
		want     string
		requests int32
	}{
		{Client{MaxPages: 3}, "more than 3 pages (source.max_pages); narrow the area or dates, or raise source.max_pages", 3},
		{Client{MaxItems: 5}, "more than 5 items (source.max_items); narrow the area or dates, or raise source.max_items", 3},
		{Client{}, "more than 1000 pages (source.max_pages)", 1000},
	} {
		n.Store(0)
		_, err := c.client.Search(context.Background(), srv.URL, everywhere)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), srv.URL+"/search") {
			t.Errorf("%+v: error %v, want %q", c.client, err, c.want)
		}
		if n.Load() != c.requests {
			t.Errorf("%+v: %d requests, want %d", c.client, n.Load(), c.requests)
		}
	}
}

// TestSearchTimeouts: a server that never answers costs the per-request
// timeout per attempt, or the search deadline, whichever comes first.
func TestSearchTimeouts(t *testing.T) {
	var n atomic.Int32
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		// The server notices a closed connection (and cancels the
		// context) only once the request body has been read.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer stall.Close()
	caller := &http.Client{}
	for _, c := range []struct {
		name   string
		client *Client
		want   []string
		within time.Duration
	}{
		{"deadline", &Client{HTTP: caller, Retries: 4, Backoff: 10 * time.Millisecond, Timeout: 200 * time.Millisecond, SearchTimeout: 500 * time.Millisecond},
			[]string{"POST " + stall.URL + "/search", "source.search_timeout (500ms)", "deadline exceeded", "the last failure: no complete response within source.request_timeout (200ms)"}, time.Second},
		{"attempts", &Client{HTTP: caller, Retries: 1, Backoff: time.Millisecond, Timeout: 100 * time.Millisecond},
			[]string{"POST " + stall.URL + "/search", "no complete response within source.request_timeout (100ms)", "deadline exceeded", "gave up after 2 attempts"}, 700 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.client.Search(context.Background(), stall.URL, everywhere)
			took := time.Since(start)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if took > c.within {
				t.Errorf("gave up after %v, want within %v", took, c.within)
			}
		})
	}
	if caller.Timeout != 0 {
		t.Errorf("the caller's http.Client was given a timeout of %v", caller.Timeout)
	}
	// Cancelling the caller's context ends the search at once, not at the
	// end of the attempt.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := (&Client{Retries: 3}).Search(ctx, stall.URL, everywhere)
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("cancelled search: %v after %v", err, time.Since(start))
	}
}

// TestSearchRetryStatuses: 5xx and 429 are retried, other 4xx are not. The
// clients are zero values but for Retries: zero fields mean the defaults.
func TestSearchRetryStatuses(t *testing.T) {
	for _, c := range []struct {
		name     string
		statuses []int // the answers before a good page
		header   string
		retries  int
		want     string // "" for success
		requests int32
	}{
		{"5xx then success", []int{503, 502}, "", 2, "", 3},
		{"429 then success", []int{429}, "", 1, "", 2},
		{"429 Retry-After", []int{429}, "0", 1, "", 2},
		{"404 not retried", []int{404}, "", 3, "HTTP 404: nope", 1},
		{"5xx exhausted", []int{500, 500, 500}, "", 1, "HTTP 500 (gave up after 2 attempts)", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				k := int(n.Add(1))
				if k <= len(c.statuses) {
					if c.header != "" {
						w.Header().Set("Retry-After", c.header)
					}
					w.WriteHeader(c.statuses[k-1])
					io.WriteString(w, "nope")
					return
				}
				json.NewEncoder(w).Encode(featurePage(nil, stacItem("a", "./B04.tif")))
			}))
			defer srv.Close()
			var logs bytes.Buffer
			client := &Client{Retries: c.retries, Log: slog.New(slog.NewTextHandler(&logs, nil))}
			if c.header != "" {
				// Retry-After: 0 must win over a backoff longer than the test.
				client.Backoff = time.Minute
				client.SearchTimeout = 5 * time.Second
			}
			items, err := client.Search(context.Background(), srv.URL, everywhere)
			if c.want == "" {
				if err != nil || len(items) != 1 {
					t.Fatalf("%d items, %v", len(items), err)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "POST "+srv.URL+"/search") {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
			if n.Load() != c.requests {
				t.Errorf("%d requests, want %d", n.Load(), c.requests)
			}
			if retried := strings.Count(logs.String(), "retrying STAC request"); retried != int(c.requests)-1 {
				t.Errorf("%d retries logged for %d requests:\n%s", retried, c.requests, logs.String())
			}
			if c.requests > 1 && !strings.Contains(logs.String(), "attempt=2") {
				t.Errorf("log lacks the attempt:\n%s", logs.String())
			}
		})
	}
}

// TestCrawlFindsEveryItem crawls a catalog of 5 collections of 20 items on
// one and on all processors: go-stac's own queue strands the linked
// documents when its workers are all busy, and with one it finds nothing.
func TestCrawlFindsEveryItem(t *testing.T) {
	dir := t.TempDir()
	var children []map[string]any
	for c := range 5 {
		var links []map[string]any
		for i := range 20 {
			id := fmt.Sprintf("c%d-i%02d", c, i)
			writeJSON(t, filepath.Join(dir, fmt.Sprint("c", c), id, id+".json"), stacItem(id, "./B04.tif"))
			links = append(links, stacLink("item", "./"+id+"/"+id+".json"))
		}
		writeJSON(t, filepath.Join(dir, fmt.Sprint("c", c), "catalog.json"), stacCatalog(links...))
		children = append(children, stacLink("child", fmt.Sprintf("./c%d/catalog.json", c)))
	}
	root := filepath.Join(dir, "catalog.json")
	writeJSON(t, root, stacCatalog(children...))
	for _, procs := range []int{1, runtime.GOMAXPROCS(0)} {
		prev := runtime.GOMAXPROCS(procs)
		items, err := Crawl(context.Background(), root, everywhere, HrefPolicy{Root: dir})
		runtime.GOMAXPROCS(prev)
		if err != nil || len(items) != 100 || items[0].ID != "c0-i00" || items[99].ID != "c4-i19" {
			t.Errorf("GOMAXPROCS %d: %d items, %v", procs, len(items), err)
		}
	}
	// A cancelled context ends the crawl with its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Crawl(ctx, root, everywhere, HrefPolicy{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled crawl: %v", err)
	}
}

// TestCrawlTimeout crawls a catalog over HTTP whose documents each take
// 150 ms: with a 250 ms limit per document, a crawl longer than the limit
// in all (the catalog, then its items) succeeds, as the limit is per
// document; one whose second item never arrives fails within the limit
// and a little more, naming that item.
func TestCrawlTimeout(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/catalog.json":
			var links []map[string]any
			for i := range 8 {
				links = append(links, stacLink("item", fmt.Sprintf("./item%d.json", i)))
			}
			time.Sleep(150 * time.Millisecond)
			json.NewEncoder(w).Encode(stacCatalog(links...))
		case "/silent/catalog.json":
			json.NewEncoder(w).Encode(stacCatalog(stacLink("item", "./item0.json"), stacLink("item", "./never.json")))
		case "/silent/never.json":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			time.Sleep(150 * time.Millisecond)
			name := strings.TrimSuffix(filepath.Base(r.URL.Path), ".json")
			json.NewEncoder(w).Encode(stacItem(name, "https://example.com/"+name+".tif"))
		}
	}))
	defer srv.Close()
	defer close(stop)
	items, err := CrawlTimeout(context.Background(), srv.URL+"/catalog.json", everywhere, HrefPolicy{}, 250*time.Millisecond)
	if err != nil || len(items) != 8 {
		t.Fatalf("a slow but answering catalog: %d items, %v", len(items), err)
	}
	start := time.Now()
	_, err = CrawlTimeout(context.Background(), srv.URL+"/silent/catalog.json", everywhere, HrefPolicy{}, 250*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/silent/never.json") || !strings.Contains(err.Error(), "did not arrive within 250ms") {
		t.Fatalf("a document that never arrives: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the crawl took %v to give up on a 250 ms limit", took)
	}
}
