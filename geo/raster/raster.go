// Package raster is lulc's only door to GDAL: it opens, reads, transforms and
// writes rasters through github.com/airbusgeo/godal, and hands the rest of
// lulc plain Go values (slices, geo.Grid, small structs). The COGs it
// writes are encoded by lulc's own encoder, package cog, with the GeoKeys
// GDAL gives for their CRS, wherever cog supports their options, and by
// GDAL's COG driver otherwise. No other package imports godal; those that
// read or write rasters through this one need cgo with it, and the rest
// build without (docs/architecture.md).
package raster

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/airbusgeo/godal"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/atomicfs"

	"github.com/lulc/lulc/internal/netwait"
)

var registerOnce sync.Once

func register() { registerOnce.Do(godal.RegisterAll) }

// GDALVersion returns the version of the GDAL library lulc is linked with.
func GDALVersion() string {
	v := godal.Version()
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Revision())
}

// Pixels is the element type of a single-band raster lulc writes.
type Pixels interface{ ~uint8 | ~uint16 }

// COGOptions says how WriteCOG and Writer lay out a Cloud-Optimized
// GeoTIFF.
//
// lulc's Go encoder (package cog) writes the file when it supports the
// options: DEFLATE, ZSTD or NONE compression, NEAREST, AVERAGE or MODE
// overviews, one or more UInt8 or UInt16 bands on a north-up grid (see
// cog.NewPlan for the rest); GDAL's COG driver writes it otherwise. The Go
// encoder makes the files GDAL's driver makes, but for the compressed bytes
// (lower compression levels) and the overview pixels, which follow the
// rule of cog.Options.
type COGOptions struct {
	BlockSize int // internal tile size: 256, 512 or 1024
	// GDALDriver writes the file with GDAL's COG driver even where lulc's
	// encoder could (for comparing both).
	GDALDriver         bool
	Compress           string // DEFLATE, ZSTD, LZW or NONE
	Predictor          bool   // horizontal differencing before compression
	OverviewResampling string // AVERAGE, NEAREST, MODE, …
	OverviewCount      int    // 0: GDAL's default (down to one block)
	Threads            int    // compression threads; 0 uses all CPUs
	NoData             *float64
	Description        string            // band description
	Metadata           map[string]string // dataset metadata items
	Classes            *landcover.Scheme // colour table and category names
	// EncodeEarly has a Writer with lulc's encoder compress tiles while
	// later windows are still being made, and take the file's checksum as
	// Close writes it (Writer.Sum): cog.Options.EncodeEarly. The file's
	// bytes are the same either way.
	EncodeEarly bool
	// EarlyThreads is how many threads compress while the windows are
	// written, when fewer than Threads (cog.Options.EarlyThreads); 0 is
	// Threads.
	EarlyThreads int
}

// WriteCOG writes a single-band raster as a COG at path, with lulc's Go
// encoder when it supports the options (see cog.NewPlan) and GDAL's COG
// driver otherwise. It writes to a
// temporary file beside path and renames it when complete, so path either
// does not exist or holds a whole file. With Classes set it also writes the
// colour table into the COG and the category names into the GDAL sidecar
// path+".aux.xml" (GeoTIFF has no tag for category names; GDAL, QGIS and
// rasterio read them from there).
func WriteCOG[T Pixels](path string, g geo.Grid, data []T, opt COGOptions) error {
	register()
	if len(data) != g.Width*g.Height {
		return fmt.Errorf("write %s: %d pixels for a %d×%d grid", path, len(data), g.Width, g.Height)
	}
	var dtype godal.DataType
	switch any(data).(type) {
	case []uint8:
		dtype = godal.Byte
	case []uint16:
		dtype = godal.UInt16
	default:
		return fmt.Errorf("write %s: unsupported pixel type %T", path, data)
	}
	var zero T
	if p, err := goPlan(g, int(unsafe.Sizeof(zero)), []BandInfo{{Description: opt.Description}}, opt); err == nil {
		if opt.Classes != nil {
			if err := writeCategories(path+".aux.xml", *opt.Classes); err != nil {
				return err
			}
		}
		return cog.Write(path, p, data)
	}
	mem, err := godal.Create(godal.Memory, "", 1, dtype, g.Width, g.Height)
	if err != nil {
		return fmt.Errorf("write %s: create in-memory dataset: %w", path, err)
	}
	defer mem.Close()
	if err := describe(mem, g, opt); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := mem.Bands()[0].Write(0, 0, data, g.Width, g.Height); err != nil {
		return fmt.Errorf("write %s: fill in-memory dataset: %w", path, err)
	}

	return translateCOG(mem, path, opt)
}

func describe(ds *godal.Dataset, g geo.Grid, opt COGOptions) error {
	sr, err := godal.NewSpatialRefFromEPSG(g.EPSG)
	if err != nil {
		return fmt.Errorf("crs EPSG:%d: %w", g.EPSG, err)
	}
	defer sr.Close()
	if err := ds.SetSpatialRef(sr); err != nil {
		return fmt.Errorf("set crs: %w", err)
	}
	if err := ds.SetGeoTransform(g.Transform); err != nil {
		return fmt.Errorf("set geotransform: %w", err)
	}
	band := ds.Bands()[0]
	if opt.NoData != nil {
		if err := band.SetNoData(*opt.NoData); err != nil {
			return fmt.Errorf("set nodata: %w", err)
		}
	}
	if opt.Description != "" {
		if err := band.SetDescription(opt.Description); err != nil {
			return fmt.Errorf("set band description: %w", err)
		}
	}
	for _, k := range sortedKeys(opt.Metadata) {
		if err := ds.SetMetadata(k, opt.Metadata[k]); err != nil {
			return fmt.Errorf("set metadata %s: %w", k, err)
		}
	}
	if opt.Classes != nil {
		if err := band.SetColorTable(colorTable(*opt.Classes)); err != nil {
			return fmt.Errorf("set colour table: %w", err)
		}
	}
	return nil
}

func cogSwitches(opt COGOptions) []string {
	compress := opt.Compress
	if compress == "" {
		compress = "DEFLATE"
	}
	block := opt.BlockSize
	if block == 0 {
		block = 512
	}
	threads := "ALL_CPUS"
	if opt.Threads > 0 {
		threads = fmt.Sprint(opt.Threads)
	}
	resampling := opt.OverviewResampling
	if resampling == "" {
		resampling = "AVERAGE"
	}
	sw := []string{
		"-co", "COMPRESS=" + compress,
		"-co", fmt.Sprintf("BLOCKSIZE=%d", block),
		"-co", "NUM_THREADS=" + threads,
		"-co", "OVERVIEW_RESAMPLING=" + resampling,
		"-co", "BIGTIFF=IF_SAFER",
	}
	if opt.Predictor {
		sw = append(sw, "-co", "PREDICTOR=YES")
	}
	if opt.OverviewCount > 0 {
		sw = append(sw, "-co", fmt.Sprintf("OVERVIEW_COUNT=%d", opt.OverviewCount))
	}
	return sw
}

// colorTable builds a 256-entry palette: the scheme's colours at their codes,
// transparent black at 0 (nodata) and opaque black elsewhere, as the
// WorldCover COGs do.
func colorTable(s landcover.Scheme) godal.ColorTable {
	entries := make([][4]int16, 256)
	for i := 1; i < 256; i++ {
		entries[i] = [4]int16{0, 0, 0, 255}
	}
	for _, c := range s.Classes {
		entries[c.Code] = [4]int16{int16(c.Color.R), int16(c.Color.G), int16(c.Color.B), int16(c.Color.A)}
	}
	return godal.ColorTable{PaletteInterp: godal.RGBPalette, Entries: entries}
}

// pamDataset is the subset of GDAL's PAM (.aux.xml) format lulc writes.
type pamDataset struct {
	XMLName xml.Name  `xml:"PAMDataset"`
	Bands   []pamBand `xml:"PAMRasterBand"`
}

type pamBand struct {
	Band       int      `xml:"band,attr"`
	Categories []string `xml:"CategoryNames>Category"`
}

func writeCategories(path string, s landcover.Scheme) error {
	names := make([]string, 256)
	last := 0
	for _, c := range s.Classes {
		names[c.Code] = c.Name
		last = max(last, int(c.Code))
	}
	body, err := xml.MarshalIndent(pamDataset{Bands: []pamBand{{Band: 1, Categories: names[:last+1]}}}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode category names for %s: %w", path, err)
	}
	return atomicfs.WriteFile(path, append(body, '\n'))
}

// Categories reads the category names GDAL keeps for band 1 of the raster at
// path (index = pixel value), or nil when it has none.
func Categories(path string) ([]string, error) {
	body, err := os.ReadFile(path + ".aux.xml")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read category names: %w", err)
	}
	var pam pamDataset
	if err := xml.Unmarshal(body, &pam); err != nil {
		return nil, fmt.Errorf("parse %s.aux.xml: %w", path, err)
	}
	for _, b := range pam.Bands {
		if b.Band == 1 {
			return b.Categories, nil
		}
	}
	return nil, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Info is what lulc checks about a raster on disk.
type Info struct {
	geo.Grid
	Bands       int
	DataType    string // GDAL name: Byte, UInt16, …
	BlockSize   [2]int
	Overviews   int
	NoData      *float64
	Layout      string // "COG" for a Cloud-Optimized GeoTIFF
	Compression string
	ColorTable  [][4]int16 // band 1's palette, if any
	Metadata    map[string]string
}

// Inspect opens the raster at path and describes band 1 and its grid.
func Inspect(path string) (Info, error) {
	register()
	ds, err := godal.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer ds.Close()
	st := ds.Structure()
	info := Info{
		Grid:     geo.Grid{Width: st.SizeX, Height: st.SizeY},
		Bands:    st.NBands,
		Metadata: ds.Metadatas(),
	}
	info.Transform, err = ds.GeoTransform()
	if err != nil {
		return Info{}, fmt.Errorf("%s: geotransform: %w", path, err)
	}
	if sr := ds.SpatialRef(); sr != nil {
		defer sr.Close()
		if code := sr.AuthorityCode(""); code != "" {
			fmt.Sscan(code, &info.EPSG)
		}
	}
	info.Layout = ds.Metadata("LAYOUT", godal.Domain("IMAGE_STRUCTURE"))
	info.Compression = ds.Metadata("COMPRESSION", godal.Domain("IMAGE_STRUCTURE"))
	if st.NBands > 0 {
		b := ds.Bands()[0]
		bs := b.Structure()
		info.DataType = bs.DataType.String()
		info.BlockSize = [2]int{bs.BlockSizeX, bs.BlockSizeY}
		info.Overviews = len(b.Overviews())
		if nd, ok := b.NoData(); ok {
			info.NoData = &nd
		}
		info.ColorTable = b.ColorTable().Entries
	}
	return info, nil
}

// Transformer converts coordinates between two CRSs given by EPSG code,
// in x/y (easting/northing, longitude/latitude) order.
type Transformer struct {
	t        *godal.Transform
	src, dst *godal.SpatialRef
	mu       sync.Mutex
}

// NewTransformer returns a transformer from EPSG:src to EPSG:dst.
func NewTransformer(src, dst int) (*Transformer, error) {
	register()
	s, err := godal.NewSpatialRefFromEPSG(src)
	if err != nil {
		return nil, fmt.Errorf("crs EPSG:%d: %w", src, err)
	}
	d, err := godal.NewSpatialRefFromEPSG(dst)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("crs EPSG:%d: %w", dst, err)
	}
	t, err := godal.NewTransform(s, d)
	if err != nil {
		s.Close()
		d.Close()
		return nil, fmt.Errorf("transform EPSG:%d → EPSG:%d: %w", src, dst, err)
	}
	return &Transformer{t: t, src: s, dst: d}, nil
}

// Transform converts the points in place.
func (t *Transformer) Transform(x, y []float64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := make([]bool, len(x))
	if err := t.t.TransformEx(x, y, nil, ok); err != nil {
		return fmt.Errorf("transform %d points: %w", len(x), err)
	}
	for i, good := range ok {
		if !good {
			return fmt.Errorf("transform point (%g, %g) failed", x[i], y[i])
		}
	}
	return nil
}

// Close releases the GDAL objects.
func (t *Transformer) Close() {
	t.t.Close()
	t.src.Close()
	t.dst.Close()
}

// ReadBand reads a whole band (1-based) of a small raster.
func ReadBand[T Pixels](path string, band int) ([]T, geo.Grid, error) {
	register()
	defer netwait.Track(path)()
	ds, err := godal.Open(GDALPath(path))
	if err != nil {
		return nil, geo.Grid{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer ds.Close()
	st := ds.Structure()
	if band < 1 || band > st.NBands {
		return nil, geo.Grid{}, fmt.Errorf("%s has no band %d", path, band)
	}
	g := geo.Grid{Width: st.SizeX, Height: st.SizeY}
	if g.Transform, err = ds.GeoTransform(); err != nil {
		return nil, geo.Grid{}, fmt.Errorf("%s: geotransform: %w", path, err)
	}
	buf := make([]T, g.Width*g.Height)
	if err := ds.Bands()[band-1].Read(0, 0, buf, g.Width, g.Height); err != nil {
		return nil, geo.Grid{}, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, g, nil
}
