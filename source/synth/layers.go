package synth

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/planetlabs/go-stac"
	"github.com/planetlabs/go-stac/extensions/raster/v1"

	"github.com/lulc/lulc/geo"
	lraster "github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/source/stacext"
)

// The scene's other layers, shaped like the collections real land-cover
// stacks add to Sentinel-2 (docs/synth.md, "Elevation and radar"):
// Copernicus DEM GLO-30 (elevation in metres, EPSG:4326 at one arcsecond,
// Float32, one asset "data") and Sentinel-1 RTC (gamma0 backscatter as
// linear power, Float32 COGs "vv" and "vh" on the scene's UTM grid at
// 10 m, nodata −32768), as Planetary Computer's cop-dem-glo-30 and
// sentinel-1-rtc serve them. Both are pure functions of the seed and the
// ground position (and, for radar, the date), like the optical bands, and
// tied to the same landscape: the elevation is the field that places
// water in lows and snow on highs, and the backscatter follows each
// pixel's class, brightness and greenness.

const (
	demCollection = "cop-dem-glo-30"
	s1Collection  = "sentinel-1-rtc"
	// demRes is GLO-30's pixel: one arcsecond.
	demRes = 1.0 / 3600
	// S1NoData is the nodata value of the backscatter COGs.
	S1NoData = -32768
	// s1Looks is the equivalent number of looks of the speckle (Sentinel-1
	// IW GRD high resolution: about 4.4; 4 keeps the gamma draw a sum of
	// four exponentials).
	s1Looks = 4
)

// RadarDate is one Sentinel-1 acquisition over the scene.
type RadarDate struct {
	Datetime time.Time `yaml:"datetime"`
	Platform string    `yaml:"platform"` // sentinel-1a, sentinel-1b or sentinel-1c
	// OrbitState is ascending or descending.
	OrbitState string `yaml:"orbit_state"`
}

// itemID names the acquisition's item as Planetary Computer names RTC
// items: the GRD product's name with _rtc, here with the tile for the
// product's unique part.
func (d RadarDate) itemID(tile string) string {
	return fmt.Sprintf("%s_IW_GRDH_1SDV_%s_%s_rtc", strings.ToUpper(strings.Replace(d.Platform, "sentinel-", "S", 1)),
		d.Datetime.UTC().Format("20060102T150405"), tile)
}

// validateLayers checks the dem and sentinel1 keys.
func (c Config) validateLayers() error {
	seen := map[string]bool{}
	for i, d := range c.Sentinel1 {
		if d.Datetime.IsZero() {
			return fmt.Errorf("sentinel1[%d]: datetime missing", i)
		}
		if !slices.Contains([]string{"sentinel-1a", "sentinel-1b", "sentinel-1c"}, d.Platform) {
			return fmt.Errorf("sentinel1[%d]: platform %q is not sentinel-1a, sentinel-1b or sentinel-1c", i, d.Platform)
		}
		if d.OrbitState != "ascending" && d.OrbitState != "descending" {
			return fmt.Errorf("sentinel1[%d]: orbit_state %q is not ascending or descending", i, d.OrbitState)
		}
		id := d.itemID(c.Tile)
		if seen[id] {
			return fmt.Errorf("sentinel1[%d]: a second acquisition at %s", i, d.Datetime.UTC().Format(time.RFC3339))
		}
		seen[id] = true
	}
	return nil
}

// elevation is the ground's height in metres at (u, v): the landscape's
// elevation driver (the one makeCell weighs classes by) with relief of a
// few hundred metres and detail at the scale of slopes, flat over water.
func (s *scene) elevation(u, v float64) float64 {
	k := s.cellAt(u, v)
	if s.cells[k].class == 80 {
		c := &s.cells[k]
		return 350 + 900*fbm(s.seed+seedElev, c.su, c.sv, 9*s.size, 3)
	}
	e := fbm(s.seed+seedElev, u, v, 9*s.size, 3)
	return 350 + 900*e + 40*fbm(s.seed+seedDEM, u, v, 600, 4)
}

// demGrid is the elevation raster's grid: GLO-30's one-arcsecond lattice,
// covering the label grid (whose lattice of scene coordinates maps its
// pixels; those beyond it take its edge's), so that the elevation covers
// every pixel the labels do.
func demGrid(g *geometry) geo.Grid {
	b := g.label.Bounds()
	lon0 := math.Floor(b[0]/demRes+1e-9) * demRes
	lat1 := math.Ceil(b[3]/demRes-1e-9) * demRes
	w := int(math.Ceil((b[2]-lon0)/demRes - 1e-9))
	h := int(math.Ceil((lat1-b[1])/demRes - 1e-9))
	return geo.Grid{EPSG: wcEPSG, Width: w, Height: h, Transform: [6]float64{lon0, demRes, 0, lat1, 0, -demRes}}
}

// uvAt maps a point of the label grid, in fractional pixels (the centre of
// pixel (0, 0) at (0, 0)), to scene coordinates, as labelUVAt does for
// whole pixels.
func (g *geometry) uvAt(row, col float64) (u, v float64) {
	row = max(0, min(row, float64(g.label.Height-1)))
	col = max(0, min(col, float64(g.label.Width-1)))
	fj, fi := row/float64(g.nodeStep), col/float64(g.nodeStep)
	j, i := int(fj), int(fi)
	ty, tx := fj-float64(j), fi-float64(i)
	k := j*g.nodesX + i
	lerp := func(a []float64) float64 {
		top := a[k] + tx*(a[k+1]-a[k])
		bot := a[k+g.nodesX] + tx*(a[k+g.nodesX+1]-a[k+g.nodesX])
		return top + ty*(bot-top)
	}
	return lerp(g.nodeU), lerp(g.nodeV)
}

// dem renders the elevation raster on grid (demGrid's).
func (s *scene) dem(g *geometry, grid geo.Grid) []float32 {
	out := make([]float32, grid.Width*grid.Height)
	lb := g.label.Bounds()
	parallelRows(grid.Height, func(row int) {
		lat := grid.Transform[3] - (float64(row)+0.5)*demRes
		lr := (lb[3]-lat)/wcRes - 0.5
		for col := range grid.Width {
			lon := grid.Transform[0] + (float64(col)+0.5)*demRes
			u, v := g.uvAt(lr, (lon-lb[0])/wcRes-0.5)
			out[row*grid.Width+col] = float32(s.elevation(u, v))
		}
	})
	return out
}

// Mean gamma0 backscatter of each class in dB (VV, VH) without
// vegetation; VH rises with greenness (volume scattering) by radarGreen dB
// at full cover. Orders of magnitude as C-band studies of land cover
// report them: water darkest, built-up brightest, forest high in VH.
var radarDB = map[uint8][2]float64{
	10: {-7.5, -13.5}, 20: {-9.5, -16.5}, 30: {-10.5, -18}, 40: {-11, -19},
	50: {-4, -11}, 60: {-13, -22}, 70: {-14, -21}, 80: {-21, -28},
	90: {-12, -19}, 95: {-7, -13}, 100: {-11.5, -19.5},
}

const radarGreen = 4.0

// backscatter renders one acquisition's VV and VH gamma0 as linear power
// on the scene's 10 m grid: each pixel's class mean, shifted by its
// patch's brightness and, for VH, its greenness on the day, times a
// speckle of s1Looks looks (the mean of that many unit exponentials).
func (s *scene) backscatter(d RadarDate, lat float64) (vv, vh []float32) {
	n := s.cfg.Size
	vv, vh = make([]float32, n*n), make([]float32, n*n)
	t := phenDay(float64(d.Datetime.UTC().YearDay()), lat)
	parallelRows(n, func(r int) {
		v := (float64(r) + 0.5) * 10
		for c := range n {
			u := (float64(c) + 0.5) * 10
			sf := s.surfaceAt(u, v)
			_, green := surfaceSpectrum(&sf, t)
			db := radarDB[sf.class]
			shift := 10 * math.Log10(float64(sf.bright))
			h := hash(s.seed+seedRadar, d.Datetime.Unix(), int64(r), int64(c))
			vv[r*n+c] = float32(math.Pow(10, (db[0]+shift)/10) * speckle(h))
			vh[r*n+c] = float32(math.Pow(10, (db[1]+shift+radarGreen*green)/10) * speckle(mix(h)))
		}
	})
	return vv, vh
}

// speckle is a gamma draw of mean 1 and s1Looks looks, from hash h.
func speckle(h uint64) float64 {
	sum := 0.0
	for k := range s1Looks {
		sum -= math.Log(1 - unit(mix(h+uint64(k))))
	}
	return sum / s1Looks
}

// demItemID names the elevation tile as GLO-30 names its 1° tiles, by the
// latitude and longitude of its lower-left corner.
func demItemID(grid geo.Grid) string {
	b := grid.Bounds()
	lat, lon := int(math.Floor(b[1])), int(math.Floor(b[0]))
	ns, ew := "N", "E"
	if lat < 0 {
		ns, lat = "S", -lat
	}
	if lon < 0 {
		ew, lon = "W", -lon
	}
	return fmt.Sprintf("Copernicus_DSM_COG_10_%s%02d_00_%s%03d_00_DEM", ns, lat, ew, lon)
}

// itemLinks are an item's links to its catalog and collection.
func itemLinks() []*stac.Link {
	return []*stac.Link{
		{Rel: "root", Href: "../../catalog.json", Type: jsonType},
		{Rel: "parent", Href: "../collection.json", Type: jsonType},
		{Rel: "collection", Href: "../collection.json", Type: jsonType},
	}
}

// demItem is the elevation tile's STAC item.
func demItem(cfg Config, grid geo.Grid) *stac.Item {
	b := grid.Bounds()
	ring := [][2]float64{{b[0], b[3]}, {b[2], b[3]}, {b[2], b[1]}, {b[0], b[1]}}
	id := demItemID(grid)
	return &stac.Item{
		Version:    stacVersion,
		Id:         id,
		Collection: demCollection,
		Geometry:   polygon(ring),
		Bbox:       bboxOf(ring),
		Properties: map[string]any{
			"datetime":       nil,
			"start_datetime": "2021-04-22T00:00:00Z",
			"end_datetime":   "2021-04-22T00:00:00Z",
			"platform":       "tandem-x",
			"gsd":            30,
			"lulc:synthetic": true,
			"lulc:seed":      cfg.Seed,
		},
		Assets: map[string]*stac.Asset{"data": {
			Href:  "./" + id + ".tif",
			Type:  cogType,
			Title: "Elevation (synthetic)",
			Roles: []string{"data"},
			Extensions: []stac.Extension{
				gridFields(grid),
				&raster.Asset{Bands: []*raster.Band{{
					DataType: "float32", Sampling: "area", SpatialResolution: ptr(30.0), Unit: "metre",
				}}},
			},
		}},
		Links:      itemLinks(),
		Extensions: []stac.Extension{&stacext.ProjectionItem{EPSG: wcEPSG}},
	}
}

// s1Item is one radar acquisition's STAC item: the scene's bounding box,
// its two polarisations as assets.
func s1Item(cfg Config, d RadarDate, g *geometry) *stac.Item {
	b := g.lonLat
	ring := [][2]float64{{b[0], b[3]}, {b[2], b[3]}, {b[2], b[1]}, {b[0], b[1]}}
	titles := map[string]string{"vv": "VV: vertical transmit, vertical receive", "vh": "VH: vertical transmit, horizontal receive"}
	assets := map[string]*stac.Asset{}
	for _, pol := range []string{"vv", "vh"} {
		assets[pol] = &stac.Asset{
			Href:        "./" + strings.ToUpper(pol) + ".tif",
			Type:        cogType,
			Title:       titles[pol],
			Description: "Terrain-corrected gamma naught values of signal transmitted with " + pol[:1] + " polarization and received with " + pol[1:] + " polarization, as linear power (synthetic).",
			Roles:       []string{"data"},
			Extensions: []stac.Extension{
				gridFields(g.utm),
				&raster.Asset{Bands: []*raster.Band{{
					NoData: S1NoData, DataType: "float32", Sampling: "area", SpatialResolution: ptr(10.0),
				}}},
			},
		}
	}
	when := d.Datetime.UTC().Format("2006-01-02T15:04:05.000000Z")
	return &stac.Item{
		Version:    stacVersion,
		Id:         d.itemID(cfg.Tile),
		Collection: s1Collection,
		Geometry:   polygon(ring),
		Bbox:       bboxOf(ring),
		Properties: map[string]any{
			"datetime":       when,
			"platform":       strings.Replace(d.Platform, "sentinel", "SENTINEL", 1),
			"constellation":  "Sentinel-1",
			"lulc:synthetic": true,
			"lulc:seed":      cfg.Seed,
		},
		Assets: assets,
		Links:  itemLinks(),
		Extensions: []stac.Extension{
			&stacext.SARItem{InstrumentMode: "IW", FrequencyBand: "C", CenterFrequency: 5.405, Polarizations: []string{"VV", "VH"}, ProductType: "GRD"},
			&stacext.SatItem{OrbitState: d.OrbitState},
			&stacext.ProjectionItem{EPSG: cfg.EPSG},
		},
	}
}

// writeLayers writes the elevation tile and the radar acquisitions the
// config asks for, each item after its rasters (so that an item marks a
// finished acquisition, as for Sentinel-2), skipping those a resumed run
// finished. It returns how many files it wrote.
func writeLayers(stage *atomicfs.Stage, cfg Config, sc *scene, g *geometry) (int, error) {
	files := 0
	opt := lraster.COGOptions{BlockSize: cfg.BlockSize, Compress: cfg.Compress, OverviewResampling: "AVERAGE"}
	if cfg.DEM {
		grid := demGrid(g)
		id := demItemID(grid)
		if !atomicfs.Exists(stage.Path(demCollection, id, id+".json")) {
			o := opt
			o.Description = "elevation"
			if err := writeFloat32(stage.Path(demCollection, id, id+".tif"), grid, sc.dem(g, grid), o); err != nil {
				return files, err
			}
			if err := writeJSON(stage.Path(demCollection, id, id+".json"), demItem(cfg, grid)); err != nil {
				return files, err
			}
			files += 2
		}
	}
	for _, d := range cfg.Sentinel1 {
		id := d.itemID(cfg.Tile)
		if atomicfs.Exists(stage.Path(s1Collection, id, id+".json")) {
			continue
		}
		vv, vh := sc.backscatter(d, g.centerLat)
		o := opt
		o.NoData = ptr(float64(S1NoData))
		for _, p := range []struct {
			name string
			data []float32
		}{{"VV", vv}, {"VH", vh}} {
			o.Description = p.name
			if err := writeFloat32(stage.Path(s1Collection, id, p.name+".tif"), g.utm, p.data, o); err != nil {
				return files, err
			}
		}
		if err := writeJSON(stage.Path(s1Collection, id, id+".json"), s1Item(cfg, d, g)); err != nil {
			return files, err
		}
		files += 3
	}
	return files, nil
}

// writeFloat32 writes one Float32 band as a COG (GDAL's driver encodes
// Float32: lulc's encoder writes integers).
func writeFloat32(path string, grid geo.Grid, data []float32, opt lraster.COGOptions) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	w, err := lraster.NewWriter(path, grid, "float32", []lraster.BandInfo{{Description: opt.Description}}, opt)
	if err != nil {
		return err
	}
	if err := w.Write(0, 0, 0, grid.Width, grid.Height, data); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
