package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planetlabs/go-stac/crawler"
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
func Crawl(ctx context.Context, root string, q Query) ([]Item, error) {
	var mu sync.Mutex
	var items []Item
	visit := func(r crawler.Resource, info *crawler.ResourceInfo) error {
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
		if q.Match(it) {
			mu.Lock()
			items = append(items, it)
			mu.Unlock()
		}
		return nil
	}
	if err := crawler.Crawl(root, visit); err != nil {
		return nil, fmt.Errorf("crawl %s: %w", root, err)
	}
	sortItems(items)
	return items, nil
}

func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := strings.Compare(a.Collection, b.Collection); c != 0 {
			return c
		}
		if c := a.Datetime.Compare(b.Datetime); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Client searches STAC APIs over HTTP, retrying transient failures.
type Client struct {
	HTTP    *http.Client
	Retries int           // extra attempts after a 5xx, 429 or network error
	Backoff time.Duration // first wait; doubles each retry
	Timeout time.Duration // per request
	Log     *slog.Logger
}

// NewClient returns a client with lulc's defaults: 4 retries from 500 ms,
// 60 s per request.
func NewClient(log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{HTTP: &http.Client{}, Retries: 4, Backoff: 500 * time.Millisecond, Timeout: 60 * time.Second, Log: log}
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
// following next links until the last page.
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
	href := strings.TrimSuffix(api, "/") + "/search"
	method := http.MethodPost
	var items []Item
	seen := map[string]bool{}
	for page := 1; ; page++ {
		var pg searchPage
		if err := c.do(ctx, method, href, body, &pg); err != nil {
			return nil, err
		}
		for _, f := range pg.Features {
			it, err := ParseItem(f, href)
			if err != nil {
				return nil, err
			}
			if !seen[it.ID] && q.Match(it) {
				items = append(items, it)
			}
			seen[it.ID] = true
		}
		c.Log.Debug("stac search page", "href", href, "page", page, "features", len(pg.Features), "items", len(items))
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
		href = l.Href
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

func interval(t time.Time) string {
	if t.IsZero() {
		return ".."
	}
	return t.UTC().Format(time.RFC3339)
}

// do sends one request with retries and decodes a JSON response into out.
func (c *Client) do(ctx context.Context, method, href string, body any, out any) error {
	var payload []byte
	if body != nil && method == http.MethodPost {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode request to %s: %w", href, err)
		}
	}
	wait := c.Backoff
	var last error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			c.Log.Warn("retrying STAC request", "href", href, "attempt", attempt+1, "after", wait, "error", last)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			wait *= 2
		}
		retry, err := c.once(ctx, method, href, payload, out)
		if err == nil {
			return nil
		}
		if !retry || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return fmt.Errorf("%w (gave up after %d attempts)", last, c.Retries+1)
}

func (c *Client) once(ctx context.Context, method, href string, payload []byte, out any) (retry bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(rctx, method, href, rd)
	if err != nil {
		return false, fmt.Errorf("request %s: %w", href, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/geo+json, application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return false, ctx.Err()
		}
		return true, fmt.Errorf("%s %s: %w", method, href, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return true, fmt.Errorf("%s %s: read response: %w", method, href, err)
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return true, fmt.Errorf("%s %s: HTTP %d", method, href, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := strings.TrimSpace(string(data[:min(len(data), 200)]))
		return false, fmt.Errorf("%s %s: HTTP %d: %s", method, href, resp.StatusCode, snippet)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("%s %s: decode response: %w", method, href, err)
	}
	return false, nil
}
