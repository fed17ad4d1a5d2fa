package synth

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
)

// YourData asks synth to also lay the scene out as a user's own data
// usually comes, outside any STAC catalog: a folder of multi-band
// GeoTIFFs and a GeoPackage of labelled polygons whose class is text
// (docs/your-data.md walks through them).
type YourData struct {
	// Fields is how many labelled polygons to write: squares of three by
	// three label pixels around points sampled as LabelPoints are.
	Fields int `yaml:"fields"`
}

// Files of the your-data layout, under the output directory.
const (
	YourDataDir   = "your-data"
	FieldsLayer   = "fields"
	FieldsField   = "landcover"
	yourDataFile  = "fields.gpkg"
	elevationName = "elevation"
)

// yourDataBands are the image bands in file order: the 10 m and 20 m
// bands in ESA order, then a layer that is not Sentinel-2's.
var yourDataBands = []int{iB02, iB03, iB04, iB05, iB06, iB07, iB08, iB8A, iB11, iB12}

// everydayNames are the words field data use for WorldCover's classes.
var everydayNames = map[uint8]string{10: "forest", 20: "shrubs", 30: "grass", 40: "crops", 50: "urban",
	60: "bare", 70: "snow", 80: "water", 90: "wetland", 95: "mangroves", 100: "moss"}

// writeYourData writes the first acquisition's bands as two GeoTIFFs (the
// scene's west and east halves, each on its own 10 m grid) with the DNs
// as Sentinel-2 L2A stores them (reflectance × 10000 + 1000) and no
// scale or offset in their metadata, plus a synthetic elevation layer;
// and the labelled squares as a GeoPackage with a text class field, a
// few in capitals and every 40th without a class, as field data come.
func writeYourData(dir string, cfg Config, sc *scene, g *geometry, a *acquisition, labels []uint8) error {
	out := filepath.Join(dir, YourDataDir)
	if err := os.MkdirAll(filepath.Join(out, "images"), 0o755); err != nil {
		return err
	}
	half := cfg.Size / 2
	for i, name := range []string{"west", "east"} {
		grid := g.utm
		grid.Width = half
		grid.Transform[0] += float64(i*half) * 10
		path := filepath.Join(out, "images", fmt.Sprintf("%s_%s.tif", strings.ToLower(cfg.Tile), name))
		if err := writeYourImage(path, grid, i*half, cfg.Size, a); err != nil {
			return err
		}
	}
	pts := sc.samplePoints(g, labels, cfg.YourData.Fields)
	t := g.label.Transform
	dx, dy := 1.5*t[1], 1.5*t[5]
	polys := make([]raster.LabelPolygon, len(pts))
	for i, p := range pts {
		name := everydayNames[p.Class]
		switch {
		case i%40 == 39:
			name = ""
		case i%7 == 3:
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		polys[i] = raster.LabelPolygon{Class: name, Ring: [][2]float64{
			{p.X - dx, p.Y - dy}, {p.X + dx, p.Y - dy}, {p.X + dx, p.Y + dy}, {p.X - dx, p.Y + dy}, {p.X - dx, p.Y - dy}}}
	}
	return raster.WritePolygons(filepath.Join(out, yourDataFile), FieldsLayer, FieldsField, wcEPSG, polys)
}

// writeYourImage writes columns x0… of the acquisition's bands on grid
// (size: the scene's width in 10 m pixels), 20 m bands repeated onto the
// 10 m grid, then the elevation layer.
func writeYourImage(path string, grid geo.Grid, x0, size int, a *acquisition) error {
	infos := make([]raster.BandInfo, len(yourDataBands)+1)
	for i, b := range yourDataBands {
		infos[i].Description = bandNames[b]
	}
	infos[len(yourDataBands)].Description = elevationName
	w, err := raster.NewWriter(path, grid, "uint16", infos, raster.COGOptions{})
	if err != nil {
		return err
	}
	plane := make([]uint16, grid.Width*grid.Height)
	for i, b := range yourDataBands {
		f := 1 // 10 m
		if bands20mSet[b] {
			f = 2
		}
		src, sw := a.dns[b], size/f
		for r := range grid.Height {
			for c := range grid.Width {
				plane[r*grid.Width+c] = src[(r/f)*sw+(x0+c)/f]
			}
		}
		if err := w.Write(i, 0, 0, grid.Width, grid.Height, plane); err != nil {
			w.Abort()
			return err
		}
	}
	// A smooth terrain, in metres: there to be named and left out.
	for r := range grid.Height {
		for c := range grid.Width {
			x, y := float64(x0+c)*10, float64(r)*10
			plane[r*grid.Width+c] = uint16(300 + 80*math.Sin(x/1700) + 50*math.Cos(y/1100))
		}
	}
	if err := w.Write(len(yourDataBands), 0, 0, grid.Width, grid.Height, plane); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// bands20mSet marks the 20 m bands.
var bands20mSet = func() map[int]bool {
	m := map[int]bool{}
	for _, b := range bands20m {
		m[b] = true
	}
	return m
}()
