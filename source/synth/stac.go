package synth

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/planetlabs/go-stac"
	"github.com/planetlabs/go-stac/extensions/eo/v1"
	"github.com/planetlabs/go-stac/extensions/raster/v1"
	view "github.com/planetlabs/go-stac/extensions/view/v1"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/source/stacext"
)

const (
	stacVersion = "1.0.0"
	cogType     = "image/tiff; application=geotiff; profile=cloud-optimized"
	jsonType    = "application/json"
	geoJSONType = "application/geo+json"

	s2Collection = "sentinel-2-l2a"
	wcCollection = "esa-worldcover"
)

func ptr[T any](v T) *T { return &v }

// writeJSON writes v as indented JSON, atomically.
func writeJSON(path string, v any) error {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfs.WriteFile(path, append(body, '\n'))
}

// polygon returns a closed GeoJSON polygon.
func polygon(ring [][2]float64) map[string]any {
	coords := make([][]float64, 0, len(ring)+1)
	for _, p := range ring {
		coords = append(coords, []float64{round9(p[0]), round9(p[1])})
	}
	coords = append(coords, coords[0])
	return map[string]any{"type": "Polygon", "coordinates": [][][]float64{coords}}
}

// round9 keeps coordinates at 1e-9° (0.1 mm), so that JSON stays readable
// and stable across platforms' last-bit differences in PROJ.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }

func bboxOf(ring [][2]float64) []float64 {
	b := []float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, p := range ring {
		b[0], b[1] = min(b[0], p[0]), min(b[1], p[1])
		b[2], b[3] = max(b[2], p[0]), max(b[3], p[1])
	}
	for i := range b {
		b[i] = round9(b[i])
	}
	return b
}

// gridFields returns proj:shape and proj:transform of a grid.
func gridFields(g geo.Grid) *stacext.ProjectionAsset {
	t := g.Transform
	return &stacext.ProjectionAsset{
		Shape:     []int{g.Height, g.Width},
		Transform: []float64{t[1], t[2], t[0], t[4], t[5], t[3]},
	}
}

// s2Item builds the STAC item of one acquisition, as Earth Search v1 lays
// it out: one asset per band keyed by common name, with raster:bands scale
// and offset for baseline 04 radiometry.
func s2Item(cfg Config, a *acquisition, geo *geometry, footprint [][2]float64, names []string) *stac.Item {
	id := a.date.itemID(cfg.Tile)
	assets := map[string]*stac.Asset{}
	for _, name := range names {
		b, err := features.LookupBand(name)
		if err != nil {
			panic(err) // names come from Config.bandNames
		}
		g := bandGrid(geo.utm, b.Resolution)
		assets[b.Key] = &stac.Asset{
			Href:  "./" + name + ".tif",
			Type:  cogType,
			Title: fmt.Sprintf("%s - %dm", b.Title, b.Resolution),
			Roles: []string{"data", "reflectance"},
			Extensions: []stac.Extension{
				&eo.Asset{Bands: []*eo.Band{{
					Name: b.Name, CommonName: b.CommonName, Description: b.Title,
					CenterWavelength: ptr(b.Wavelength), FullWidthHalfMax: ptr(b.FWHM),
				}}},
				gridFields(g),
				&raster.Asset{Bands: []*raster.Band{{
					NoData: 0, DataType: "uint16", BitsPerSample: ptr(15),
					SpatialResolution: ptr(float64(b.Resolution)),
					Scale:             ptr(dnScale), Offset: ptr(dnOffset),
				}}},
			},
		}
	}
	assets["scl"] = &stac.Asset{
		Href:  "./SCL.tif",
		Type:  cogType,
		Title: "Scene classification map (SCL)",
		Roles: []string{"data", "reflectance"},
		Extensions: []stac.Extension{
			gridFields(bandGrid(geo.utm, 20)),
			&raster.Asset{Bands: []*raster.Band{{NoData: 0, DataType: "uint8", SpatialResolution: ptr(20.0)}}},
		},
	}

	stats := sclStats(a)
	when := a.date.Datetime.UTC().Format("2006-01-02T15:04:05.000000Z")
	props := map[string]any{
		"datetime":                       when,
		"created":                        when,
		"updated":                        when,
		"platform":                       a.date.Platform,
		"constellation":                  "sentinel-2",
		"instruments":                    []string{"msi"},
		"grid:code":                      "MGRS-" + cfg.Tile,
		"s2:mgrs_tile":                   cfg.Tile,
		"mgrs:utm_zone":                  cfg.EPSG % 100,
		"s2:processing_baseline":         "05.10",
		"s2:product_type":                "S2MSI2A",
		"earthsearch:boa_offset_applied": false,
		"lulc:synthetic":                 true,
		"lulc:seed":                      cfg.Seed,
	}
	for k, v := range stats.percentages {
		props[k] = v
	}
	return &stac.Item{
		Version:    stacVersion,
		Id:         id,
		Collection: s2Collection,
		Geometry:   polygon(footprint),
		Bbox:       bboxOf(footprint),
		Properties: props,
		Assets:     assets,
		Links:      itemLinks(),
		Extensions: []stac.Extension{
			&eo.Item{CloudCover: ptr(stats.cloudCover)},
			&stacext.ProjectionItem{EPSG: cfg.EPSG},
			&view.Item{SunAzimuth: ptr(a.sunAz), SunElevation: ptr(round9(a.sunEl))},
		},
	}
}

// bandGrid is the grid of a band at res metres over the 10 m grid's extent.
func bandGrid(g10 geo.Grid, res int) geo.Grid {
	f := res / 10
	g := g10
	g.Width, g.Height = g10.Width/f, g10.Height/f
	g.Transform[1], g.Transform[5] = float64(res), -float64(res)
	return g
}

type sceneStats struct {
	cloudCover  float64
	percentages map[string]float64
}

// sclStats derives the item's cloud and surface percentages from the SCL
// counts, as Sen2Cor reports them: over valid (non-nodata) pixels, with
// eo:cloud_cover = medium + high probability clouds + thin cirrus.
func sclStats(a *acquisition) sceneStats {
	var c [12]float64
	total := 0.0
	for k := range c {
		c[k] = float64(a.sclCounts[k].Load())
		total += c[k]
	}
	valid := total - c[sclNoData]
	pct := func(v float64) float64 {
		if valid == 0 {
			return 0
		}
		return math.Round(v/valid*100*1e6) / 1e6
	}
	st := sceneStats{percentages: map[string]float64{
		"s2:nodata_pixel_percentage":        math.Round(c[sclNoData]/total*100*1e6) / 1e6,
		"s2:dark_features_percentage":       pct(c[sclDark]),
		"s2:cloud_shadow_percentage":        pct(c[sclShadow]),
		"s2:vegetation_percentage":          pct(c[sclVegetation]),
		"s2:not_vegetated_percentage":       pct(c[sclBare]),
		"s2:water_percentage":               pct(c[sclWater]),
		"s2:unclassified_percentage":        pct(c[sclUnclassed]),
		"s2:medium_proba_clouds_percentage": pct(c[sclCloudMedium]),
		"s2:high_proba_clouds_percentage":   pct(c[sclCloudHigh]),
		"s2:thin_cirrus_percentage":         pct(c[sclCirrus]),
		"s2:snow_ice_percentage":            pct(c[sclSnow]),
	}}
	st.cloudCover = pct(c[sclCloudMedium] + c[sclCloudHigh] + c[sclCirrus])
	return st
}

// wcItemID names the label item after the 3°-style corner WorldCover uses.
func wcItemID(cfg Config, geo *geometry) (id, tile string) {
	lat := int(math.Floor(geo.lonLat[1]))
	lon := int(math.Floor(geo.lonLat[0]))
	ns, ew := 'N', 'E'
	if lat < 0 {
		ns, lat = 'S', -lat
	}
	if lon < 0 {
		ew, lon = 'W', -lon
	}
	tile = fmt.Sprintf("%c%02d%c%03d", ns, lat, ew, lon)
	version := map[int]string{2020: "v100", 2021: "v200"}[cfg.WorldCoverYear]
	return fmt.Sprintf("ESA_WorldCover_10m_%d_%s_%s", cfg.WorldCoverYear, version, tile), tile
}

func wcItem(cfg Config, geo *geometry) *stac.Item {
	id, tile := wcItemID(cfg, geo)
	b := geo.label.Bounds()
	ring := [][2]float64{{b[0], b[3]}, {b[2], b[3]}, {b[2], b[1]}, {b[0], b[1]}}
	var classes []stacext.Class
	for _, c := range landcover.WorldCover.Classes {
		classes = append(classes, stacext.Class{
			Value: int(c.Code), Description: c.Name,
			ColorHint: fmt.Sprintf("%02X%02X%02X", c.Color.R, c.Color.G, c.Color.B),
		})
	}
	year := cfg.WorldCoverYear
	item := &stac.Item{
		Version:    stacVersion,
		Id:         id,
		Collection: wcCollection,
		Geometry:   polygon(ring),
		Bbox:       bboxOf(ring),
		Properties: map[string]any{
			"datetime":                       nil,
			"start_datetime":                 fmt.Sprintf("%d-01-01T00:00:00Z", year),
			"end_datetime":                   fmt.Sprintf("%d-12-31T23:59:59Z", year),
			"description":                    "Synthetic ESA WorldCover-like land cover at 10m, generated by lulc synth",
			"esa_worldcover:product_tile":    tile,
			"esa_worldcover:product_version": map[int]string{2020: "1.0.0", 2021: "2.0.0"}[year],
			"grid:code":                      "ESAWORLDCOVER-" + tile,
			"instruments":                    []string{"c-sar", "msi"},
			"lulc:synthetic":                 true,
			"lulc:seed":                      cfg.Seed,
			"lulc:label_noise":               cfg.LabelNoise,
		},
		Assets: map[string]*stac.Asset{"map": {
			Href:        "./" + id + "_Map.tif",
			Type:        cogType,
			Title:       "Land Cover Classes",
			Description: "Discrete classification according to the ESA WorldCover legend",
			Roles:       []string{"data"},
			Extensions: []stac.Extension{
				gridFields(geo.label),
				&raster.Asset{Bands: []*raster.Band{{
					NoData: 0, DataType: "uint8", Sampling: "area", SpatialResolution: ptr(10.0),
				}}},
				&stacext.ClassificationAsset{Classes: classes},
			},
		}},
		Links:      itemLinks(),
		Extensions: []stac.Extension{&stacext.ProjectionItem{EPSG: wcEPSG}},
	}
	if cfg.LabelPoints > 0 {
		item.Assets["points"] = &stac.Asset{
			Href:  "./" + pointsFile(id),
			Type:  "application/geopackage+sqlite3",
			Title: "Labelled points",
			Description: fmt.Sprintf("%d points sampled from the map (EPSG:4326): layer %s, class code in field %s",
				cfg.LabelPoints, PointsLayer, PointsField),
			Roles: []string{"labels"},
		}
	}
	return item
}

func collection(id, title, desc string, bbox []float64, start, end *time.Time, itemIDs []string) *stac.Collection {
	interval := []any{nil, nil}
	if start != nil {
		interval[0] = start.UTC().Format(time.RFC3339)
	}
	if end != nil {
		interval[1] = end.UTC().Format(time.RFC3339)
	}
	links := []*stac.Link{
		{Rel: "root", Href: "../catalog.json", Type: jsonType},
		{Rel: "parent", Href: "../catalog.json", Type: jsonType},
	}
	for _, item := range itemIDs {
		links = append(links, &stac.Link{Rel: "item", Href: "./" + item + "/" + item + ".json", Type: geoJSONType})
	}
	return &stac.Collection{
		Version:     stacVersion,
		Id:          id,
		Title:       title,
		Description: desc,
		License:     "CC0-1.0",
		Extent: &stac.Extent{
			Spatial:  &stac.SpatialExtent{Bbox: [][]float64{bbox}},
			Temporal: &stac.TemporalExtent{Interval: [][]any{interval}},
		},
		Links: links,
	}
}

func catalog(cfg Config) *stac.Catalog {
	c := &stac.Catalog{
		Version:     stacVersion,
		Id:          "lulc-synth-" + cfg.Tile,
		Title:       "lulc synthetic scene " + cfg.Tile,
		Description: fmt.Sprintf("Synthetic Sentinel-2 L2A acquisitions and WorldCover-like labels over tile %s, generated by lulc synth with seed %d. Not real data.", cfg.Tile, cfg.Seed),
		Links: []*stac.Link{
			{Rel: "root", Href: "./catalog.json", Type: jsonType},
			{Rel: "child", Href: "./" + s2Collection + "/collection.json", Type: jsonType},
			{Rel: "child", Href: "./" + wcCollection + "/collection.json", Type: jsonType},
		},
	}
	if cfg.DEM {
		c.Links = append(c.Links, &stac.Link{Rel: "child", Href: "./" + demCollection + "/collection.json", Type: jsonType})
	}
	if len(cfg.Sentinel1) > 0 {
		c.Links = append(c.Links, &stac.Link{Rel: "child", Href: "./" + s1Collection + "/collection.json", Type: jsonType})
	}
	return c
}
