package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/lulc/lulc/pixel/features"
	"image/color"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/pixel/radiometry"
	"github.com/lulc/lulc/stage/config"

	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/internal/redact"
	"github.com/lulc/lulc/source/catalog"
)

// Manifest records what a tile's stack was made from and how, so that
// reruns and later stages can reproduce it and skip finished work.
type Manifest struct {
	Version    string       `json:"lulc_version"`
	ConfigHash string       `json:"config_sha256"`
	Tile       string       `json:"tile"`
	Grid       ManifestGrid `json:"grid"`
	Bands      []string     `json:"bands"`
	DataType   string       `json:"data_type"`
	Scale      float64      `json:"scale"`
	Offset     float64      `json:"offset"`
	NoData     float64      `json:"nodata"`
	Composite  string       `json:"composite"`
	// Temporal is the config of the stack's temporal planes, which
	// follow the bands' medians in Bands.
	Temporal        *config.TemporalConfig `json:"temporal,omitempty"`
	Mask            ManifestMask           `json:"mask"`
	Resampling      string                 `json:"resampling"`
	LabelResampling string                 `json:"label_resampling"`
	NoValidFraction float64                `json:"no_valid_fraction"`
	// Dark is each band's dark level (package radiometry), and
	// RadiometryWarning what it suggests about the sources' declared
	// scaling, if anything.
	Dark radiometry.Levels `json:"dark_reflectance_p1,omitempty"`
	// LabelScheme is the class scheme of the tile's labels (the one its
	// labels COG carries), when they have one.
	LabelScheme *manifestScheme `json:"label_scheme,omitempty"`
	// LabelsOutsideScheme counts, by code, the labelled pixels whose code
	// is not in LabelScheme.
	LabelsOutsideScheme map[uint8]int64 `json:"labels_outside_scheme,omitempty"`
	// RadiometryOffset records how offset: auto decided a raster pair's
	// offset.
	RadiometryOffset *ManifestOffset `json:"radiometry_offset,omitempty"`
	// LabelCodes says how vector labels' text classes became codes.
	LabelCodes *ManifestCodes `json:"label_codes,omitempty"`
	// LabelsUnused are the class field's values that burned no label,
	// with why and how many features hold each.
	LabelsUnused []ManifestValue `json:"labels_unused,omitempty"`
	// LabelGroups says what groups.tif holds, for vector labels.
	LabelGroups string `json:"label_groups,omitempty"`
	// LabelWeights says what weights.tif holds, for vector labels with a
	// weight field.
	LabelWeights      string `json:"label_weights,omitempty"`
	RadiometryWarning string `json:"radiometry_warning,omitempty"`
	// Layers are the stack's last planes when ingest's layers section
	// adds them: what each holds and how its plane maps to its units.
	Layers  []ManifestLayer  `json:"layers,omitempty"`
	Sources []ManifestItem   `json:"sources"`
	Labels  []ManifestItem   `json:"labels"`
	Outputs []ManifestOutput `json:"outputs"`
}

// ParseManifest reads a tile's manifest.json and checks what later stages
// rely on: a tile name that is a directory name, a grid of a sane size,
// bands lulc knows, a usable scaling. A damaged or hostile manifest is an
// error here, not a crash or a huge allocation later.
func ParseManifest(raw []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("not a lulc manifest: %w", err)
	}
	g := m.Grid
	switch {
	case config.CheckTileName(m.Tile) != nil:
		return m, fmt.Errorf("manifest tile: %w", config.CheckTileName(m.Tile))
	case g.Width <= 0 || g.Height <= 0 || float64(g.Width)*float64(g.Height) > MaxGridPixels:
		return m, fmt.Errorf("manifest of tile %s: grid %d×%d is empty or too large", m.Tile, g.Width, g.Height)
	case g.Transform[1] <= 0 || g.Transform[5] >= 0 || math.IsNaN(g.Transform[0]+g.Transform[1]+g.Transform[3]+g.Transform[5]) || math.IsInf(g.Transform[0]+g.Transform[1]+g.Transform[3]+g.Transform[5], 0):
		return m, fmt.Errorf("manifest of tile %s: geotransform %v is not a north-up grid", m.Tile, g.Transform)
	case m.Scale == 0 || math.IsNaN(m.Scale) || math.IsInf(m.Scale, 0) || math.IsNaN(m.Offset) || math.IsInf(m.Offset, 0):
		return m, fmt.Errorf("manifest of tile %s: scale %g and offset %g are not a scaling", m.Tile, m.Scale, m.Offset)
	}
	if err := config.CheckStackPlanes("manifest bands", m.Bands); err != nil || len(m.Bands) == 0 {
		return m, fmt.Errorf("manifest of tile %s: bands %v: %v", m.Tile, m.Bands, err)
	}
	return m, nil
}

// ManifestGrid is a tile's grid as its manifest records it.
type ManifestGrid struct {
	EPSG      int        `json:"epsg"`
	Transform [6]float64 `json:"geotransform"`
	Width     int        `json:"width"`
	Height    int        `json:"height"`
}

// ManifestMask is the cloud mask a tile's composite applied.
type ManifestMask struct {
	DropSCL []int  `json:"drop_scl"`
	Band    string `json:"band,omitempty"` // a mask band whose nonzero pixels are dropped
	NoData  string `json:"nodata"`
}

// ManifestItem is a source item a tile's composite read.
type ManifestItem struct {
	ID         string                   `json:"id"`
	Href       string                   `json:"href,omitempty"` // the item document, when it has its own
	Collection string                   `json:"collection,omitempty"`
	Datetime   string                   `json:"datetime,omitempty"`
	Assets     map[string]ManifestAsset `json:"assets"`
}

// ManifestAsset is one source file as a tile's manifest.json records it:
// where it is, how to tell that it is unchanged (size and ETag for a remote
// file, SHA-256 for a local raster) and the scaling of its values.
type ManifestAsset struct {
	Href   string  `json:"href"`
	Band   int     `json:"band,omitempty"` // 1-based band of a multi-band raster source
	Size   int64   `json:"size,omitempty"`
	ETag   string  `json:"etag,omitempty"`
	SHA256 string  `json:"sha256,omitempty"` // of a local raster source
	Scale  float64 `json:"scale,omitempty"`
	Offset float64 `json:"offset,omitempty"`
}

// ManifestOutput is one file an output holds, with its size and checksum.
type ManifestOutput struct {
	File string `json:"file"`
	// BLAKE3 is the file's checksum (package digest).
	BLAKE3 string `json:"blake3,omitempty"`
	// SHA256 is the checksum manifests written before lulc switched to
	// BLAKE3 record instead; they still read.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size"`
}

// Multihash is the output's checksum as STAC's file:checksum records it.
func (o ManifestOutput) Multihash() string {
	if o.BLAKE3 == "" && o.SHA256 != "" {
		return "1220" + o.SHA256
	}
	return digest.Multihash(o.BLAKE3)
}

// DescribeAsset records an input's identity: size for local files, size
// and ETag from a HEAD request for HTTP ones. A failed HEAD leaves them
// empty rather than failing an ingest that already read the file.
func DescribeAsset(ctx context.Context, client *http.Client, a catalog.Asset, scale, offset float64) ManifestAsset {
	m := ManifestAsset{Href: redact.URL(a.Href), Scale: scale, Offset: offset}
	switch {
	case strings.HasPrefix(a.Href, "http://"), strings.HasPrefix(a.Href, "https://"):
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(hctx, http.MethodHead, a.Href, nil)
		if err != nil {
			return m
		}
		resp, err := client.Do(req)
		if err != nil {
			return m
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			m.Size, m.ETag = resp.ContentLength, resp.Header.Get("ETag")
		}
	case strings.Contains(a.Href, "://"):
	default:
		if fi, err := os.Stat(a.Href); err == nil {
			m.Size = fi.Size()
		}
	}
	return m
}

// AssetRef is an input for DescribeAssets: the asset and the scale and
// offset its manifest entry records.
type AssetRef struct {
	Asset         catalog.Asset
	Scale, Offset float64
}

// describeAtOnce is how many HEAD requests DescribeAssets has in flight.
const describeAtOnce = 16

// DescribeAssets is DescribeAsset for many inputs: out[i] describes
// refs[i]. A remote catalog is asked about up to describeAtOnce of them
// at once, since each answer is a round trip: a tile's two dozen assets
// asked one after another took a second and more at 50 ms a request.
func DescribeAssets(ctx context.Context, client *http.Client, refs []AssetRef) []ManifestAsset {
	out := make([]ManifestAsset, len(refs))
	sem := make(chan struct{}, describeAtOnce)
	var wg sync.WaitGroup
	for i, r := range refs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = DescribeAsset(ctx, client, r.Asset, r.Scale, r.Offset)
		})
	}
	wg.Wait()
	return out
}

// FileSHA256 returns a file's SHA-256 (hex) and size.
func FileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("checksum %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// SetDark records the tile's dark levels (aligned with bands) and warns
// when they suggest the sources' scaling is declared wrong.
func (m *Manifest) SetDark(bands []string, dark []float64, opt Options) {
	m.Dark = radiometry.ByName(bands, dark)
	m.RadiometryWarning = radiometry.Suspect(bands, dark)
	if m.RadiometryWarning != "" {
		opt.Log.Warn("tile "+m.Tile+": "+m.RadiometryWarning, "tile", m.Tile)
	}
}

// ManifestOffset is offset auto's decision: the offset applied, the
// image's dark levels without one, and why.
type ManifestOffset struct {
	Setting     string            `json:"setting"`
	Applied     float64           `json:"applied"`
	DarkWithout radiometry.Levels `json:"dark_reflectance_p1_without_offset"`
	Reason      string            `json:"reason"`
}

// ManifestCodes are the codes of text classes: how they were decided, and
// each class value (lower case) with its code.
type ManifestCodes struct {
	From  string           `json:"from"`
	Codes map[string]uint8 `json:"codes"`
}

// ManifestValue is a class value that burned no label.
type ManifestValue struct {
	Value    string `json:"value"`
	Why      string `json:"why"`
	Features int    `json:"features"`
}

// manifestScheme is a class scheme as a manifest records it.
type manifestScheme struct {
	Name    string          `json:"name"`
	Classes []manifestClass `json:"classes"`
}

// manifestClass is one class of a recorded scheme, its colour "#rrggbb".
type manifestClass struct {
	Code  uint8  `json:"code"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

// RecordScheme is a scheme as a manifest records it; nil for none.
func RecordScheme(s *landcover.Scheme) *manifestScheme {
	if s == nil {
		return nil
	}
	ms := &manifestScheme{Name: s.Name}
	for _, c := range s.Classes {
		ms.Classes = append(ms.Classes, manifestClass{Code: c.Code, Name: c.Name, Color: fmt.Sprintf("#%02x%02x%02x", c.Color.R, c.Color.G, c.Color.B)})
	}
	return ms
}

// Scheme is the recorded scheme, validated; nil for none.
func (ms *manifestScheme) Scheme() (*landcover.Scheme, error) {
	if ms == nil {
		return nil, nil
	}
	s := landcover.Scheme{Name: ms.Name}
	for _, c := range ms.Classes {
		var r, g, b uint8
		if n, _ := fmt.Sscanf(c.Color, "#%02x%02x%02x", &r, &g, &b); n != 3 {
			return nil, fmt.Errorf("label scheme %s: class %d's colour %q is not #rrggbb", ms.Name, c.Code, c.Color)
		}
		s.Classes = append(s.Classes, landcover.Class{Code: c.Code, Name: c.Name, Color: color.RGBA{r, g, b, 0xff}})
	}
	return &s, s.Validate()
}

// MaxGridPixels bounds an output grid: 2³¹ pixels, a 46,000-pixel square
// (a Sentinel-2 tile at 10 m is 10,980²).
const MaxGridPixels = 1 << 31

// ManifestLayer describes one layer plane of a stack: its source, how it
// was resampled and scaled, and the map from its plane's values to its
// units (features.Layer), with how much of the tile it covers.
type ManifestLayer struct {
	Name string `json:"name"`
	// Kind is elevation, slope, aspect, backscatter or raster.
	Kind string `json:"kind"`
	// Source: the rasters read (a file, or the items' assets), or the
	// layer derived from.
	Rasters    []string `json:"rasters,omitempty"`
	Items      []string `json:"items,omitempty"`
	Derived    string   `json:"derived_from,omitempty"`
	Band       int      `json:"band,omitempty"`
	Resampling string   `json:"resampling,omitempty"`
	// Scale and Offset took the raster's values to the layer's units;
	// Units says which backscatter ones (db: 10·log10 of the median's
	// linear power, on the host).
	Scale  float64 `json:"scale"`
	Offset float64 `json:"offset"`
	Units  string  `json:"units,omitempty"`
	// Range is the span the plane resolves; Map its plane-to-units map.
	Range [2]float64      `json:"range"`
	Map   features.Affine `json:"map"`
	// Valid is the share of the tile's pixels with a value, Clamped the
	// share whose value lay beyond Range.
	Valid   float64 `json:"valid_fraction"`
	Clamped float64 `json:"clamped_fraction"`
}

// FeatureLayers are the manifest's layers as a feature set takes them.
func (m Manifest) FeatureLayers() []features.Layer {
	out := make([]features.Layer, len(m.Layers))
	for i, l := range m.Layers {
		out[i] = features.Layer{Name: l.Name, Map: l.Map}
	}
	return out
}

// HasCOGStack says, for a tile of an ingest output, whether its stack is
// the COGs that lulc's stages read, with an error that says what to do
// when the tile has only a Zarr store (output.stack: zarr).
func HasCOGStack(dir string, m Manifest, stageName string) error {
	for _, o := range m.Outputs {
		if o.File == "stack.tif" {
			return nil
		}
	}
	for _, o := range m.Outputs {
		if strings.HasPrefix(o.File, "stack.zarr/") {
			return fmt.Errorf("tile %s (%s) holds its stack as a Zarr store only (stack.zarr), for xarray; lulc %s reads the COG stack: ingest again with output.stack: [cog, zarr]", m.Tile, dir, stageName)
		}
	}
	// Manifests that list no outputs at all are left to the readers,
	// which name the file they cannot open.
	return nil
}
