package scenes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// MaxDates is the most dates a tile's composite takes: its count of valid
// observations is a byte (valid_count.tif) on the CPU and the GPU alike.
const MaxDates = 255

// Searcher finds an ingest config's items (its scenes, their labels,
// each layer's) in its source. A static catalog is crawled once, in the
// first search, and every later search picks from the items read then:
// its documents are not read again for each collection.
type Searcher struct {
	cfg     config.IngestConfig
	client  *catalog.Client
	crawled *catalog.Crawled
}

// NewSearcher returns the searcher of cfg's source.
func NewSearcher(cfg config.IngestConfig, opt stage.Options) *Searcher {
	return &Searcher{cfg: cfg, client: sourceClient(cfg, opt)}
}

// Items finds the scene and label items over the area, unsigned; with
// source.labels there is no label collection to search.
func (s *Searcher) Items(ctx context.Context, area [4]float64, intersects json.RawMessage) (items, labelItems []catalog.Item, err error) {
	cfg := s.cfg
	startT, endT, _ := cfg.DateRange()
	q := catalog.Query{
		Collections: []string{cfg.Source.Collection}, BBox: area, Intersects: intersects,
		Start: startT, End: endT, Limit: cfg.Source.Limit, CloudFilter: cfg.Source.CloudFilter,
	}
	// 100 % means no limit: "below 100" would drop fully clouded scenes.
	if cfg.MaxCloudCover < 100 {
		q.MaxCloud = &cfg.MaxCloudCover
	}
	if items, err = s.find(ctx, q); err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("no %s items over %v between %s and %s with cloud cover below %g %%",
			cfg.Source.Collection, area, cfg.Dates.Start, cfg.Dates.End, cfg.MaxCloudCover)
	}
	if cfg.Source.Labels != "" {
		return items, nil, nil
	}
	lq := catalog.Query{Collections: []string{cfg.Source.LabelCollection}, BBox: area, Intersects: intersects,
		Limit: cfg.Source.Limit, CloudFilter: "none"}
	if labelItems, err = s.find(ctx, lq); err != nil {
		return nil, nil, err
	}
	if len(labelItems) == 0 {
		return nil, nil, fmt.Errorf("no %s label items overlap the area %v", cfg.Source.LabelCollection, area)
	}
	return items, labelItems, nil
}

// sourceClient is the STAC client for the config's source: its href
// policy, paging limits and timeouts.
func sourceClient(cfg config.IngestConfig, opt stage.Options) *catalog.Client {
	s := cfg.Source
	client := catalog.NewClient(opt.Log)
	client.HTTP = opt.HTTP
	client.Policy = catalog.HrefPolicy{Allow: s.AllowHrefs}
	client.MaxPages, client.MaxItems, client.SearchTimeout = s.MaxPages, s.MaxItems, s.SearchTimeout
	if s.RequestTimeout > 0 {
		client.Timeout = s.RequestTimeout
	}
	return client
}

// SignItems signs the items' hrefs where the source needs it (Planetary
// Computer's SAS tokens), in place.
func SignItems(ctx context.Context, cfg config.IngestConfig, opt stage.Options, items, labelItems []catalog.Item) error {
	signer := &catalog.Signer{Token: cfg.Source.SASToken, TokenURL: cfg.Source.SASTokenURL, Client: sourceClient(cfg, opt)}
	if err := signer.Sign(ctx, items); err != nil {
		return err
	}
	return signer.Sign(ctx, labelItems)
}

// find runs a query on the source: an API's search, or the static
// catalog's items, crawled on the first call.
func (s *Searcher) find(ctx context.Context, q catalog.Query) ([]catalog.Item, error) {
	if s.cfg.Source.Catalog == "" {
		return s.client.Search(ctx, s.cfg.Source.API, q)
	}
	if s.crawled == nil {
		c, err := catalog.CrawlAll(ctx, s.cfg.Source.Catalog, catalog.HrefPolicy{Allow: s.cfg.Source.AllowHrefs}, s.client.Timeout)
		if err != nil {
			return nil, err
		}
		s.crawled = c
	}
	return s.crawled.Find(q)
}

// TileItems are a tile's scene items, in date order.
type TileItems struct {
	Tile  string
	Items []catalog.Item // one per acquisition day, by date
}

// GroupByTile groups items by MGRS tile and keeps one item per tile and
// day (the first by id), so that reprocessed duplicates count once. The
// tile (or, without one, the item's id) names the tile's output directory:
// an item whose tile cannot (checkTileName) is an error naming the item,
// not a tile silently lost or written elsewhere.
func GroupByTile(items []catalog.Item) ([]TileItems, error) {
	byTile := map[string]*TileItems{}
	var order []string
	for _, it := range items {
		key := it.Tile
		if key == "" {
			key = it.ID
		}
		if err := config.CheckTileName(key); err != nil {
			return nil, fmt.Errorf("item %q (%s): its tile id: %w", it.ID, it.Location, err)
		}
		t, ok := byTile[key]
		if !ok {
			t = &TileItems{Tile: key}
			byTile[key] = t
			order = append(order, key)
		}
		if n := len(t.Items); n > 0 && t.Items[n-1].Day() == it.Day() {
			continue
		}
		t.Items = append(t.Items, it)
	}
	slices.Sort(order)
	out := make([]TileItems, len(order))
	for i, k := range order {
		out[i] = *byTile[k]
	}
	return out, nil
}

// OutputGrid returns the stack's grid and the tile's own grid at the
// output resolution (whose origin the windows align to).
func OutputGrid(cfg config.IngestConfig, bands []catalog.Asset, area [4]float64) (geo.Grid, geo.Grid, error) {
	// The finest band defines the tile grid; its file, not the item's
	// proj:* fields, is the truth (catalogs and files can disagree).
	var ref *raster.Source
	for _, a := range bands {
		s, err := raster.Open(a.Href)
		if err != nil {
			return geo.Grid{}, geo.Grid{}, err
		}
		if ref == nil || s.Transform[1] < ref.Transform[1] {
			if ref != nil {
				ref.Close()
			}
			ref = s
		} else {
			s.Close()
		}
	}
	defer ref.Close()
	res := cfg.Grid.Resolution
	tile := ref.Grid
	f := tile.Transform[1] / res
	tile.Transform[1], tile.Transform[5] = res, -res
	tile.Width, tile.Height = int(math.Round(float64(tile.Width)*f)), int(math.Round(float64(tile.Height)*f))
	if err := checkTileResolution(ref.Grid, res); err != nil {
		return geo.Grid{}, geo.Grid{}, err
	}

	if cfg.Grid.EPSG != 0 {
		b := cfg.Grid.Bounds
		g := geo.Grid{EPSG: cfg.Grid.EPSG, Transform: [6]float64{b[0], res, 0, b[3], 0, -res},
			Width: int(math.Ceil((b[2] - b[0]) / res)), Height: int(math.Ceil((b[3] - b[1]) / res))}
		if _, err := raster.NewTransformer(4326, g.EPSG); err != nil {
			return geo.Grid{}, geo.Grid{}, fmt.Errorf("grid.epsg: %w", err)
		}
		return g, g, checkGridSize(g, res)
	}
	// Clip the tile to the area, snapped outward to a 6-pixel lattice from the
	// tile origin so that 20 m and 60 m pixels nest in every window.
	tr, err := raster.NewTransformer(4326, tile.EPSG)
	if err != nil {
		return geo.Grid{}, geo.Grid{}, fmt.Errorf("tile CRS EPSG:%d: %w", tile.EPSG, err)
	}
	defer tr.Close()
	var xs, ys []float64
	for k := 0; k <= 16; k++ {
		t := float64(k) / 16
		lon := area[0] + t*(area[2]-area[0])
		lat := area[1] + t*(area[3]-area[1])
		xs = append(xs, lon, lon, area[0], area[2])
		ys = append(ys, area[1], area[3], lat, lat)
	}
	if err := tr.Transform(xs, ys); err != nil {
		return geo.Grid{}, geo.Grid{}, fmt.Errorf("area into EPSG:%d: %w", tile.EPSG, err)
	}
	minx, maxx := slices.Min(xs), slices.Max(xs)
	miny, maxy := slices.Min(ys), slices.Max(ys)
	snap := 6 * res
	x0, y0 := tile.Transform[0], tile.Transform[3]
	c0 := math.Floor((minx-x0)/snap) * snap
	c1 := math.Ceil((maxx-x0)/snap) * snap
	r0 := math.Floor((y0-maxy)/snap) * snap
	r1 := math.Ceil((y0-miny)/snap) * snap
	ext := float64(tile.Width) * res
	c0, r0 = max(c0, 0), max(r0, 0)
	c1, r1 = min(c1, ext), min(r1, float64(tile.Height)*res)
	if c1 <= c0 || r1 <= r0 {
		return geo.Grid{}, geo.Grid{}, fmt.Errorf("area %v lies outside the tile (EPSG:%d, %.0f–%.0f E, %.0f–%.0f N)",
			area, tile.EPSG, x0, x0+ext, y0-float64(tile.Height)*res, y0)
	}
	g := geo.Grid{EPSG: tile.EPSG, Transform: [6]float64{x0 + c0, res, 0, y0 - r0, 0, -res},
		Width: int(math.Round((c1 - c0) / res)), Height: int(math.Round((r1 - r0) / res))}
	return g, tile, checkGridSize(g, res)
}

// checkTileResolution refuses a grid.resolution so coarse that the tile
// (src, its finest band's grid) would not hold one 6-pixel block, the
// lattice on which 20 m and 60 m pixels nest: the tile would vanish, and
// the area be reported outside it. The error names the resolution and the
// range that makes sense for this tile.
func checkTileResolution(src geo.Grid, res float64) error {
	w, h := float64(src.Width)*src.Transform[1], float64(src.Height)*-src.Transform[5]
	coarsest := min(w, h) / 6
	if res <= coarsest {
		return nil
	}
	return fmt.Errorf("grid.resolution: %g is too coarse for the tile (%.0f × %.0f units of EPSG:%d): it would be less than 6 pixels across; sensible resolutions lie between the bands' own %g and %g",
		res, w, h, src.EPSG, src.Transform[1], math.Floor(coarsest))
}

// AreaWarnPercent is the share of a local catalog's scenes below which
// ingest warns that the configured area maps only part of them.
const AreaWarnPercent = 10.0

// AreaCoverageWarning says, for a local catalog (the user's own scenes,
// source.catalog or --catalog), when the configured area covers less than
// AreaWarnPercent of the scenes' footprint (their tiles' lon/lat bboxes):
// an embedded config's area, kept with another scene, maps a corner of it
// without a word otherwise. It names the area, the share and the key to
// change; "" when the area covers enough, or the scenes come from a STAC
// API, where an area smaller than a tile is the usual case.
func AreaCoverageWarning(cfg config.IngestConfig, area [4]float64, groups []TileItems) string {
	if cfg.Source.Catalog == "" || len(groups) == 0 {
		return ""
	}
	var covered, total float64
	var tiles []string
	for _, g := range groups {
		fp := g.Items[0].BBox
		for _, it := range g.Items[1:] {
			fp = [4]float64{min(fp[0], it.BBox[0]), min(fp[1], it.BBox[1]), max(fp[2], it.BBox[2]), max(fp[3], it.BBox[3])}
		}
		// Degrees of longitude shrink with latitude; the share within a
		// tile does not, but tiles at other latitudes weigh by it.
		k := math.Cos((fp[1] + fp[3]) / 2 * math.Pi / 180)
		total += k * bboxArea(fp)
		covered += k * bboxArea([4]float64{max(fp[0], area[0]), max(fp[1], area[1]), min(fp[2], area[2]), min(fp[3], area[3])})
		tiles = append(tiles, g.Tile)
	}
	if total <= 0 {
		return ""
	}
	share := 100 * covered / total
	if share >= AreaWarnPercent {
		return ""
	}
	key, what := "area.bbox", fmt.Sprintf("area.bbox [%g, %g, %g, %g]", area[0], area[1], area[2], area[3])
	if len(cfg.Area.BBox) != 4 {
		key, what = "area.geojson", fmt.Sprintf("area.geojson %s (bbox [%g, %g, %g, %g])", cfg.Area.GeoJSON, area[0], area[1], area[2], area[3])
	}
	return fmt.Sprintf("area: %s covers %.1f %% of the catalog's scenes (tiles %s): only that part is mapped; set %s to the part to map (the scenes' bboxes are in their items)",
		what, share, strings.Join(tiles, ", "), key)
}

// bboxArea is a lon/lat bbox's area in square degrees, 0 when empty.
func bboxArea(b [4]float64) float64 {
	return max(0, b[2]-b[0]) * max(0, b[3]-b[1])
}

// checkGridSize refuses a grid too large to make, before any pixel is read
// or any disk space is asked for: a resolution in the wrong unit, most
// often.
func checkGridSize(g geo.Grid, res float64) error {
	if px := float64(g.Width) * float64(g.Height); px > stage.MaxGridPixels || g.Width <= 0 || g.Height <= 0 {
		return fmt.Errorf("grid.resolution: %g gives a %d×%d grid (%.3g pixels; at most %d): is it in the grid's units (metres for UTM tiles)?",
			res, g.Width, g.Height, px, stage.MaxGridPixels)
	}
	return nil
}

// Layers finds, for each layer of the config from a STAC collection,
// its items over the area: a layer over time (temporal: median) those in
// the ingest's dates, a static layer (a DEM) all, whatever their dates;
// signed as the source's items are. A layer without items over the area
// is an error that names it.
func (s *Searcher) Layers(ctx context.Context, area [4]float64, intersects json.RawMessage) (map[string][]catalog.Item, error) {
	cfg := s.cfg
	out := map[string][]catalog.Item{}
	signer := &catalog.Signer{Token: cfg.Source.SASToken, TokenURL: cfg.Source.SASTokenURL, Client: s.client}
	for i, l := range cfg.Layers {
		if l.Collection == "" {
			continue
		}
		q := catalog.Query{Collections: []string{l.Collection}, BBox: area, Intersects: intersects, Limit: cfg.Source.Limit, CloudFilter: "none"}
		if l.Temporal != "" {
			q.Start, q.End, _ = cfg.DateRange()
		}
		items, err := s.find(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("layers[%d] (%s): %w", i, l.Name, err)
		}
		// Items whose asset is missing cannot serve the layer.
		items = slices.DeleteFunc(items, func(it catalog.Item) bool { _, ok := it.Assets[l.Asset]; return !ok })
		if len(items) == 0 {
			when := ""
			if l.Temporal != "" {
				when = fmt.Sprintf(" between %s and %s", cfg.Dates.Start, cfg.Dates.End)
			}
			return nil, fmt.Errorf("layers[%d] (%s): no %s items with asset %q over the area %v%s", i, l.Name, l.Collection, l.Asset, area, when)
		}
		if err := signer.Sign(ctx, items); err != nil {
			return nil, fmt.Errorf("layers[%d] (%s): %w", i, l.Name, err)
		}
		// A stable order: the mosaic's and the median's inputs do not
		// depend on the catalog's.
		slices.SortFunc(items, func(a, b catalog.Item) int { return strings.Compare(a.ID, b.ID) })
		out[l.Name] = items
	}
	return out, nil
}
