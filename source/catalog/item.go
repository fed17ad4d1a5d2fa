// Package catalog finds Sentinel-2 and label scenes: it crawls static STAC
// catalogs with go-stac (every item read once, CrawlAll, then picked by
// query, Crawled.Find), searches STAC APIs with the item-search protocol
// (POST /search, following next links), signs Planetary Computer hrefs, and
// turns each STAC item into a plain Item whose assets are keyed by lulc's
// band names.
package catalog

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lulc/lulc/geo/landcover"
)

// Item is a STAC item reduced to what lulc uses.
type Item struct {
	ID         string
	Collection string
	Datetime   time.Time
	// Tile is the MGRS tile ("31TEJ"), from s2:mgrs_tile, grid:code or the
	// mgrs:* fields; empty for items without one (labels).
	Tile       string
	CloudCover *float64
	EPSG       int        // item-level proj:epsg, 0 if absent
	BBox       [4]float64 // lon/lat
	// Baseline is the processing baseline, from s2:processing_baseline or
	// processing:version ("" if neither); OffsetApplied says the catalog
	// already removed baseline 04.00's +1000 DN offset from the files
	// (earthsearch:boa_offset_applied).
	Baseline      string
	OffsetApplied bool
	// Assets by the catalog's own keys, hrefs made absolute.
	Assets   map[string]Asset
	Location string // where the item was read from
}

// Asset is one file of an item.
type Asset struct {
	Href      string
	Type      string
	Shape     []int     // proj:shape, rows then columns
	Transform []float64 // proj:transform (a, b, c, d, e, f)
	EPSG      int       // asset-level proj:epsg, 0 if absent
	Scale     *float64  // raster:bands[0].scale
	Offset    *float64  // raster:bands[0].offset
	NoData    *float64  // raster:bands[0].nodata
	Names     []string  // eo:bands names and common names
	// Classes are the asset's classification:classes, else the item's
	// (a label item's class scheme); nil when it declares none or they
	// do not parse.
	Classes []landcover.STACClass
}

type rawItem struct {
	Type       string                     `json:"type"`
	ID         string                     `json:"id"`
	Collection string                     `json:"collection"`
	BBox       []float64                  `json:"bbox"`
	Properties map[string]json.RawMessage `json:"properties"`
	Assets     map[string]rawAsset        `json:"assets"`
}

type rawAsset struct {
	Href      string    `json:"href"`
	Type      string    `json:"type"`
	Shape     []int     `json:"proj:shape"`
	Transform []float64 `json:"proj:transform"`
	EPSG      *int      `json:"proj:epsg"`
	Raster    []struct {
		Scale  *float64        `json:"scale"`
		Offset *float64        `json:"offset"`
		NoData json.RawMessage `json:"nodata"`
	} `json:"raster:bands"`
	EO []struct {
		Name       string `json:"name"`
		CommonName string `json:"common_name"`
	} `json:"eo:bands"`
	// Classes is decoded on its own, so that a malformed class list
	// costs the classes only, not the item.
	Classes json.RawMessage `json:"classification:classes"`
}

// ParseItem decodes a STAC item (GeoJSON Feature). location is where it was
// read from: relative asset hrefs are resolved against it.
func ParseItem(body []byte, location string) (Item, error) {
	var r rawItem
	if err := json.Unmarshal(body, &r); err != nil {
		return Item{}, fmt.Errorf("parse item %s: %w", location, err)
	}
	if r.Type != "Feature" || r.ID == "" {
		return Item{}, fmt.Errorf("parse item %s: not a STAC item (type %q, id %q)", location, r.Type, r.ID)
	}
	it := Item{ID: r.ID, Collection: r.Collection, Location: location, Assets: map[string]Asset{}}
	if n := len(r.BBox); n != 0 && n != 4 && n != 6 {
		return Item{}, fmt.Errorf("item %s: bbox has %d numbers (STAC wants 4, or 6 in 3-D)", r.ID, n)
	}
	if len(r.BBox) >= 4 {
		if len(r.BBox) == 6 { // 3-D bbox: minx, miny, minz, maxx, maxy, maxz
			it.BBox = [4]float64{r.BBox[0], r.BBox[1], r.BBox[3], r.BBox[4]}
		} else {
			it.BBox = [4]float64{r.BBox[0], r.BBox[1], r.BBox[2], r.BBox[3]}
		}
	}
	p := props(r.Properties)
	dt := p.str("datetime")
	if dt == "" {
		dt = p.str("start_datetime")
	}
	if dt != "" {
		t, err := time.Parse(time.RFC3339Nano, dt)
		if err != nil {
			return Item{}, fmt.Errorf("item %s: datetime %q: %w", r.ID, dt, err)
		}
		it.Datetime = t.UTC()
	}
	if v, ok := p.num("eo:cloud_cover"); ok {
		it.CloudCover = &v
	}
	if v, ok := p.num("proj:epsg"); ok {
		it.EPSG = int(v)
	}
	it.Baseline = p.str("s2:processing_baseline")
	if it.Baseline == "" {
		it.Baseline = p.str("processing:version")
	}
	var applied bool
	if json.Unmarshal(p["earthsearch:boa_offset_applied"], &applied) == nil {
		it.OffsetApplied = applied
	}
	it.Tile = tileOf(p)
	for key, a := range r.Assets {
		asset := Asset{Href: resolve(location, a.Href), Type: a.Type, Shape: a.Shape, Transform: a.Transform}
		if a.EPSG != nil {
			asset.EPSG = *a.EPSG
		}
		for _, raw := range []json.RawMessage{a.Classes, p["classification:classes"]} {
			var classes []landcover.STACClass
			if len(raw) > 0 && json.Unmarshal(raw, &classes) == nil && len(classes) > 0 {
				asset.Classes = classes
				break
			}
		}
		if len(a.Raster) > 0 {
			asset.Scale, asset.Offset = a.Raster[0].Scale, a.Raster[0].Offset
			if v, err := strconv.ParseFloat(strings.Trim(string(a.Raster[0].NoData), `"`), 64); err == nil {
				asset.NoData = &v
			}
		}
		for _, b := range a.EO {
			asset.Names = append(asset.Names, b.Name, b.CommonName)
		}
		it.Assets[key] = asset
	}
	return it, nil
}

type props map[string]json.RawMessage

func (p props) str(k string) string {
	var s string
	if json.Unmarshal(p[k], &s) != nil {
		return ""
	}
	return s
}

func (p props) num(k string) (float64, bool) {
	var v float64
	if raw, ok := p[k]; !ok || json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}

// tileOf finds the MGRS tile in the ways catalogs record it.
func tileOf(p props) string {
	if t := p.str("s2:mgrs_tile"); t != "" {
		return t
	}
	if g := p.str("grid:code"); strings.HasPrefix(g, "MGRS-") {
		return strings.TrimPrefix(g, "MGRS-")
	}
	if zone, ok := p.num("mgrs:utm_zone"); ok {
		band, sq := p.str("mgrs:latitude_band"), p.str("mgrs:grid_square")
		if band != "" && sq != "" {
			return fmt.Sprintf("%02d%s%s", int(zone), band, sq)
		}
	}
	return ""
}

// resolve makes href absolute against the location of the document that
// holds it (a URL or a file path).
func resolve(location, href string) string {
	if href == "" || isAbs(href) {
		return href
	}
	if u, err := url.Parse(location); err == nil && u.Scheme != "" && len(u.Scheme) > 1 {
		ref, err := url.Parse(href)
		if err != nil {
			return href
		}
		return u.ResolveReference(ref).String()
	}
	return filepath.Join(filepath.Dir(location), filepath.FromSlash(href))
}

func isAbs(href string) bool {
	if strings.HasPrefix(href, "/") {
		return true
	}
	u, err := url.Parse(href)
	return err == nil && len(u.Scheme) > 1 // "C:" is a drive, not a scheme
}

// Intersects reports whether the item's bbox overlaps b (lon/lat).
func (it Item) Intersects(b [4]float64) bool {
	return it.BBox[0] <= b[2] && b[0] <= it.BBox[2] && it.BBox[1] <= b[3] && b[1] <= it.BBox[3]
}

// Day is the item's acquisition day, the grouping key beside the tile.
func (it Item) Day() string { return it.Datetime.Format("2006-01-02") }
