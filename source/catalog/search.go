package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planetlabs/go-stac/crawler"

	"github.com/lulc/lulc/internal/netwait"
)

// Query selects items.
type Query struct {
	Collections []string
	BBox        [4]float64      // lon/lat; used when Intersects is nil
	Intersects  json.RawMessage // GeoJSON geometry, optional
	Start, End  time.Time
	MaxCloud    *float64 // eo:cloud_cover strictly below, when set
	Limit       int      // page size for APIs
	// CloudFilter says how an API is asked to filter clouds: "query" (the
	// query extension, Earth Search), "cql2" (a CQL2-JSON filter) or "none"
	// (filter client-side only).
	CloudFilter string
}

// Match applies the query to an item client-side. Static catalogs are
// filtered this way, and API results are checked again.
func (q Query) Match(it Item) bool {
	if len(q.Collections) > 0 && !slices.Contains(q.Collections, it.Collection) {
		return false
	}
	if !it.Intersects(q.BBox) {
		return false
	}
	if !it.Datetime.IsZero() && (!q.Start.IsZero() && it.Datetime.Before(q.Start) || !q.End.IsZero() && it.Datetime.After(q.End)) {
		return false
	}
	if q.MaxCloud != nil && it.CloudCover != nil && *it.CloudCover >= *q.MaxCloud {
		return false
	}
	return true
}

// Crawl walks a static catalog (a path or URL of catalog.json or
// collection.json) with go-stac's crawler and returns the matching items,
// sorted by collection, datetime and id.
//
// policy decides which documents are read and which asset hrefs the items
// may carry; a policy with an empty Root gets the root's directory when the
// catalog is local (CatalogRoot), and the root document itself is always
// read. A catalog, collection or item link that the policy refuses is never
// read, and once the crawl ends it fails it with an error naming the first
// such link; a refused asset href of a matching item fails it too. Both wrap
// ErrHrefRefused. A document linked more than once is read once, so links
// that form a cycle cannot keep the crawl going. A document over HTTP must
// arrive within DefaultTimeout (see CrawlTimeout).
func Crawl(ctx context.Context, root string, q Query, policy HrefPolicy) ([]Item, error) {
	return CrawlTimeout(ctx, root, q, policy, DefaultTimeout)
}

// CrawlTimeout is Crawl with a limit on each document read over HTTP:
// one that has not arrived timeout after the crawler asked for it ends
// the crawl with an error naming it. go-stac's crawler reads URLs with a
// client that has no timeout and cannot be given one, so the crawl runs
// on its own goroutine and is left behind, still waiting, when a document
// does not arrive or ctx ends: the command fails and exits regardless.
// Waits show in the network log (netwait).
func CrawlTimeout(ctx context.Context, root string, q Query, policy HrefPolicy, timeout time.Duration) ([]Item, error) {
	c, err := CrawlAll(ctx, root, policy, timeout)
	if err != nil {
		return nil, err
	}
	return c.Find(q)
}

// Crawled is every item of a static catalog, read in one crawl, for the
// queries of one ingest (the scenes, their labels, each layer) to pick
// from: the catalog's documents are read once, not once a query.
type Crawled struct {
	root   string
	policy HrefPolicy // with its Root
	items  []Item
}

// Find returns the crawled items q matches, sorted by collection,
// datetime and id; an asset href of one of them that the crawl's policy
// refuses fails it.
func (c *Crawled) Find(q Query) ([]Item, error) {
	var items []Item
	for _, it := range c.items {
		if q.Match(it) {
			items = append(items, it)
		}
	}
	sortItems(items)
	for _, it := range items {
		if err := checkAssets(c.policy, it); err != nil {
			return nil, fmt.Errorf("crawl %s: %w", c.root, err)
		}
	}
	return items, nil
}

// CrawlAll walks a static catalog as CrawlTimeout does and keeps every
// item it reads, for Find.
func CrawlAll(ctx context.Context, root string, policy HrefPolicy, timeout time.Duration) (*Crawled, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if policy.Root == "" {
		policy.Root = CatalogRoot(root)
	}
	rootKey := locationKey(crawlLocation(root))
	var (
		mu       sync.Mutex
		items    []Item
		seen     = map[string]bool{}
		refused  error
		nRefused int
	)
	// Remote documents asked for and not yet visited, by key: when each
	// was asked for and the end of its network wait.
	type asked struct {
		loc   string
		since time.Time
		end   func()
	}
	pending := map[string]asked{}
	// The crawler calls filter before it reads a location, from several
	// goroutines: it is where a refused link is stopped.
	filter := func(loc string) bool {
		if ctx.Err() != nil {
			// Read nothing more: the crawl ends with the context's error.
			return false
		}
		key := locationKey(loc)
		mu.Lock()
		defer mu.Unlock()
		if seen[key] {
			return false
		}
		seen[key] = true
		if key != rootKey {
			if err := policy.Check(loc); err != nil {
				if refused == nil {
					refused = err
				}
				nRefused++
				return false
			}
		}
		if netwait.Remote(loc) {
			pending[key] = asked{loc: loc, since: time.Now(), end: netwait.Begin("GET " + loc)}
		}
		return true
	}
	visit := func(r crawler.Resource, info *crawler.ResourceInfo) error {
		mu.Lock()
		if a, ok := pending[locationKey(info.Location)]; ok {
			a.end()
			delete(pending, locationKey(info.Location))
		}
		mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.Type() != crawler.Item {
			return nil
		}
		body, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("item %s: %w", info.Location, err)
		}
		it, err := ParseItem(body, info.Location)
		if err != nil {
			return err
		}
		mu.Lock()
		items = append(items, it)
		mu.Unlock()
		return nil
	}
	opts := &crawler.Options{Filter: filter, Queue: newCrawlQueue(ctx, runtime.GOMAXPROCS(0))}
	done := make(chan error, 1)
	go func() { done <- crawler.Crawl(root, visit, opts) }()
	// late names the oldest document asked for longer than timeout ago.
	late := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		var oldest *asked
		for _, a := range pending {
			if time.Since(a.since) > timeout && (oldest == nil || a.since.Before(oldest.since)) {
				oldest = &a
			}
		}
		if oldest == nil {
			return "", false
		}
		return oldest.loc, true
	}
	tick := time.NewTicker(max(timeout/8, 10*time.Millisecond))
	defer tick.Stop()
	defer func() {
		mu.Lock()
		for _, a := range pending {
			a.end()
		}
		mu.Unlock()
	}()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("crawl %s: %w", root, err)
			}
			break wait
		case <-ctx.Done():
			return nil, fmt.Errorf("crawl %s: %w", root, ctx.Err())
		case <-tick.C:
			if loc, ok := late(); ok {
				return nil, fmt.Errorf("crawl %s: %s did not arrive within %s (source.request_timeout)", root, loc, timeout)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("crawl %s: %w", root, err)
	}
	if refused != nil {
		what := "a link was refused and not read"
		if nRefused > 1 {
			what = fmt.Sprintf("%d links were refused and not read, the first", nRefused)
		}
		return nil, fmt.Errorf("crawl %s: %s: %w", root, what, refused)
	}
	return &Crawled{root: root, policy: policy, items: items}, nil
}

// crawlLocation names root the way the crawler passes it to its filter: an
// absolute path for a local catalog, else the parsed URL.
func crawlLocation(root string) string {
	switch schemeOf(root) {
	case "":
		if abs, err := filepath.Abs(root); err == nil {
			return abs
		}
	case "file":
		if u, err := url.Parse(root); err == nil {
			return filepath.FromSlash(u.Path)
		}
	default:
		if u, err := url.Parse(root); err == nil {
			return u.String()
		}
	}
	return root
}

// locationKey identifies a crawled document: local paths by the file they
// resolve to, so that "./a/../catalog.json" and a symlink to it are one.
func locationKey(loc string) string {
	if schemeOf(loc) != "" {
		return loc
	}
	abs, err := absPath(loc)
	if err != nil {
		return loc
	}
	return realPath(abs)
}

// checkAssets applies policy to every asset href of it, in key order so the
// error names the same asset every run.
func checkAssets(policy HrefPolicy, it Item) error {
	for _, k := range slices.Sorted(maps.Keys(it.Assets)) {
		href := it.Assets[k].Href
		if href == "" {
			// Nothing to read: Item.Asset skips empty hrefs.
			continue
		}
		if err := policy.Check(href); err != nil {
			return fmt.Errorf("item %s asset %s: %w", it.ID, k, err)
		}
	}
	return nil
}

// sortItems orders items by collection, datetime and id, and items equal
// in all three (a static catalog may hold two items of one id, as a
// synthetic WorldCover cell made for each of two tiles) by where they were
// read from: the crawl finds them in no fixed order, and where their
// rasters overlap the first wins, so the order must not depend on it.
func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := strings.Compare(a.Collection, b.Collection); c != 0 {
			return c
		}
		if c := a.Datetime.Compare(b.Datetime); c != 0 {
			return c
		}
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Location, b.Location)
	})
}

// Defaults of the Client fields whose zero value means the default.
const (
	DefaultTimeout       = 60 * time.Second // Client.Timeout, per request
	DefaultSearchTimeout = 5 * time.Minute  // Client.SearchTimeout, per Search call
	DefaultMaxPages      = 1000             // Client.MaxPages
	DefaultMaxItems      = 100000           // Client.MaxItems
)

// Client searches STAC APIs over HTTP, retrying transient failures. Zero
// Timeout, SearchTimeout, MaxPages and MaxItems mean the defaults above, so
// config values can be passed straight through; Retries and Backoff are
// taken as they are (0 retries is one attempt).
type Client struct {
	// HTTP sends the requests; nil means a plain http.Client. It is never
	// modified: the per-request timeout is set on a copy.
	HTTP    *http.Client
	Retries int           // extra attempts after a 5xx, 429 or network error
	Backoff time.Duration // first wait; doubles each retry (a 429's or 503's Retry-After wins)
	// Timeout bounds one attempt, reading the response included
	// (source.request_timeout).
	Timeout time.Duration
	// SearchTimeout bounds one Search call, all pages and retries
	// included (source.search_timeout).
	SearchTimeout time.Duration
	MaxPages      int // pages one Search may read (source.max_pages)
	MaxItems      int // items one Search may return (source.max_items)
	// Policy decides which asset hrefs of the items found may be read. Its
	// Root is "" for an API, so local hrefs are refused unless allowed.
	Policy HrefPolicy
	Log    *slog.Logger
}

// NewClient returns a client with lulc's defaults: 4 retries from 500 ms,
// 60 s per request, 5 minutes, 1000 pages and 100000 items per search.
func NewClient(log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{HTTP: &http.Client{}, Retries: 4, Backoff: 500 * time.Millisecond, Timeout: DefaultTimeout,
		SearchTimeout: DefaultSearchTimeout, MaxPages: DefaultMaxPages, MaxItems: DefaultMaxItems, Log: log}
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

type searchPage struct {
	Type     string            `json:"type"`
	Features []json.RawMessage `json:"features"`
	Links    []struct {
		Rel    string         `json:"rel"`
		Href   string         `json:"href"`
		Method string         `json:"method"`
		Body   map[string]any `json:"body"`
		Merge  bool           `json:"merge"`
	} `json:"links"`
}

// Search runs an item search against a STAC API root (POST {api}/search),
// following next links until the last page. It stops with an error when a
// next link repeats an earlier request or paging token, past MaxPages pages
// or MaxItems items, past SearchTimeout, and when an item found has an
// asset href that Policy refuses (wrapping ErrHrefRefused).
func (c *Client) Search(ctx context.Context, api string, q Query) ([]Item, error) {
	body := map[string]any{"collections": q.Collections, "limit": max(q.Limit, 1)}
	if q.Intersects != nil {
		body["intersects"] = q.Intersects
	} else {
		body["bbox"] = q.BBox[:]
	}
	if !q.Start.IsZero() || !q.End.IsZero() {
		body["datetime"] = interval(q.Start) + "/" + interval(q.End)
	}
	if q.MaxCloud != nil {
		switch q.CloudFilter {
		case "", "query":
			body["query"] = map[string]any{"eo:cloud_cover": map[string]any{"lt": *q.MaxCloud}}
		case "cql2":
			body["filter-lang"] = "cql2-json"
			body["filter"] = map[string]any{"op": "<", "args": []any{map[string]any{"property": "eo:cloud_cover"}, *q.MaxCloud}}
		case "none":
		default:
			return nil, fmt.Errorf("cloud filter %q is not query, cql2 or none", q.CloudFilter)
		}
	}
	timeout := orDefault(c.SearchTimeout, DefaultSearchTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("the search took longer than source.search_timeout (%s) allows; narrow the area or dates, or raise it: %w", timeout, context.DeadlineExceeded))
	defer cancel()
	maxPages, maxItems := orDefault(c.MaxPages, DefaultMaxPages), orDefault(c.MaxItems, DefaultMaxItems)
	search := strings.TrimSuffix(api, "/") + "/search"
	href := search
	method := http.MethodPost
	var items []Item
	seen := map[string]bool{}
	requests := map[string]int{} // method, href and body → the page that sent them
	tokens := map[string]int{}   // paging token → the page that sent it
	for page := 1; ; page++ {
		var payload []byte
		if method == http.MethodPost && body != nil {
			var err error
			if payload, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("encode request to %s: %w", href, err)
			}
		}
		// A next link that asks for a page already read would make the loop
		// run forever (or until MaxPages): stop at the first repeat.
		key := method + " " + href + "\n" + string(payload)
		if p, ok := requests[key]; ok {
			same := ""
			if payload != nil {
				same = " with the same body"
			}
			return nil, fmt.Errorf("stac search %s: page %d would repeat page %d (%s %s%s); the API's next links loop", search, page, p, method, href, same)
		}
		requests[key] = page
		for _, tok := range pagingTokens(href, body) {
			if p, ok := tokens[tok]; ok && p != page {
				return nil, fmt.Errorf("stac search %s: page %d (%s %s) repeats the paging token %q of page %d; the API's next links loop", search, page, method, href, tok, p)
			}
			tokens[tok] = page
		}
		if page > maxPages {
			return nil, fmt.Errorf("stac search %s: more than %d pages (source.max_pages); narrow the area or dates, or raise source.max_pages", search, maxPages)
		}
		var pg searchPage
		if err := c.do(ctx, method, href, payload, &pg); err != nil {
			return nil, err
		}
		for _, f := range pg.Features {
			it, err := ParseItem(f, href)
			if err != nil {
				return nil, err
			}
			if !seen[it.ID] && q.Match(it) {
				if err := checkAssets(c.Policy, it); err != nil {
					return nil, fmt.Errorf("stac search %s: %w", search, err)
				}
				items = append(items, it)
			}
			seen[it.ID] = true
		}
		if len(items) > maxItems {
			return nil, fmt.Errorf("stac search %s: more than %d items (source.max_items); narrow the area or dates, or raise source.max_items", search, maxItems)
		}
		c.logger().Debug("stac search page", "href", href, "page", page, "features", len(pg.Features), "items", len(items))
		next := -1
		for i, l := range pg.Links {
			if l.Rel == "next" {
				next = i
			}
		}
		if next < 0 || len(pg.Features) == 0 {
			break
		}
		l := pg.Links[next]
		href = resolve(href, l.Href)
		method = strings.ToUpper(l.Method)
		if method == "" {
			method = http.MethodGet
		}
		if method == http.MethodPost {
			switch {
			case l.Body == nil:
			case l.Merge:
				merged := maps.Clone(body)
				maps.Copy(merged, l.Body)
				body = merged
			default:
				body = l.Body
			}
		} else {
			body = nil
		}
	}
	sortItems(items)
	return items, nil
}

// pagingTokens returns the paging tokens of a request: the token and next
// query parameters of href and keys of a POST body, as STAC APIs carry them.
func pagingTokens(href string, body map[string]any) []string {
	var toks []string
	if u, err := url.Parse(href); err == nil {
		qv := u.Query()
		for _, k := range []string{"token", "next"} {
			for _, v := range qv[k] {
				if v != "" {
					toks = append(toks, v)
				}
			}
		}
	}
	for _, k := range []string{"token", "next"} {
		v, ok := body[k]
		if !ok || v == nil {
			continue
		}
		s, isString := v.(string)
		if !isString {
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			s = string(b)
		}
		if s != "" {
			toks = append(toks, s)
		}
	}
	return toks
}

func interval(t time.Time) string {
	if t.IsZero() {
		return ".."
	}
	return t.UTC().Format(time.RFC3339)
}

func (c *Client) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}
