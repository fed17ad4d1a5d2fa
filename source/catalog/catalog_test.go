package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/lulc/lulc/geo/landcover"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const shared = "../../../shared/data"

func readShared(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shared, rel))
	if err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	return b
}

func TestParseEarthSearchItem(t *testing.T) {
	body := readShared(t, "earthsearch-s2-l2a-29RKH-2020-02-19/S2A_29RKH_20200219_0_L2A.json")
	it, err := ParseItem(body, "/data/item.json")
	if err != nil {
		t.Fatal(err)
	}
	if it.Tile != "29RKH" || it.EPSG != 32629 || it.Collection != "" && it.Collection != "sentinel-2-l2a" {
		t.Errorf("tile %q epsg %d collection %q", it.Tile, it.EPSG, it.Collection)
	}
	if it.Datetime != time.Date(2020, 2, 19, 11, 34, 25, 405000000, time.UTC) || it.CloudCover == nil || *it.CloudCover != 4.051854 {
		t.Errorf("datetime %v cloud %v", it.Datetime, it.CloudCover)
	}
	red, err := it.Asset("B04", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(red.Href, "/B04.tif") || red.Shape[0] != 10980 || red.Transform[2] != 199980 {
		t.Errorf("red asset %+v", red)
	}
	// Baseline 02.14 declares scale 0.0001 and offset 0.
	if s, o := it.ScaleOffset(red); s != 0.0001 || o != 0 {
		t.Errorf("scale/offset %g %g", s, o)
	}
	if _, err := it.Asset("B05", map[string]string{"B05": "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("override to a missing key: %v", err)
	}
}

func TestParseSearchResponses(t *testing.T) {
	cases := []struct {
		file  string
		n     int
		tile  string
		band  string
		base  string
		offs  float64
		first string
	}{
		{"stac-responses/pystac-client/earthsearch_v1_search_s2_filter_page.json", 10, "24MVV", "red", "", 0, ""},
		{"stac-responses/pystac-client/planetarycomputer_search_sentinel-2-l2a_33items.json", 33, "60VUK", "B04", "02.12", 0, ""},
	}
	for _, c := range cases {
		var page searchPage
		if err := json.Unmarshal(readShared(t, c.file), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Features) != c.n {
			t.Fatalf("%s: %d features", c.file, len(page.Features))
		}
		it, err := ParseItem(page.Features[0], "https://example.com/search")
		if err != nil {
			t.Fatal(err)
		}
		if it.Tile != c.tile {
			t.Errorf("%s: tile %q, want %q", c.file, it.Tile, c.tile)
		}
		a, err := it.Asset("B04", nil)
		if err != nil || !strings.HasPrefix(a.Href, "https://") {
			t.Errorf("%s: red asset %+v %v", c.file, a, err)
		}
		if _, ok := it.Assets[c.band]; !ok {
			t.Errorf("%s: no asset key %s", c.file, c.band)
		}
		if _, err := it.Asset("SCL", nil); err != nil {
			t.Errorf("%s: %v", c.file, err)
		}
	}
	// Planetary Computer declares no raster:bands: the baseline decides.
	var pc searchPage
	json.Unmarshal(readShared(t, cases[1].file), &pc)
	for _, f := range pc.Features {
		it, _ := ParseItem(f, "x")
		a, _ := it.Asset("B04", nil)
		_, off := it.ScaleOffset(a)
		if want := map[bool]float64{true: -0.1, false: 0}[it.Baseline >= "04.00"]; off != want {
			t.Errorf("%s: baseline %s offset %g", it.ID, it.Baseline, off)
		}
	}
}

func TestSigner(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/token/sentinel-2-l2a" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"msft:expiry":"2030-01-01T00:00:00Z","token":"sv=1&sig=abc"}`)
	}))
	defer srv.Close()
	items := []Item{{ID: "a", Collection: "sentinel-2-l2a", Assets: map[string]Asset{
		"B04": {Href: "https://sentinel2l2a01.blob.core.windows.net/x/B04.tif"},
		"x":   {Href: "https://example.com/x.tif"},
	}}, {ID: "b", Collection: "sentinel-2-l2a", Assets: map[string]Asset{
		"B04": {Href: "https://sentinel2l2a01.blob.core.windows.net/y/B04.tif"},
	}}}
	s := &Signer{TokenURL: srv.URL + "/token/{collection}", Client: NewClient(nil)}
	if err := s.Sign(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	if got := items[0].Assets["B04"].Href; got != "https://sentinel2l2a01.blob.core.windows.net/x/B04.tif?sv=1&sig=abc" {
		t.Errorf("signed href %s", got)
	}
	if items[0].Assets["x"].Href != "https://example.com/x.tif" || calls.Load() != 1 {
		t.Errorf("non-blob href changed or token fetched %d times", calls.Load())
	}
}

// stacAPI serves items in pages of two through POST /search with next links
// that carry a token in the body, as Earth Search does.
func stacAPI(t *testing.T, items []map[string]any, fail func(n int32) int) *httptest.Server {
	t.Helper()
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		if fail != nil {
			if code := fail(k); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		if r.URL.Path != "/search" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, "bad body", 400)
			return
		}
		start := 0
		if tok, ok := body["next"].(string); ok {
			fmt.Sscan(tok, &start)
		}
		if q, ok := body["query"].(map[string]any); !ok || q["eo:cloud_cover"] == nil {
			http.Error(w, "missing cloud query", 400)
			return
		}
		end := min(start+2, len(items))
		page := map[string]any{"type": "FeatureCollection", "features": items[start:end]}
		if end < len(items) {
			page["links"] = []any{map[string]any{"rel": "next", "method": "POST", "href": "http://" + r.Host + "/search", "merge": true, "body": map[string]any{"next": fmt.Sprint(end)}}}
		}
		json.NewEncoder(w).Encode(page)
	}))
}

func fakeItems(n int) []map[string]any {
	var out []map[string]any
	for i := range n {
		out = append(out, map[string]any{
			"type": "Feature", "stac_version": "1.0.0", "id": fmt.Sprintf("S2A_31TEJ_2024040%d_0_L2A", i+1),
			"collection": "sentinel-2-l2a", "bbox": []float64{2.9, 45.0, 3.1, 45.2},
			"properties": map[string]any{"datetime": fmt.Sprintf("2024-04-0%dT10:56:00Z", i+1), "eo:cloud_cover": float64(10 * i), "s2:mgrs_tile": "31TEJ"},
			"assets":     map[string]any{"red": map[string]any{"href": "./B04.tif"}},
		})
	}
	return out
}

func TestSearchPaging(t *testing.T) {
	srv := stacAPI(t, fakeItems(5), nil)
	defer srv.Close()
	maxCloud := 35.0
	q := Query{Collections: []string{"sentinel-2-l2a"}, BBox: [4]float64{3, 45.1, 3.01, 45.11}, MaxCloud: &maxCloud, Limit: 2}
	items, err := NewClient(nil).Search(context.Background(), srv.URL, q)
	if err != nil {
		t.Fatal(err)
	}
	// Five items over three pages; the client-side check drops cloud ≥ 35.
	if len(items) != 4 || items[3].ID != "S2A_31TEJ_20240404_0_L2A" {
		t.Fatalf("%d items: %+v", len(items), items)
	}
	if items[0].Assets["red"].Href != srv.URL+"/B04.tif" {
		t.Errorf("relative href resolved to %s", items[0].Assets["red"].Href)
	}
}

func TestSearchRetries(t *testing.T) {
	srv := stacAPI(t, fakeItems(3), func(n int32) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return 0
	})
	defer srv.Close()
	c := NewClient(nil)
	c.Backoff = time.Millisecond
	mc := 100.0
	items, err := c.Search(context.Background(), srv.URL, Query{BBox: [4]float64{-180, -90, 180, 90}, MaxCloud: &mc})
	if err != nil || len(items) != 3 {
		t.Fatalf("%d items, %v", len(items), err)
	}
}

func TestSearchFailures(t *testing.T) {
	always500 := stacAPI(t, nil, func(int32) int { return http.StatusInternalServerError })
	defer always500.Close()
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	defer stall.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()

	c := NewClient(nil)
	c.Backoff, c.Retries, c.Timeout = time.Millisecond, 2, 100*time.Millisecond
	for name, c2 := range map[string]struct {
		url  string
		want []string
	}{
		"500":   {always500.URL, []string{"HTTP 500", "3 attempts", always500.URL + "/search"}},
		"stall": {stall.URL, []string{"deadline", "3 attempts", stall.URL + "/search"}},
		"404":   {notFound.URL, []string{"HTTP 404", notFound.URL + "/search"}},
	} {
		_, err := c.Search(context.Background(), c2.url, Query{BBox: [4]float64{-180, -90, 180, 90}})
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		for _, w := range c2.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", name, err, w)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct{ loc, href, want string }{
		{"/a/b/item.json", "./B04.tif", "/a/b/B04.tif"},
		{"/a/b/item.json", "../c/x.tif", "/a/c/x.tif"},
		{"https://h/x/item.json", "./B04.tif", "https://h/x/B04.tif"},
		{"https://h/x/item.json", "s3://bucket/B04.tif", "s3://bucket/B04.tif"},
		{"/a/item.json", "/abs/B04.tif", "/abs/B04.tif"},
	} {
		if got := resolve(c.loc, c.href); got != c.want {
			t.Errorf("resolve(%q, %q) = %q, want %q", c.loc, c.href, got, c.want)
		}
	}
}

// TestScaleOffsetConventions checks where an item's offset comes from:
// raster:bands first; else the processing baseline, from
// s2:processing_baseline or processing:version, unless the catalog says
// it removed the offset (earthsearch:boa_offset_applied).
func TestScaleOffsetConventions(t *testing.T) {
	cases := []struct {
		props string
		want  float64
	}{
		{`"s2:processing_baseline": "05.10"`, -0.1},
		{`"s2:processing_baseline": "03.01"`, 0},
		{`"processing:version": "04.00"`, -0.1},
		{`"processing:version": "02.14"`, 0},
		{`"s2:processing_baseline": "05.10", "earthsearch:boa_offset_applied": true`, 0},
		{`"s2:processing_baseline": "05.10", "earthsearch:boa_offset_applied": false`, -0.1},
		{``, 0},
	}
	for _, c := range cases {
		props := `"datetime": "2024-01-01T00:00:00Z"`
		if c.props != "" {
			props += ", " + c.props
		}
		raw := `{"type": "Feature", "stac_version": "1.0.0", "id": "x", "properties": {` + props + `},
			"assets": {"red": {"href": "b04.tif"}}}`
		it, err := ParseItem(json.RawMessage(raw), "http://example.com/item.json")
		if err != nil {
			t.Fatal(err)
		}
		if _, off := it.ScaleOffset(it.Assets["red"]); off != c.want {
			t.Errorf("%s: offset %g, want %g", c.props, off, c.want)
		}
	}
}

// TestLabelClasses reads the real WorldCover item's classification:classes
// into WorldCover's scheme, and keeps an item whose classes do not parse.
func TestLabelClasses(t *testing.T) {
	body := readShared(t, "worldcover-N00E006/examples/ESA_WorldCover_10m_2021_v200_N00E006/ESA_WorldCover_10m_2021_v200_N00E006.json")
	it, err := ParseItem(body, "x/item.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := landcover.FromSTAC("esa-worldcover", it.Assets["map"].Classes)
	if err != nil || !s.Equal(landcover.WorldCover) {
		t.Errorf("the item's classes give %+v (%v), not WorldCover's", s, err)
	}
	bad := `{"type": "Feature", "stac_version": "1.0.0", "id": "x", "properties": {"datetime": "2024-01-01T00:00:00Z"},
		"assets": {"map": {"href": "m.tif", "classification:classes": "oops"}}}`
	it, err = ParseItem([]byte(bad), "x/item.json")
	if err != nil || it.Assets["map"].Href == "" || it.Assets["map"].Classes != nil {
		t.Errorf("an item with malformed classes: %+v, %v", it.Assets, err)
	}
}

// TestSortItemsTies: items of one collection, datetime and id (two
// synthetic tiles' WorldCover cells) come out in one order whatever order
// the crawl found them in: by where they were read from.
func TestSortItemsTies(t *testing.T) {
	day := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Item{ID: "N44E003", Collection: "esa-worldcover", Datetime: day, Location: "/data/31TEB/wc.json"}
	b := Item{ID: "N44E003", Collection: "esa-worldcover", Datetime: day, Location: "/data/31TEA/wc.json"}
	c := Item{ID: "N41E003", Collection: "esa-worldcover", Datetime: day, Location: "/data/31TEZ/wc.json"}
	for _, in := range [][]Item{{a, b, c}, {b, a, c}, {c, a, b}, {a, c, b}} {
		sortItems(in)
		if got := []string{in[0].Location, in[1].Location, in[2].Location}; got[0] != c.Location || got[1] != b.Location || got[2] != a.Location {
			t.Errorf("order %v, want %s, %s, %s", got, c.Location, b.Location, a.Location)
		}
	}
}
