package synth

import (
	"fmt"
	"math"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
)

// WorldCover's grid: EPSG:4326 at 1/12000° (about 8.3e-5°, 10 m at the
// equator).
const (
	wcEPSG = 4326
	wcRes  = 1.0 / 12000
)

// geometry ties the scene's UTM grid to geographic coordinates.
type geometry struct {
	utm       geo.Grid // the 10 m grid
	footprint [][2]float64
	lonLat    [4]float64 // bbox of the scene in degrees
	label     geo.Grid
	// label pixel → scene (u, v): exact at nodes every nodeStep pixels,
	// bilinear in between (the projection is smooth at that scale: the
	// error is far below a millimetre).
	nodeStep     int
	nodesX       int
	nodeU, nodeV []float64
	labelUV      [4]float64 // bbox of the label grid in scene coordinates
	centerLat    float64
}

const nodeStep = 64

func newGeometry(cfg Config) (*geometry, error) {
	ext := float64(cfg.Size) * 10
	x0, y0 := cfg.Origin[0], cfg.Origin[1]
	g := &geometry{utm: geo.Grid{
		EPSG: cfg.EPSG, Width: cfg.Size, Height: cfg.Size,
		Transform: [6]float64{x0, 10, 0, y0, 0, -10},
	}}
	toGeo, err := raster.NewTransformer(cfg.EPSG, wcEPSG)
	if err != nil {
		return nil, err
	}
	defer toGeo.Close()

	// The boundary, densified, gives a tight geographic bbox.
	const per = 32
	var xs, ys []float64
	for k := range per {
		t := float64(k) / per * ext
		xs = append(xs, x0+t, x0+ext, x0+ext-t, x0)
		ys = append(ys, y0, y0-t, y0-ext, y0-ext+t)
	}
	if err := toGeo.Transform(xs, ys); err != nil {
		return nil, fmt.Errorf("scene footprint: %w", err)
	}
	g.lonLat = [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for i := range xs {
		g.lonLat[0] = min(g.lonLat[0], xs[i])
		g.lonLat[1] = min(g.lonLat[1], ys[i])
		g.lonLat[2] = max(g.lonLat[2], xs[i])
		g.lonLat[3] = max(g.lonLat[3], ys[i])
	}
	g.centerLat = (g.lonLat[1] + g.lonLat[3]) / 2

	// The label grid snaps outward to WorldCover's 1/12000° lattice.
	lon0 := math.Floor(g.lonLat[0]/wcRes) * wcRes
	lat1 := math.Ceil(g.lonLat[3]/wcRes) * wcRes
	w := int(math.Ceil((g.lonLat[2]-lon0)/wcRes - 1e-9))
	h := int(math.Ceil((lat1-g.lonLat[1])/wcRes - 1e-9))
	g.label = geo.Grid{EPSG: wcEPSG, Width: w, Height: h, Transform: [6]float64{lon0, wcRes, 0, lat1, 0, -wcRes}}

	toUTM, err := raster.NewTransformer(wcEPSG, cfg.EPSG)
	if err != nil {
		return nil, err
	}
	defer toUTM.Close()
	g.nodeStep = nodeStep
	g.nodesX = w/nodeStep + 2
	nodesY := h/nodeStep + 2
	lons := make([]float64, 0, g.nodesX*nodesY)
	lats := make([]float64, 0, g.nodesX*nodesY)
	for j := range nodesY {
		for i := range g.nodesX {
			lons = append(lons, lon0+(float64(i*nodeStep)+0.5)*wcRes)
			lats = append(lats, lat1-(float64(j*nodeStep)+0.5)*wcRes)
		}
	}
	if err := toUTM.Transform(lons, lats); err != nil {
		return nil, fmt.Errorf("label grid: %w", err)
	}
	g.nodeU, g.nodeV = lons, lats
	g.labelUV = [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for k := range lons {
		g.nodeU[k] -= x0
		g.nodeV[k] = y0 - g.nodeV[k]
		g.labelUV[0] = min(g.labelUV[0], g.nodeU[k])
		g.labelUV[1] = min(g.labelUV[1], g.nodeV[k])
		g.labelUV[2] = max(g.labelUV[2], g.nodeU[k])
		g.labelUV[3] = max(g.labelUV[3], g.nodeV[k])
	}
	return g, nil
}

// labelUVAt maps the centre of label pixel (row, col) to scene coordinates.
func (g *geometry) labelUVAt(row, col int) (u, v float64) {
	// Exact for whole pixels: nodeStep is a power of two, so uvAt's
	// fractions are the integer remainders' own.
	return g.uvAt(float64(row), float64(col))
}

// labels renders the WorldCover-like map: the true class at each label
// pixel centre, with label noise in small blobs and in scattered pixels.
func (s *scene) labels(g *geometry, progress func(rows int)) []uint8 {
	w, h := g.label.Width, g.label.Height
	out := make([]uint8, w*h)
	pixelNoise := s.cfg.LabelNoise / 3
	parallelRows(h, func(row int) {
		for col := range w {
			u, v := g.labelUVAt(row, col)
			c := s.classAt(u, v)
			alt := s.confusion[c]
			switch {
			case s.blob.at(u, v) > s.blobThr:
				c = alt[0]
			case unit(hash2(s.seed+seedLabel, int64(row), int64(col))) < pixelNoise:
				c = alt[hash2(s.seed+seedLabel+1, int64(row), int64(col))&1]
			}
			out[row*w+col] = c
		}
		if progress != nil {
			progress(1)
		}
	})
	return out
}
