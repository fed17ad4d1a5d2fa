// Package view serves a run's maps to a browser on this machine: the class,
// confidence and area-of-applicability COGs of each tile of a `lulc run` or
// `lulc predict` output directory, with the class scheme's legend, a pixel
// inspector and, when the run kept its stack or the user names one, the
// reference labels.
//
// Discover finds the tiles and their layers in a directory; a Server binds
// a port (127.0.0.1 by default) and serves the page, its script (OpenLayers
// and geotiff.js bundled at build time, embedded from web/; nothing is
// fetched at run time) and the tiles' files, by name only: it serves the
// files Discover found and nothing else, with HTTP range requests so that
// the browser streams the COGs' tiles. Raster metadata the page needs is
// read in the browser from the COGs themselves; this package reads only
// the JSON and XML beside them and needs no cgo.
package view

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
)

// Layer names: the keys of Tile.Layers, as the page knows them.
const (
	LayerClass      = "class"
	LayerConfidence = "confidence"
	LayerAOA        = "aoa"
	LayerLabels     = "labels"
	LayerStack      = "stack"
)

// layerFiles are the rasters a tile's directory may hold, by layer.
var layerFiles = map[string]string{
	LayerClass:      "class.tif",
	LayerConfidence: "confidence.tif",
	LayerAOA:        "aoa.tif",
	LayerLabels:     "labels.tif",
	LayerStack:      "stack.tif",
}

// sideFiles are the other files of a tile's directory that the page may
// fetch (metadata and the quicklook); nothing else is served.
var sideFiles = []string{"item.json", "metrics.json", "class.qml", "class.tif.aux.xml", "quicklook.png"}

// Class is one class of a scheme: its code in the rasters, its name and
// its colour (#rrggbb).
type Class struct {
	Value int    `json:"value"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

// RGB is how the page draws a stack in true colour: the 1-based bands of
// red, green and blue and the reflectance of a digital number, DN × Scale
// + Offset.
type RGB struct {
	Bands  [3]int  `json:"bands"`
	Scale  float64 `json:"scale"`
	Offset float64 `json:"offset"`
}

// Tile is one tile of a run: where its layers are (relative paths inside
// the run's directory, or an absolute path for labels given with
// SetLabels), its class scheme and what its STAC item says of its grid.
type Tile struct {
	Name string
	// Dir is the tile's directory relative to the run's ("." when the
	// run's directory is itself a tile's).
	Dir string
	// Layers maps a layer name (LayerClass, …) to its file.
	Layers map[string]string
	// Side are the other files of the tile's directory the page may read.
	Side []string
	// Grid is the class map's grid as item.json records it (zero without
	// an item.json); the page reads each COG's own grid.
	Grid geo.Grid
	// Classes is the class scheme: from item.json's classification
	// extension, else class.qml, else class.tif.aux.xml's category names.
	Classes []Class
	// AOAThreshold is the dissimilarity index above which a pixel lies
	// outside the area of applicability (0: unknown).
	AOAThreshold float64
	// RGB says how to draw the stack in true colour (nil: no stack, or
	// its bands are not known).
	RGB *RGB
	// labelsOutside marks Layers[LayerLabels] as an absolute path the
	// user named, outside the run's directory.
	labelsOutside bool
}

// Run is a run's output directory and its tiles, sorted by name.
type Run struct {
	Dir   string
	Tiles []*Tile
}

// Tile returns the tile named name, or nil.
func (r *Run) Tile(name string) *Tile {
	for _, t := range r.Tiles {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// ErrNoRun is returned, wrapped, by Discover for a directory that holds
// no tile's class map.
var ErrNoRun = errors.New("no run's outputs")

// Discover finds the tiles of the run in dir: dir itself when it holds
// class.tif (one tile's directory), else each directory directly inside
// it that holds class.tif, as lulc run and lulc predict write them.
func Discover(dir string) (*Run, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (%w): give a lulc run or lulc predict output directory", dir, ErrNoRun)
	}
	run := &Run{Dir: dir}
	if isFile(filepath.Join(dir, layerFiles[LayerClass])) {
		name := filepath.Base(filepath.Clean(dir))
		if abs, err := filepath.Abs(dir); err == nil {
			name = filepath.Base(abs)
		}
		t, err := readTile(dir, ".", name)
		if err != nil {
			return nil, err
		}
		run.Tiles = append(run.Tiles, t)
		return run, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || !isFile(filepath.Join(dir, e.Name(), layerFiles[LayerClass])) {
			continue
		}
		t, err := readTile(dir, e.Name(), e.Name())
		if err != nil {
			return nil, err
		}
		run.Tiles = append(run.Tiles, t)
	}
	if len(run.Tiles) == 0 {
		return nil, fmt.Errorf("%s: %w: expected a tile's class.tif in it or in its tiles' directories (%s), as lulc run and lulc predict write them",
			dir, ErrNoRun, filepath.Join(dir, "TILE", layerFiles[LayerClass]))
	}
	return run, nil
}

// isFile says whether path is a regular file (following links).
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// readTile describes the tile whose directory is rel inside root.
func readTile(root, rel, name string) (*Tile, error) {
	dir := filepath.Join(root, rel)
	t := &Tile{Name: name, Dir: rel, Layers: map[string]string{}}
	for layer, file := range layerFiles {
		if isFile(filepath.Join(dir, file)) {
			t.Layers[layer] = filepath.ToSlash(filepath.Join(rel, file))
		}
	}
	for _, file := range sideFiles {
		if isFile(filepath.Join(dir, file)) {
			t.Side = append(t.Side, filepath.ToSlash(filepath.Join(rel, file)))
		}
	}
	if err := t.readItem(filepath.Join(dir, "item.json")); err != nil {
		return nil, err
	}
	if t.Layers[LayerStack] != "" {
		if err := t.readStackItem(filepath.Join(dir, "stack-item.json")); err != nil {
			return nil, err
		}
	}
	if len(t.Classes) == 0 {
		classes, err := readQML(filepath.Join(dir, "class.qml"))
		if err != nil {
			return nil, err
		}
		t.Classes = classes
	}
	if len(t.Classes) == 0 {
		classes, err := readAuxNames(filepath.Join(dir, "class.tif.aux.xml"))
		if err != nil {
			return nil, err
		}
		t.Classes = classes
	}
	return t, nil
}

// stacItem is what the page needs of a tile's STAC item.
type stacItem struct {
	Properties struct {
		EPSG         int     `json:"proj:epsg"`
		AOAThreshold float64 `json:"lulc:aoa_threshold"`
	} `json:"properties"`
	Assets map[string]struct {
		Href      string          `json:"href"`
		Transform []float64       `json:"proj:transform"`
		Shape     []int           `json:"proj:shape"`
		EPSG      int             `json:"proj:epsg"`
		Classes   []stacItemClass `json:"classification:classes"`
		Bands     []struct {
			Name       string `json:"name"`
			CommonName string `json:"common_name"`
		} `json:"eo:bands"`
		Raster []struct {
			Scale  *float64 `json:"scale"`
			Offset *float64 `json:"offset"`
		} `json:"raster:bands"`
	} `json:"assets"`
}

// stacItemClass is one entry of the classification extension's classes.
type stacItemClass struct {
	Value       int    `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description"`
	ColorHint   string `json:"color-hint"`
}

// readItem reads the class asset's scheme and grid from a tile's
// item.json, if there is one.
func (t *Tile) readItem(path string) error {
	var item stacItem
	if ok, err := readJSON(path, &item); !ok {
		return err
	}
	for _, a := range item.Assets {
		if filepath.Base(a.Href) != layerFiles[LayerClass] {
			continue
		}
		for _, c := range a.Classes {
			name := c.Description
			if name == "" {
				name = c.Name
			}
			t.Classes = append(t.Classes, Class{Value: c.Value, Name: name, Color: color(c.ColorHint, c.Value)})
		}
		epsg := a.EPSG
		if epsg == 0 {
			epsg = item.Properties.EPSG
		}
		if len(a.Transform) >= 6 && len(a.Shape) == 2 {
			// STAC's proj:transform is (a, b, c, d, e, f) with x = a·col
			// + b·row + c; GDAL's order is (c, a, b, f, d, e).
			p := a.Transform
			t.Grid = geo.Grid{EPSG: epsg, Transform: [6]float64{p[2], p[0], p[1], p[5], p[3], p[4]}, Width: a.Shape[1], Height: a.Shape[0]}
		}
	}
	t.AOAThreshold = item.Properties.AOAThreshold
	slices.SortFunc(t.Classes, func(a, b Class) int { return a.Value - b.Value })
	return nil
}

// readStackItem finds the stack's red, green and blue bands and their
// scaling in stack-item.json, if there is one.
func (t *Tile) readStackItem(path string) error {
	var item stacItem
	if ok, err := readJSON(path, &item); !ok {
		return err
	}
	for _, a := range item.Assets {
		if filepath.Base(a.Href) != layerFiles[LayerStack] {
			continue
		}
		rgb := RGB{Scale: 1}
		for i, b := range a.Bands {
			for j, want := range []string{"red", "green", "blue"} {
				if b.CommonName == want {
					rgb.Bands[j] = i + 1
				}
			}
		}
		if rgb.Bands[0] == 0 || rgb.Bands[1] == 0 || rgb.Bands[2] == 0 {
			return nil
		}
		if len(a.Raster) >= rgb.Bands[0] {
			rb := a.Raster[rgb.Bands[0]-1]
			if rb.Scale != nil {
				rgb.Scale = *rb.Scale
			}
			if rb.Offset != nil {
				rgb.Offset = *rb.Offset
			}
		}
		t.RGB = &rgb
	}
	return nil
}

// readJSON decodes the JSON file at path into v. A missing file is no
// error (false, nil); an unreadable or malformed one is.
func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// readQML reads the palette of a QGIS style (class.qml), if there is one.
func readQML(path string) ([]Class, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var doc struct {
		Entries []struct {
			Value int    `xml:"value,attr"`
			Color string `xml:"color,attr"`
			Label string `xml:"label,attr"`
		} `xml:"pipe>rasterrenderer>colorPalette>paletteEntry"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var classes []Class
	for _, e := range doc.Entries {
		classes = append(classes, Class{Value: e.Value, Name: e.Label, Color: color(e.Color, e.Value)})
	}
	return classes, nil
}

// readAuxNames reads the category names of GDAL's side file (the class
// code is a name's index), if there is one; their colours are made up.
func readAuxNames(path string) ([]Class, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var doc struct {
		Names []string `xml:"PAMRasterBand>CategoryNames>Category"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var classes []Class
	for v, name := range doc.Names {
		if name != "" {
			classes = append(classes, Class{Value: v, Name: name, Color: color("", v)})
		}
	}
	return classes, nil
}

// color returns a colour hint as #rrggbb, or, when the hint is not one,
// the colour lulc gives class code v without one (landcover.Spread).
func color(hint string, v int) string {
	h := strings.ToLower(strings.TrimPrefix(hint, "#"))
	if len(h) == 6 && strings.Trim(h, "0123456789abcdef") == "" {
		return "#" + h
	}
	c := landcover.Spread(v)
	return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
}

// SetLabels shows the labels raster at path (a file the user named, which
// may lie outside the run's directory) as the tile's labels layer, in
// place of the labels.tif its directory may hold. The caller checks that
// the raster lies on the tile's grid.
func (r *Run) SetLabels(tile, path string) error {
	t := r.Tile(tile)
	if t == nil {
		return fmt.Errorf("labels for tile %s: the run in %s has no such tile", tile, r.Dir)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("labels %s: %w", path, err)
	}
	if !isFile(abs) {
		return fmt.Errorf("labels %s: not a readable file", path)
	}
	t.Layers[LayerLabels] = abs
	t.labelsOutside = true
	return nil
}
