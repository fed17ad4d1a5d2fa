package raster

import (
	"fmt"
	"os"
	"sync"

	"github.com/airbusgeo/godal"

	"github.com/lulc/lulc/internal/atomicfs"
)

// Writer builds a multi-band raster window by window and turns it into a
// COG when closed. Windows land in an uncompressed tiled GeoTIFF beside the
// target (GDAL's COG driver can only copy a finished dataset); Close
// encodes the COG to a hidden temporary name and renames it into place, so
// the target path only ever holds a complete file. Write is safe for
// concurrent use.
type Writer struct {
	path    string
	staging string
	grid    Grid
	opt     COGOptions
	mu      sync.Mutex
	ds      *godal.Dataset
	closed  bool // ds is closed: by Close, or by Abort
}

// BandInfo describes one band of a Writer's output.
type BandInfo struct {
	Description string
	Scale       float64 // 0: none
	Offset      float64
}

// NewWriter starts a raster of len(bands) bands of type dtype ("uint8" or
// "uint16") on grid g, to become a COG at path.
func NewWriter(path string, g Grid, dtype string, bands []BandInfo, opt COGOptions) (*Writer, error) {
	register()
	dt, ok := map[string]godal.DataType{"uint8": godal.Byte, "uint16": godal.UInt16}[dtype]
	if !ok {
		return nil, fmt.Errorf("write %s: unsupported type %q", path, dtype)
	}
	w := &Writer{path: path, staging: atomicfs.TempName(path) + ".gtiff", grid: g, opt: opt}
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

// Write stores a window of band (0-based) at pixel offset (x, y).
func (w *Writer) Write(band, x, y, width, height int, buf any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ds.Bands()[band].Write(x, y, buf, width, height); err != nil {
		return fmt.Errorf("write %s: band %d window (%d, %d): %w", w.path, band+1, x, y, err)
	}
	return nil
}

// Close encodes the COG and renames it into place.
func (w *Writer) Close() error {
	defer os.Remove(w.staging)
	if w.closed {
		return fmt.Errorf("write %s: closed twice", w.path)
	}
	w.closed = true
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

// Abort discards the raster; after a failed Close too.
func (w *Writer) Abort() {
	if !w.closed {
		w.closed = true
		w.ds.Close()
	}
	os.Remove(w.staging)
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
