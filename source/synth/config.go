package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/landcover"
)

// Config describes a synthetic scene. Every field is explicit in the
// checked-in configs; the same Config and seed give the same bytes.
type Config struct {
	Seed uint64 `yaml:"seed"`
	// Tile is the MGRS-like tile id written into the items ("31TFJ").
	Tile string `yaml:"tile"`
	// EPSG is the UTM CRS of the Sentinel-2 grid (326xx or 327xx).
	EPSG int `yaml:"epsg"`
	// Origin is the upper-left corner of the scene, (easting, northing) in
	// metres. Real tiles start at multiples of 100 km less 20 or 40 m.
	Origin [2]float64 `yaml:"origin"`
	// Size is the scene width and height in 10 m pixels (10980 for a full
	// tile). It must be a multiple of 6 so that 20 m and 60 m grids align.
	Size int `yaml:"size"`
	// Bands60m adds the 60 m bands B01 and B09.
	Bands60m bool `yaml:"bands_60m"`
	// BlockSize is the COG internal tile size: 512 or 1024.
	BlockSize int `yaml:"blocksize"`
	// Compress is the COG compression: DEFLATE, ZSTD or LZW.
	Compress string `yaml:"compress"`
	// PatchSize is the mean diameter of a landscape patch in metres.
	PatchSize float64 `yaml:"patch_size_m"`
	// LabelNoise is the fraction of label pixels given a wrong but plausible
	// class, two thirds in small blobs and a third as scattered pixels.
	LabelNoise float64 `yaml:"label_noise"`
	// WorldCoverYear names the label product (2020 → v100, 2021 → v200).
	WorldCoverYear int `yaml:"worldcover_year"`
	// Classes weighs the WorldCover classes that appear; the landscape
	// modulates the weights (water in lows, snow on highs, …).
	Classes map[int]float64 `yaml:"classes"`
	// Dates are the acquisitions, one STAC item each.
	Dates []Date `yaml:"dates"`
	// LabelPoints, when not 0, is how many labelled points to sample from
	// the label map into a GeoPackage beside it (points.go): vector
	// labels, as field surveys give them.
	LabelPoints int `yaml:"label_points,omitempty"`
	// YourData, when set, also writes the scene as a folder of GeoTIFFs
	// and a GeoPackage of polygons with text classes (yourdata.go).
	YourData *YourData `yaml:"your_data,omitempty"`
	// DEM adds an elevation tile shaped like Copernicus DEM GLO-30's
	// (collection cop-dem-glo-30, layers.go).
	DEM bool `yaml:"dem,omitempty"`
	// Sentinel1 adds radar acquisitions shaped like Sentinel-1 RTC's
	// (collection sentinel-1-rtc: VV and VH gamma0, layers.go).
	Sentinel1 []RadarDate `yaml:"sentinel1,omitempty"`
}

// Date is one acquisition.
type Date struct {
	Datetime time.Time `yaml:"datetime"`
	Platform string    `yaml:"platform"` // sentinel-2a, sentinel-2b or sentinel-2c
	// CloudCover is the percentage of the scene under cloud (SCL 8 and 9).
	CloudCover float64 `yaml:"cloud_cover"`
	// Cirrus is the percentage under thin cirrus only (SCL 10).
	Cirrus float64 `yaml:"cirrus"`
	// NoData is the percentage of the scene outside the swath (DN 0).
	NoData float64 `yaml:"nodata"`
}

// LoadConfig reads a YAML config strictly: unknown keys are errors.
func LoadConfig(path string) (Config, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return Config{}, nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, raw, nil
}

// ParseConfig decodes and validates a YAML config.
func ParseConfig(raw []byte) (Config, error) {
	var cfg Config
	if err := configs.DecodeStrict(raw, &cfg); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// MaxSize bounds the scene side so that index arithmetic and memory stay
// sane; memory is checked separately against the machine.
const MaxSize = 100_000

// Validate reports the first problem in the config, naming the key.
func (c Config) Validate() error {
	switch {
	case c.Size <= 0:
		return fmt.Errorf("size: %d is not a positive number of pixels", c.Size)
	case c.Size > MaxSize:
		return fmt.Errorf("size: %d pixels is larger than the %d lulc supports", c.Size, MaxSize)
	case c.Size%6 != 0:
		return fmt.Errorf("size: %d is not a multiple of 6 (10, 20 and 60 m grids must align; a full tile is 10980)", c.Size)
	case c.Size < 12:
		return fmt.Errorf("size: %d pixels is too small for a scene (at least 12)", c.Size)
	case c.YourData != nil && c.YourData.Fields < 1:
		return fmt.Errorf("your_data.fields: %d is below 1", c.YourData.Fields)
	}
	if c.EPSG < 32601 || c.EPSG > 32760 || (c.EPSG > 32660 && c.EPSG < 32701) {
		return fmt.Errorf("epsg: %d is not a WGS 84 / UTM zone (32601–32660, 32701–32760)", c.EPSG)
	}
	if c.Tile == "" {
		return errors.New("tile: missing (an MGRS-like id such as 31TFJ)")
	}
	if c.BlockSize != 512 && c.BlockSize != 1024 {
		return fmt.Errorf("blocksize: %d is not 512 or 1024", c.BlockSize)
	}
	if !slices.Contains([]string{"DEFLATE", "ZSTD", "LZW"}, c.Compress) {
		return fmt.Errorf("compress: %q is not DEFLATE, ZSTD or LZW", c.Compress)
	}
	if c.PatchSize < 50 || c.PatchSize > 50_000 {
		return fmt.Errorf("patch_size_m: %g is outside 50–50000 m", c.PatchSize)
	}
	if c.LabelNoise < 0 || c.LabelNoise > 0.5 {
		return fmt.Errorf("label_noise: %g is outside 0–0.5", c.LabelNoise)
	}
	if c.WorldCoverYear != 2020 && c.WorldCoverYear != 2021 {
		return fmt.Errorf("worldcover_year: %d is not 2020 or 2021", c.WorldCoverYear)
	}
	if len(c.Classes) == 0 {
		return errors.New("classes: no classes given")
	}
	total := 0.0
	for code, w := range c.Classes {
		if code <= 0 || code > 255 || !landcover.WorldCover.Has(uint8(code)) {
			return fmt.Errorf("classes: unknown class code %d (WorldCover codes are %v)", code, landcover.WorldCover.Codes())
		}
		if w < 0 {
			return fmt.Errorf("classes: weight %g for class %d is negative", w, code)
		}
		total += w
	}
	if total <= 0 {
		return errors.New("classes: all weights are zero")
	}
	if len(c.Dates) == 0 {
		return errors.New("dates: no acquisition dates")
	}
	if c.LabelPoints < 0 || c.LabelPoints > c.Size*c.Size/16 {
		return fmt.Errorf("label_points: %d is outside 0–%d (a point per 16 pixels of the scene at most)", c.LabelPoints, c.Size*c.Size/16)
	}
	seen := map[string]bool{}
	for i, d := range c.Dates {
		if d.Datetime.IsZero() {
			return fmt.Errorf("dates[%d]: datetime missing", i)
		}
		day := d.Datetime.UTC().Format("20060102")
		if seen[day] {
			return fmt.Errorf("dates[%d]: a second acquisition on %s (one per day per tile)", i, day)
		}
		seen[day] = true
		if !slices.Contains([]string{"sentinel-2a", "sentinel-2b", "sentinel-2c"}, d.Platform) {
			return fmt.Errorf("dates[%d]: platform %q is not sentinel-2a, sentinel-2b or sentinel-2c", i, d.Platform)
		}
		for _, p := range []struct {
			name string
			v    float64
		}{{"cloud_cover", d.CloudCover}, {"cirrus", d.Cirrus}, {"nodata", d.NoData}} {
			if p.v < 0 || p.v > 100 {
				return fmt.Errorf("dates[%d]: %s %g is outside 0–100 %%", i, p.name, p.v)
			}
		}
		if d.CloudCover+d.Cirrus > 100 {
			return fmt.Errorf("dates[%d]: cloud_cover + cirrus exceed 100 %%", i)
		}
	}
	return c.validateLayers()
}

// Hash identifies the config's content: the canonical YAML of the decoded
// value, so that comments and key order do not matter.
func (c Config) Hash() string {
	canon, err := yaml.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal config: %v", err)) // a plain struct always marshals
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// Resolved is the config as YAML with every field written out.
func (c Config) Resolved() []byte {
	out, err := yaml.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal config: %v", err))
	}
	return out
}

// EstimateMemory returns the bytes Generate holds at its peak: all band
// buffers of every date, the label raster and the in-memory copies GDAL
// makes while compressing.
func (c Config) EstimateMemory() uint64 {
	n := uint64(c.Size) * uint64(c.Size)
	perDate := n*4*2 + n/4*6*2 + n/4 // 10 m, 20 m bands and SCL
	if c.Bands60m {
		perDate += n / 36 * 2 * 2
	}
	label := n * 5 / 2 // lon/lat footprint of a UTM square at 1/12000°
	var layers uint64
	if len(c.Sentinel1) > 0 {
		layers += 8 * n // one radar date at a time: VV and VH, Float32
	}
	if c.DEM {
		layers += n // the elevation tile at 30 m, Float32, with the lon/lat slack
	}
	return perDate*uint64(len(c.Dates)) + label + 4*n*2 + layers
}

// bandNames lists the band files of an acquisition in write order.
func (c Config) bandNames() []string {
	names := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"}
	if c.Bands60m {
		names = append(names, "B01", "B09")
	}
	return names
}

func (d Date) itemID(tile string) string {
	return fmt.Sprintf("%s_%s_%s_0_L2A", strings.ToUpper(strings.Replace(d.Platform, "sentinel-", "S", 1)), tile, d.Datetime.UTC().Format("20060102"))
}
