package raster

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/netwait"
)

// LayerSource is one band of one raster, or of a mosaic of rasters on one
// CRS (tiles of a DEM), read as a layer: float values, missing where the
// rasters have no data.
type LayerSource struct {
	Hrefs []string
	Band  int // 1-based
	// NoData, when set, is the rasters' missing value in place of their
	// own (a file that declares none).
	NoData *float64
}

// LayerInfo describes a layer's rasters as read: their CRS and bounds
// (for an error that names the overlap), their data type and nodata.
type LayerInfo struct {
	EPSG     int
	Bounds   [4]float64 // minx, miny, maxx, maxy in EPSG units
	DataType string
	NoData   *float64
}

var vrtSeq atomic.Int64

// openLayer builds the in-memory mosaic of the source's band (a VRT).
func openLayer(s LayerSource) (*godal.Dataset, string, error) {
	register()
	if len(s.Hrefs) == 0 {
		return nil, "", fmt.Errorf("layer: no rasters")
	}
	paths := make([]string, len(s.Hrefs))
	for i, h := range s.Hrefs {
		paths[i] = GDALPath(h)
	}
	sw := []string{"-b", fmt.Sprint(max(1, s.Band))}
	if s.NoData != nil {
		sw = append(sw, "-srcnodata", ftoa(*s.NoData), "-vrtnodata", ftoa(*s.NoData))
	}
	name := fmt.Sprintf("/vsimem/lulc-layer-%d.vrt", vrtSeq.Add(1))
	ds, err := godal.BuildVRT(name, paths, sw)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", s.Hrefs[0], err)
	}
	return ds, name, nil
}

// DescribeLayer reads the source's CRS, bounds, type and nodata.
func DescribeLayer(s LayerSource) (LayerInfo, error) {
	l, err := OpenLayer(s)
	if err != nil {
		return LayerInfo{}, err
	}
	defer l.Close()
	return l.Info(), nil
}

func describeLayer(ds *godal.Dataset, s LayerSource) (LayerInfo, error) {
	var info LayerInfo
	st := ds.Structure()
	gt, err := ds.GeoTransform()
	if err != nil {
		return info, fmt.Errorf("%s: no geotransform: %w", s.Hrefs[0], err)
	}
	src := &Source{Href: s.Hrefs[0], ds: ds}
	if err := src.readEPSG(); err != nil {
		return info, err
	}
	info.EPSG = src.EPSG
	x0, y0 := gt[0], gt[3]
	x1, y1 := x0+gt[1]*float64(st.SizeX), y0+gt[5]*float64(st.SizeY)
	info.Bounds = [4]float64{min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)}
	b := ds.Bands()[0]
	info.DataType = b.Structure().DataType.String()
	if nd, ok := b.NoData(); ok {
		info.NoData = &nd
	}
	return info, nil
}

// LayerStats returns the source's minimum and maximum (GDAL's statistics,
// approximate where the rasters have overviews).
func LayerStats(s LayerSource) (lo, hi float64, err error) {
	l, err := OpenLayer(s)
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	st, err := l.ds.Bands()[0].ComputeStatistics(godal.Approximate())
	if err != nil {
		return 0, 0, fmt.Errorf("statistics of %s: %w", s.Hrefs[0], err)
	}
	return st.Min, st.Max, nil
}

// Layer is an open LayerSource: one handle, for one goroutine, that reads
// grids of any size (ingest's strips of a tile) without opening the
// rasters again.
type Layer struct {
	src  LayerSource
	ds   *godal.Dataset
	vrt  string  // the mosaic's in-memory VRT, when there is one
	one  *Source // the raster itself, when the source is one raster's first band
	info LayerInfo
}

// OpenLayer opens a layer source: the raster itself for one raster's
// first band with its own nodata, else an in-memory VRT of the band.
func OpenLayer(s LayerSource) (*Layer, error) {
	l := &Layer{src: s}
	if len(s.Hrefs) == 1 && s.Band <= 1 && s.NoData == nil {
		src, err := Open(s.Hrefs[0])
		if err != nil {
			return nil, err
		}
		l.one, l.ds = src, src.ds
	} else {
		ds, name, err := openLayer(s)
		if err != nil {
			return nil, err
		}
		l.ds, l.vrt = ds, name
	}
	info, err := describeLayer(l.ds, s)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.info = info
	return l, nil
}

// Info describes the layer's rasters.
func (l *Layer) Info() LayerInfo { return l.info }

// Close releases the handle.
func (l *Layer) Close() {
	if l.one != nil {
		l.one.Close()
		return
	}
	l.ds.Close()
	godal.VSIUnlink(l.vrt)
}

// Read resamples the layer onto dst with alg (nearest, bilinear or cubic)
// into buf (dst.Width × dst.Height): NaN where the rasters have no data
// (their nodata, NaN values, or beyond their extent). A raster on dst's
// CRS at a whole zoom of its pixels (a radar scene on the tile's own
// grid) is one windowed read (Source.Read); others go through GDAL's
// warper.
func (l *Layer) Read(dst geo.Grid, alg string, buf []float32) error {
	if len(buf) != dst.Width*dst.Height {
		return fmt.Errorf("layer: buffer of %d pixels for a %d×%d grid", len(buf), dst.Width, dst.Height)
	}
	if _, ok := resamplings[alg]; !ok {
		return fmt.Errorf("layer: unknown resampling %q", alg)
	}
	defer netwait.Track(l.src.Hrefs[0])()
	nested := false
	if l.one != nil {
		_, _, _, _, nested = l.one.nested(dst)
	}
	if nested {
		if err := l.one.Read(dst, alg, buf); err != nil {
			return err
		}
	} else if err := warpInto(l.ds, l.src.Hrefs[0], dst, alg, "Float32", "nan", buf); err != nil {
		return err
	}
	// A source's nodata that came through as a value (bilinear weights
	// of nodata neighbours, a direct read) is missing too.
	if nd := l.info.NoData; nd != nil && !math.IsNaN(*nd) {
		v := float32(*nd)
		for i, x := range buf {
			if x == v {
				buf[i] = float32(math.NaN())
			}
		}
	}
	return nil
}
