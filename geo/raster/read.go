package raster

import (
	"fmt"
	"math"
	"strings"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/netwait"
)

// GDALPath maps an asset href to the path GDAL opens: http(s) URLs through
// /vsicurl/ (HTTP range requests), s3:// through /vsis3/, gs:// through
// /vsigs/; local paths and /vsi paths are unchanged.
func GDALPath(href string) string {
	switch {
	case strings.HasPrefix(href, "http://"), strings.HasPrefix(href, "https://"):
		return "/vsicurl/" + href
	case strings.HasPrefix(href, "s3://"):
		return "/vsis3/" + strings.TrimPrefix(href, "s3://")
	case strings.HasPrefix(href, "gs://"):
		return "/vsigs/" + strings.TrimPrefix(href, "gs://")
	}
	return href
}

// Remote says whether href is read over a network (HTTP, S3, Google
// Cloud Storage, or a GDAL network path): each of its reads is a round
// trip.
func Remote(href string) bool {
	for _, p := range []string{"http://", "https://", "s3://", "gs://", "/vsicurl/", "/vsis3/", "/vsigs/", "/vsiaz/", "/vsiadls/", "/vsioss/", "/vsiswift/", "/vsiwebhdfs/"} {
		if strings.HasPrefix(href, p) {
			return true
		}
	}
	return false
}

// Source is band 1 of an opened raster, read in windows. A Source is not
// safe for concurrent use: open one per goroutine.
type Source struct {
	geo.Grid
	Href      string
	BlockSize [2]int
	NoData    *float64
	ds        *godal.Dataset
	dtype     godal.DataType
	// toSource maps EPSG:toSourceFrom into the source's CRS, for
	// reprojecting class rasters; made on first use.
	toSource     *Transformer
	toSourceFrom int
}

// Open opens the raster at href (see GDALPath) and reads its grid.
func Open(href string) (*Source, error) { return OpenKnownCRS(href, 0) }

// OpenKnownCRS is Open for a raster whose EPSG code the caller already
// read through an earlier Open of the same href (0: not known). GDAL
// builds a GeoTIFF's spatial reference from its keys and the PROJ
// database on every open, which costs milliseconds of CPU; a tile's
// workers open each source once apiece, and skipping it saved about 4
// CPU-seconds per full tile.
func OpenKnownCRS(href string, epsg int) (*Source, error) {
	register()
	defer netwait.Track(href)()
	ds, err := godal.Open(GDALPath(href))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", href, err)
	}
	s := &Source{Href: href, ds: ds}
	st := ds.Structure()
	if st.NBands < 1 {
		ds.Close()
		return nil, fmt.Errorf("open %s: no raster bands", href)
	}
	s.Width, s.Height = st.SizeX, st.SizeY
	if s.Transform, err = ds.GeoTransform(); err != nil {
		ds.Close()
		return nil, fmt.Errorf("open %s: no geotransform: %w", href, err)
	}
	if s.Transform[2] != 0 || s.Transform[4] != 0 {
		ds.Close()
		return nil, fmt.Errorf("open %s: rotated grids are not supported", href)
	}
	if epsg > 0 {
		s.EPSG = epsg
	} else if err := s.readEPSG(); err != nil {
		ds.Close()
		return nil, err
	}
	b := ds.Bands()[0]
	bs := b.Structure()
	s.BlockSize = [2]int{bs.BlockSizeX, bs.BlockSizeY}
	s.dtype = bs.DataType
	if nd, ok := b.NoData(); ok {
		s.NoData = &nd
	}
	return s, nil
}

// Close releases the dataset.
func (s *Source) Close() error {
	if s.toSource != nil {
		s.toSource.Close()
	}
	return s.ds.Close()
}

// readEPSG reads the dataset's CRS, which must have an EPSG code.
func (s *Source) readEPSG() error {
	sr := s.ds.SpatialRef()
	if sr == nil {
		return fmt.Errorf("open %s: no CRS", s.Href)
	}
	code := sr.AuthorityCode("")
	sr.Close()
	if _, err := fmt.Sscan(code, &s.EPSG); err != nil {
		return fmt.Errorf("open %s: CRS has no EPSG code, which lulc needs", s.Href)
	}
	return nil
}

// Resampling names accepted by Read.
var resamplings = map[string]godal.ResamplingAlg{
	"nearest": godal.Nearest, "bilinear": godal.Bilinear, "cubic": godal.Cubic, "mode": godal.Mode,
	"average": godal.Average,
}

// Read fills buf (len dst.Width×dst.Height, []uint8, []uint16 or
// []float32) with band 1 resampled onto the grid dst, using alg (nearest,
// bilinear, cubic, mode, average). Pixels outside the source get the
// source's nodata (0 if it has none).
//
// When dst has the source's CRS and each source pixel covers a whole number
// of dst pixels at an integer offset (Sentinel-2's 10/20/60 m grids), this
// is a single windowed RasterIO with GDAL's resampling: no warper. Other
// grids take lulc's own rule for class rasters (uint8 with nearest or
// mode: package classrule), and GDAL's warper into an in-memory
// dataset for the rest.
func (s *Source) Read(dst geo.Grid, alg string, buf any) error {
	ra, ok := resamplings[alg]
	if !ok {
		return fmt.Errorf("read %s: unknown resampling %q", s.Href, alg)
	}
	if n := bufLen(buf); n != dst.Width*dst.Height {
		return fmt.Errorf("read %s: buffer of %d pixels for a %d×%d window", s.Href, n, dst.Width, dst.Height)
	}
	defer netwait.Track(s.Href)()
	if x, y, w, h, ok := s.nested(dst); ok {
		if err := s.ds.Bands()[0].Read(x, y, buf, dst.Width, dst.Height, godal.Window(w, h), godal.Resampling(ra)); err != nil {
			return fmt.Errorf("read %s: %w", s.Href, err)
		}
		return nil
	}
	if classRule(buf, alg) {
		return s.reprojectClasses(dst, alg, buf.([]uint8))
	}
	return s.warp(dst, alg, buf)
}

// nested returns the source window matching dst when dst is aligned inside
// the source at an integer zoom factor.
func (s *Source) nested(dst geo.Grid) (x, y, w, h int, ok bool) {
	if dst.EPSG != s.EPSG {
		return 0, 0, 0, 0, false
	}
	fx := s.Transform[1] / dst.Transform[1]
	fy := s.Transform[5] / dst.Transform[5]
	k := int(math.Round(fx))
	if k < 1 || math.Abs(fx-float64(k)) > 1e-9 || math.Abs(fy-float64(k)) > 1e-9 || dst.Width%k != 0 || dst.Height%k != 0 {
		return 0, 0, 0, 0, false
	}
	ox := (dst.Transform[0] - s.Transform[0]) / s.Transform[1]
	oy := (dst.Transform[3] - s.Transform[3]) / s.Transform[5]
	x, y = int(math.Round(ox)), int(math.Round(oy))
	if math.Abs(ox-float64(x)) > 1e-6 || math.Abs(oy-float64(y)) > 1e-6 {
		return 0, 0, 0, 0, false
	}
	w, h = dst.Width/k, dst.Height/k
	if x < 0 || y < 0 || x+w > s.Width || y+h > s.Height {
		return 0, 0, 0, 0, false
	}
	return x, y, w, h, true
}

func (s *Source) warp(dst geo.Grid, alg string, buf any) error {
	ot := map[string]string{"uint8": "Byte", "uint16": "UInt16", "float32": "Float32"}[bufType(buf)]
	nodata := 0.0
	if s.NoData != nil {
		nodata = *s.NoData
	}
	return warpInto(s.ds, s.Href, dst, alg, ot, ftoa(nodata), buf)
}

// warpInto resamples band 1 of ds (read from href, for errors) onto dst
// with GDAL's warper, into an in-memory dataset of type ot whose pixels
// beyond the source are dstNoData, and reads it into buf.
func warpInto(ds *godal.Dataset, href string, dst geo.Grid, alg, ot, dstNoData string, buf any) error {
	b := dst.Bounds()
	sw := []string{
		"-of", "MEM",
		"-t_srs", fmt.Sprintf("EPSG:%d", dst.EPSG),
		"-te", ftoa(b[0]), ftoa(b[1]), ftoa(b[2]), ftoa(b[3]),
		"-ts", fmt.Sprint(dst.Width), fmt.Sprint(dst.Height),
		"-r", alg,
		"-ot", ot,
		"-dstnodata", dstNoData,
	}
	out, err := ds.Warp("", sw)
	if err != nil {
		return fmt.Errorf("warp %s: %w", href, err)
	}
	defer out.Close()
	if err := out.Bands()[0].Read(0, 0, buf, dst.Width, dst.Height); err != nil {
		return fmt.Errorf("warp %s: %w", href, err)
	}
	return nil
}

func ftoa(v float64) string { return fmt.Sprintf("%.10f", v) }

func bufLen(buf any) int {
	switch b := buf.(type) {
	case []uint8:
		return len(b)
	case []uint16:
		return len(b)
	case []float32:
		return len(b)
	}
	return -1
}

func bufType(buf any) string {
	switch buf.(type) {
	case []uint8:
		return "uint8"
	case []uint16:
		return "uint16"
	case []float32:
		return "float32"
	}
	return ""
}

// ReadBandWindowInto reads a window of band (1-based) of an open source
// without resampling.
func ReadBandWindowInto(s *Source, band, x, y, w, h int, buf any) error {
	bands := s.ds.Bands()
	if band < 1 || band > len(bands) {
		return fmt.Errorf("%s has no band %d", s.Href, band)
	}
	defer netwait.Track(s.Href)()
	if err := bands[band-1].Read(x, y, buf, w, h); err != nil {
		return fmt.Errorf("read %s band %d: %w", s.Href, band, err)
	}
	return nil
}
