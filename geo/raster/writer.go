package raster

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/cog"
	"github.com/lulc/lulc/internal/atomicfs"
)

// Writer builds a multi-band raster window by window and turns it into a
// COG when closed. When the Go encoder applies (see cog.NewPlan), a
// cog.Writer keeps the windows (in Go memory, or for rasters over 1 GiB in
// a mapped temporary file beside the target) and Close encodes them;
// otherwise they land in an uncompressed tiled GeoTIFF beside the target
// (GDAL's COG driver can only copy a finished dataset) and Close has GDAL
// encode it. Either way the COG is written to a hidden temporary name and
// renamed into place, so the target path only ever holds a complete file.
// Write is safe for concurrent use.
type Writer struct {
	path    string
	staging string
	grid    geo.Grid
	opt     COGOptions
	enc     *cog.Writer // the Go encoder's writer; nil when GDAL stages
	mu      sync.Mutex
	ds      *godal.Dataset
	closed  bool // staging released: by Close, or by Abort
}

// BandInfo describes one band of a Writer's output.
type BandInfo struct {
	Description string
	Scale       float64 // 0: none
	Offset      float64
}

// NewWriter starts a raster of len(bands) bands of type dtype ("uint8",
// "uint16" or "float32") on grid g, to become a COG at path.
func NewWriter(path string, g geo.Grid, dtype string, bands []BandInfo, opt COGOptions) (*Writer, error) {
	register()
	dt, ok := map[string]godal.DataType{"uint8": godal.Byte, "uint16": godal.UInt16, "float32": godal.Float32}[dtype]
	if !ok {
		return nil, fmt.Errorf("write %s: unsupported type %q", path, dtype)
	}
	w := &Writer{path: path, staging: atomicfs.TempName(path) + ".gtiff", grid: g, opt: opt}
	// Band 1's description is opt's unless the band has its own, as
	// describe then the loop below set them for GDAL.
	infos := slices.Clone(bands)
	if len(infos) > 0 && infos[0].Description == "" {
		infos[0].Description = opt.Description
	}
	bytesPer := map[string]int{"uint8": 1, "uint16": 2, "float32": 4}[dtype]
	if p, err := goPlan(g, bytesPer, infos, opt); err == nil {
		// Where the staging file cannot be mapped, GDAL stages instead.
		if w.enc, err = cog.NewWriter(path, p); err == nil {
			return w, nil
		}
	}
	ds, err := godal.Create(godal.GTiff, w.staging, len(bands), dt, g.Width, g.Height,
		godal.CreationOption("TILED=YES", "BLOCKXSIZE=512", "BLOCKYSIZE=512", "BIGTIFF=IF_SAFER", "INTERLEAVE=BAND"))
	if err != nil {
		return nil, fmt.Errorf("write %s: create staging raster: %w", path, err)
	}
	w.ds = ds
	if err := describe(ds, g, opt); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	for i, b := range bands {
		band := ds.Bands()[i]
		if opt.NoData != nil {
			if err := band.SetNoData(*opt.NoData); err != nil {
				w.Abort()
				return nil, fmt.Errorf("write %s: band %d nodata: %w", path, i+1, err)
			}
		}
		if b.Description != "" {
			band.SetDescription(b.Description)
		}
		if b.Scale != 0 {
			if err := band.SetScaleOffset(b.Scale, b.Offset); err != nil {
				w.Abort()
				return nil, fmt.Errorf("write %s: band %d scale/offset: %w", path, i+1, err)
			}
		}
	}
	return w, nil
}

// Write stores a window of band (0-based) at pixel offset (x, y). buf is a
// []uint8, []uint16 or []float32 (the writer's type) of width×height
// values, row by row.
func (w *Writer) Write(band, x, y, width, height int, buf any) error {
	if w.enc != nil {
		// The encoder's writer takes windows concurrently and knows when
		// it is closed.
		return w.enc.Write(band, x, y, width, height, buf)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write %s: band %d window (%d, %d): writer closed", w.path, band+1, x, y)
	}
	if err := w.ds.Bands()[band].Write(x, y, buf, width, height); err != nil {
		return fmt.Errorf("write %s: band %d window (%d, %d): %w", w.path, band+1, x, y, err)
	}
	return nil
}

// Close encodes the COG and renames it into place.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write %s: closed twice", w.path)
	}
	w.closed = true
	if w.enc != nil {
		// The category names go beside the COG first, as translateCOG
		// writes them.
		if w.opt.Classes != nil {
			if err := writeCategories(w.path+".aux.xml", *w.opt.Classes); err != nil {
				w.enc.Abort()
				return err
			}
		}
		return w.enc.Close()
	}
	defer os.Remove(w.staging)
	if err := w.ds.Close(); err != nil {
		return fmt.Errorf("write %s: close staging raster: %w", w.path, err)
	}
	src, err := godal.Open(w.staging)
	if err != nil {
		return fmt.Errorf("write %s: reopen staging raster: %w", w.path, err)
	}
	defer src.Close()
	return translateCOG(src, w.path, w.opt)
}

// Sum returns the checksum (package digest) and size of the file Close wrote, when it
// took them as it wrote (COGOptions.EncodeEarly with lulc's encoder); ok is
// false otherwise, and the caller reads the file to hash it.
func (w *Writer) Sum() (sha string, size int64, ok bool) {
	if w.enc == nil {
		return "", 0, false
	}
	return w.enc.Sum()
}

// Abort discards the raster; after a failed Close too.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		if w.enc != nil {
			w.enc.Abort()
		} else {
			w.ds.Close()
		}
	}
	if w.enc == nil {
		os.Remove(w.staging)
	}
}

// translateCOG encodes src as a COG at path via a hidden temporary file.
func translateCOG(src *godal.Dataset, path string, opt COGOptions) error {
	if opt.Classes != nil {
		if err := writeCategories(path+".aux.xml", *opt.Classes); err != nil {
			return err
		}
	}
	tmp := atomicfs.TempName(path)
	defer os.Remove(tmp)
	out, err := src.Translate(tmp, append([]string{"-of", "COG"}, cogSwitches(opt)...))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", path, err)
	}
	// GDAL may leave a sidecar for the temporary name; categories live
	// beside the final name, written above.
	os.Remove(tmp + ".aux.xml")
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
