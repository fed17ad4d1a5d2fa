package stage

// The STAC documents of lulc's outputs. Every output of ingest, predict
// and run is a static STAC collection: collection.json at its root links
// one item per tile (the tile directory's item.json, and stack-item.json
// for a stack), and each item links back to it. Every link and asset href
// between the output's own files is relative, so that the tree can move;
// links to inputs (the model, the source items) are relative where they are
// local files and kept as they are where they are URLs. Nothing in them
// depends on the time of the run: a rerun writes the same bytes.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/planetlabs/go-stac"
	"github.com/planetlabs/go-stac/extensions/eo/v1"
	"github.com/planetlabs/go-stac/extensions/raster/v1"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/landcover"
	lraster "github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/pixel/features"
	"github.com/lulc/lulc/source/stacext"
)

// Catalog files.
const (
	// CollectionFile is the STAC collection at the root of an output.
	CollectionFile = "collection.json"
	// StackItemFile is the STAC item of a tile's stack, beside it (ItemFile
	// is the map's: lulc run with outputs.stack writes both into one
	// directory).
	StackItemFile = "stack-item.json"
)

// StacVersion is the STAC version of lulc's documents.
const StacVersion = "1.0.0"

// geoJSONType and jsonType are the media types of items and collections.
const (
	geoJSONType = "application/geo+json"
	jsonType    = "application/json"
)

// ShardCollectionHref is, from a tile directory of an array task
// (OUT/shards/i-of-n/TILE), the collection lulc collect writes for the
// whole job (OUT/collection/collection.json).
var ShardCollectionHref = "../../../" + CollectDir + "/" + CollectionFile

// CollectionRef places an item in its collection.
type CollectionRef struct {
	ID   string // the collection's id, the items' "collection"
	Href string // the collection document, relative to the item's directory
	// Base, when set (--base-url), is the URL the output's root is
	// published at: its documents' links and assets are written as
	// absolute URLs under it (TileOut.Publish, WriteCollection).
	Base string
}

// OwnCollection is the collection at the root of an output, seen from a
// tile directory.
func OwnCollection(id string) CollectionRef {
	return CollectionRef{ID: id, Href: "../" + CollectionFile}
}

// TileOut is where a tile's outputs go: the staging directory they are
// written into, the directory it becomes when the output is committed
// (local hrefs in the items are relative to that), and the collection its
// items belong to.
type TileOut struct {
	Dir, Final string
	Collection CollectionRef
}

// Publish makes an item's relative hrefs absolute when the output is
// published at a base URL (Collection.Base; nothing to do otherwise): an
// href inside the output becomes a URL under the base, one outside it
// (a model or scenes given from elsewhere) an absolute file:// URL, so
// that no link leaves the collection relatively. file is the item's name
// in the tile's directory.
func (o TileOut) Publish(item *stac.Item, file string) error {
	if o.Collection.Base == "" {
		return nil
	}
	doc := filepath.Base(o.Final) + "/" + file
	fix := func(href string) (string, error) {
		return publishHref(o.Collection.Base, filepath.Dir(o.Final), doc, href)
	}
	var err error
	for _, l := range item.Links {
		if l.Href, err = fix(l.Href); err != nil {
			return err
		}
	}
	for _, a := range item.Assets {
		if a.Href, err = fix(a.Href); err != nil {
			return err
		}
	}
	return nil
}

// publishHref is href, written in the document at doc (a path relative to
// the output's root, which lies at root on disk), as published under
// base: relative hrefs inside the output as URLs under base, those
// outside it as file:// URLs; absolute ones as they are.
func publishHref(base, root, doc, href string) (string, error) {
	if href == "" || strings.Contains(href, "://") || strings.HasPrefix(href, "/") {
		return href, nil
	}
	target := path.Clean(path.Join(path.Dir(doc), href))
	if target == ".." || strings.HasPrefix(target, "../") {
		abs, err := filepath.Abs(filepath.Join(root, filepath.FromSlash(target)))
		if err != nil {
			return "", fmt.Errorf("publish %s: %w", href, err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
	}
	u, err := url.JoinPath(base, strings.Split(target, "/")...)
	if err != nil {
		return "", fmt.Errorf("publish %s under %s: %w", href, base, err)
	}
	return u, nil
}

// CheckBaseURL checks a --base-url: an absolute http(s), s3 or gs URL
// without query or fragment, returned without its trailing slash.
func CheckBaseURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("--base-url %q: %w", base, err)
	}
	if !slices.Contains([]string{"http", "https", "s3", "gs"}, u.Scheme) || u.Host == "" {
		return "", fmt.Errorf("--base-url %q: not an absolute http, https, s3 or gs URL", base)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--base-url %q: a query, fragment or credentials have no place in the links of a published collection", base)
	}
	return strings.TrimRight(base, "/"), nil
}

// ItemLinks are an item's links to itself and its collection.
func ItemLinks(file string, c CollectionRef) []*stac.Link {
	return []*stac.Link{
		{Rel: "self", Href: "./" + file, Type: geoJSONType},
		{Rel: "root", Href: c.Href, Type: jsonType},
		{Rel: "parent", Href: c.Href, Type: jsonType},
		{Rel: "collection", Href: c.Href, Type: jsonType},
	}
}

// LocalHref is an href to an input as an item in dir links it: a local
// path relative to dir, with forward slashes; a URL or one of GDAL's
// virtual paths as it is.
func LocalHref(dir, href string) string {
	if href == "" || strings.Contains(href, "://") || strings.HasPrefix(href, "/vsi") {
		return href
	}
	abs, err := filepath.Abs(href)
	if err != nil {
		return href
	}
	from, err := filepath.Abs(dir)
	if err != nil {
		return href
	}
	rel, err := filepath.Rel(from, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, "../") {
		rel = "./" + rel
	}
	return rel
}

// SourceLinks are derived_from links to the items a tile was made from,
// sorted by title: each item's document, else one of its assets (the same
// one every run), relative to dir where local.
func SourceLinks(dir, what string, items []ManifestItem) []*stac.Link {
	var links []*stac.Link
	for _, s := range items {
		href := s.Href
		if keys := slices.Sorted(maps.Keys(s.Assets)); href == "" && len(keys) > 0 {
			href = s.Assets[keys[0]].Href
		}
		if href == "" {
			continue
		}
		l := &stac.Link{Rel: "derived_from", Href: LocalHref(dir, href), Title: what + " " + s.ID}
		if strings.HasSuffix(s.Href, ".json") {
			l.Type = geoJSONType
		}
		links = append(links, l)
	}
	slices.SortFunc(links, func(a, b *stac.Link) int { return strings.Compare(a.Title+a.Href, b.Title+b.Href) })
	return links
}

// Footprint is a grid's outline in longitude and latitude, as an item's
// polygon and bbox.
func Footprint(grid geo.Grid) (map[string]any, []float64, error) {
	tr, err := lraster.NewTransformer(grid.EPSG, 4326)
	if err != nil {
		return nil, nil, err
	}
	defer tr.Close()
	b := grid.Bounds()
	xs := []float64{b[0], b[2], b[2], b[0]}
	ys := []float64{b[3], b[3], b[1], b[1]}
	if err := tr.Transform(xs, ys); err != nil {
		return nil, nil, err
	}
	ring := [][]float64{}
	bbox := []float64{xs[0], ys[0], xs[0], ys[0]}
	for i := range xs {
		ring = append(ring, []float64{round9(xs[i]), round9(ys[i])})
		bbox[0], bbox[1] = min(bbox[0], xs[i]), min(bbox[1], ys[i])
		bbox[2], bbox[3] = max(bbox[2], xs[i]), max(bbox[3], ys[i])
	}
	ring = append(ring, ring[0])
	for i := range bbox {
		bbox[i] = round9(bbox[i])
	}
	return map[string]any{"type": "Polygon", "coordinates": [][][]float64{ring}}, bbox, nil
}

// TimeProperties are an item's datetime fields from its sources' dates:
// their range, or the epoch when they have none (an item must have a
// datetime, and lulc writes no clock time).
func TimeProperties(sources []ManifestItem) map[string]any {
	var start, end string
	for _, s := range sources {
		if s.Datetime != "" && (start == "" || s.Datetime < start) {
			start = s.Datetime
		}
		if s.Datetime > end {
			end = s.Datetime
		}
	}
	if start == "" {
		return map[string]any{"datetime": "1970-01-01T00:00:00Z"}
	}
	return map[string]any{"datetime": nil, "start_datetime": start, "end_datetime": end}
}

// GridProjection is an asset's grid in the projection extension: shape is
// [rows, cols], transform the first six affine coefficients as in
// rasterio.
func GridProjection(grid geo.Grid) *stacext.ProjectionAsset {
	t := grid.Transform
	return &stacext.ProjectionAsset{Shape: []int{grid.Height, grid.Width}, Transform: []float64{t[1], t[2], t[0], t[4], t[5], t[3]}}
}

// FileOf is the file extension's fields for a file in dir.
func FileOf(dir, name string) (*stacext.File, error) {
	sum, size, err := digest.File(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	return &stacext.File{Checksum: digest.Multihash(sum), Size: size}, nil
}

// ClassesOf lists a scheme's classes for the classification extension.
func ClassesOf(scheme landcover.Scheme) []stacext.Class {
	var classes []stacext.Class
	for _, c := range scheme.Classes {
		classes = append(classes, stacext.Class{Value: int(c.Code), Description: c.Name, ColorHint: fmt.Sprintf("%02X%02X%02X", c.Color.R, c.Color.G, c.Color.B)})
	}
	return classes
}

// stackItem is the STAC item of a tile's stack, built from its manifest
// alone (the outputs' checksums are the manifest's), so that a rerun or a
// resumed run writes it again to the same bytes. labels is the scheme
// the labels COG carries, nil when its codes are the user's.
func stackItem(m Manifest, manifestFile *stacext.File, out TileOut, labels *landcover.Scheme) (*stac.Item, error) {
	grid := geo.Grid{EPSG: m.Grid.EPSG, Transform: m.Grid.Transform, Width: m.Grid.Width, Height: m.Grid.Height}
	geom, bbox, err := Footprint(grid)
	if err != nil {
		return nil, err
	}
	files := map[string]*stacext.File{}
	for _, o := range m.Outputs {
		files[o.File] = &stacext.File{Checksum: o.Multihash(), Size: o.Size}
	}
	cogs := files["stack.tif"] != nil
	zarrStore := slices.ContainsFunc(m.Outputs, func(o ManifestOutput) bool { return strings.HasPrefix(o.File, "stack.zarr/") })
	if !cogs && !zarrStore {
		return nil, fmt.Errorf("manifest of tile %s lists neither stack.tif nor a stack.zarr store", m.Tile)
	}
	for _, f := range []string{"labels.tif", "valid_count.tif"} {
		if cogs && files[f] == nil {
			return nil, fmt.Errorf("manifest of tile %s lists no checksum of %s", m.Tile, f)
		}
	}
	res := Ptr(grid.Transform[1])
	var rbands []*raster.Band
	var ebands []*eo.Band
	for _, name := range m.Bands {
		rbands = append(rbands, &raster.Band{NoData: m.NoData, DataType: m.DataType, SpatialResolution: res, Scale: Ptr(m.Scale), Offset: Ptr(m.Offset)})
		eb := &eo.Band{Name: name}
		if b, err := features.LookupBand(name); err == nil {
			eb.CommonName, eb.CenterWavelength, eb.FullWidthHalfMax = b.CommonName, Ptr(b.Wavelength), Ptr(b.FWHM)
		} else if f, err := features.ParseFeature(name); err == nil && f.Kind == "temporal" {
			eb.Description = temporalDescription(f)
		} else if i := slices.IndexFunc(m.Layers, func(l ManifestLayer) bool { return l.Name == name }); i >= 0 {
			l := m.Layers[i]
			eb.Description = fmt.Sprintf("layer (%s): its value is float32(float32(plane × %g) + %g), plane = DN × scale + offset", l.Kind, l.Map.Scale, l.Map.Offset)
		}
		ebands = append(ebands, eb)
	}
	labelExt := []stac.Extension{GridProjection(grid), &raster.Asset{Bands: []*raster.Band{{NoData: 0, DataType: "uint8", SpatialResolution: res}}}, files["labels.tif"]}
	if labels != nil {
		labelExt = append(labelExt, &stacext.ClassificationAsset{Classes: ClassesOf(*labels)})
	}
	assets := map[string]*stac.Asset{
		"manifest": {Href: "./manifest.json", Type: jsonType, Title: "lulc's manifest: sources, grid, encoding", Roles: []string{"metadata"},
			Extensions: []stac.Extension{manifestFile}},
	}
	if cogs {
		assets["stack"] = &stac.Asset{Href: "./stack.tif", Type: CogType, Title: "Median composite (reflectance = DN × scale + offset)", Roles: []string{"data", "reflectance"},
			Extensions: []stac.Extension{GridProjection(grid), &raster.Asset{Bands: rbands}, &eo.Asset{Bands: ebands}, files["stack.tif"]}}
		assets["labels"] = &stac.Asset{Href: "./labels.tif", Type: CogType, Title: "Reference labels on the stack's grid", Roles: []string{"data", "labels"},
			Extensions: labelExt}
		assets["valid_count"] = &stac.Asset{Href: "./valid_count.tif", Type: CogType, Title: "Valid observations per pixel", Roles: []string{"data"},
			Extensions: []stac.Extension{GridProjection(grid), &raster.Asset{Bands: []*raster.Band{{DataType: "uint8", SpatialResolution: res}}}, files["valid_count.tif"]}}
	}
	if zarrStore {
		// A store is a directory: its files' checksums are the manifest's.
		assets["zarr"] = &stac.Asset{Href: "./stack.zarr", Type: ZarrType,
			Title:       "The stack, labels and counts as a Zarr v3 store (xarray.open_zarr; decoded to reflectance and layer units)",
			Description: "One array per plane (its name with characters other than letters, digits, _, - and . as _), labels and valid_count, sharded and Zstandard-compressed, with x/y coordinates and a CF grid mapping (spatial_ref).",
			Roles:       []string{"data", "reflectance", "labels"},
			Extensions:  []stac.Extension{GridProjection(grid), &eo.Asset{Bands: ebands}}}
	}
	links := ItemLinks(StackItemFile, out.Collection)
	links = append(links, SourceLinks(out.Final, "source item", m.Sources)...)
	links = append(links, SourceLinks(out.Final, "label item", m.Labels)...)
	props := TimeProperties(m.Sources)
	props["lulc:tile"] = m.Tile
	return &stac.Item{
		Version: StacVersion, Id: "lulc-" + m.Tile + "-stack", Collection: out.Collection.ID,
		Geometry: geom, Bbox: bbox, Properties: props, Assets: assets, Links: links,
		Extensions: []stac.Extension{&stacext.ProjectionItem{EPSG: grid.EPSG}},
	}, nil
}

// ZarrType is a Zarr store's media type, as STAC's best practices name it.
const ZarrType = "application/vnd+zarr"

// WriteStackItem writes the item of the stack in out.dir from its
// manifest.json.
func WriteStackItem(out TileOut) error {
	raw, err := os.ReadFile(filepath.Join(out.Dir, "manifest.json"))
	if err != nil {
		return fmt.Errorf("stack item: %w", err)
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return fmt.Errorf("stack item of %s: %w", out.Dir, err)
	}
	mf, err := FileOf(out.Dir, "manifest.json")
	if err != nil {
		return err
	}
	labels, err := m.LabelScheme.Scheme()
	if err != nil {
		return fmt.Errorf("stack item of %s: %w", out.Dir, err)
	}
	item, err := stackItem(m, mf, out, labels)
	if err != nil {
		return err
	}
	if err := out.Publish(item, StackItemFile); err != nil {
		return err
	}
	return WriteItem(filepath.Join(out.Dir, StackItemFile), item)
}

// WriteItem writes an item as indented JSON (go-stac sorts its keys).
func WriteItem(path string, item *stac.Item) error {
	body, err := json.MarshalIndent(item, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfs.WriteFile(path, append(body, '\n'))
}

// CollectionID names an output's collection after what keys it.
func CollectionID(prefix, key string) string {
	return prefix + hex.EncodeToString(SHA256([]byte(key)))[:12]
}

// WriteCollection writes dir/collection.json: a STAC collection linking
// the items at the given hrefs (relative to dir, where they must be
// readable), with the union of their bboxes and time ranges as its extent.
// With a base URL (--base-url) its links are absolute URLs under it.
func WriteCollection(dir, id, title, description string, items []string, base string) error {
	bbox := []float64{180, 90, -180, -90}
	var start, end time.Time
	links := []*stac.Link{
		{Rel: "self", Href: "./" + CollectionFile, Type: jsonType},
		{Rel: "root", Href: "./" + CollectionFile, Type: jsonType},
	}
	items = slices.Sorted(slices.Values(items))
	for _, href := range items {
		path := filepath.Join(dir, filepath.FromSlash(href))
		var it struct {
			BBox       []float64 `json:"bbox"`
			Properties struct {
				Datetime *time.Time `json:"datetime"`
				Start    *time.Time `json:"start_datetime"`
				End      *time.Time `json:"end_datetime"`
			} `json:"properties"`
		}
		body, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(body, &it)
		}
		if err != nil {
			return fmt.Errorf("collection: item %s: %w", path, err)
		}
		if len(it.BBox) == 4 {
			bbox = []float64{min(bbox[0], it.BBox[0]), min(bbox[1], it.BBox[1]), max(bbox[2], it.BBox[2]), max(bbox[3], it.BBox[3])}
		}
		for _, tm := range []*time.Time{it.Properties.Datetime, it.Properties.Start, it.Properties.End} {
			if tm == nil {
				continue
			}
			if start.IsZero() || tm.Before(start) {
				start = *tm
			}
			if end.IsZero() || tm.After(end) {
				end = *tm
			}
		}
		if !strings.HasPrefix(href, "../") && !strings.HasPrefix(href, "./") {
			href = "./" + href
		}
		links = append(links, &stac.Link{Rel: "item", Href: href, Type: geoJSONType})
	}
	interval := []any{nil, nil}
	if !start.IsZero() {
		interval = []any{start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339)}
	}
	if base != "" {
		for _, l := range links {
			var err error
			if l.Href, err = publishHref(base, dir, CollectionFile, l.Href); err != nil {
				return err
			}
		}
	}
	c := &stac.Collection{Version: StacVersion, Id: id, Title: title, Description: description, License: "proprietary",
		Extent: &stac.Extent{Spatial: &stac.SpatialExtent{Bbox: [][]float64{bbox}}, Temporal: &stac.TemporalExtent{Interval: [][]any{interval}}},
		Links:  links}
	body, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode collection %s: %w", id, err)
	}
	return atomicfs.WriteFile(filepath.Join(dir, CollectionFile), append(body, '\n'))
}

// OutputItems lists, relative to an output's root, the items of its tiles
// that exist in dir: each tile's map item and stack item.
func OutputItems(dir string, tiles []string) []string {
	var items []string
	for _, t := range tiles {
		for _, f := range []string{ItemFile, StackItemFile} {
			if atomicfs.Exists(filepath.Join(dir, t, f)) {
				items = append(items, t+"/"+f)
			}
		}
	}
	return items
}

// temporalDescription says what a temporal plane of the stack holds.
func temporalDescription(f features.Feature) string {
	what := fmt.Sprintf("percentile %d (nearest rank)", f.Percentile)
	if f.Season != "" {
		what = "median over the season " + f.Season
	}
	unit := "reflectance"
	if f.Base.Kind != "band" {
		unit = fmt.Sprintf("value + %d", features.TemporalShift)
	}
	return fmt.Sprintf("%s of %s over the valid dates, as %s", what, f.Base.Name, unit)
}
