// Package landcover defines class schemes: the codes a label or class map
// holds, their names and their display colours.
//
// ESA WorldCover is the default scheme. Later stages read other schemes from
// configs; this package gives them one representation and the checks that
// every stage needs (is this code part of the scheme, what colour does it
// have).
package landcover

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
)

// Class is one land-cover class of a scheme.
type Class struct {
	Code  uint8      // value stored in rasters
	Name  string     // human-readable name, as the scheme's owner writes it
	Color color.RGBA // display colour
}

// Scheme is an ordered set of classes. Code 0 is reserved for nodata.
type Scheme struct {
	Name    string
	Classes []Class
}

// The built-in schemes below (and SCL in scl.go) are data, each legend
// written out in full as its producer publishes it: they look alike, and
// stay apart so that each can be checked against its source line by line.

// WorldCover is the ESA WorldCover 10 m v200 legend with its official colours
// (the colour table embedded in the WorldCover COGs).
var WorldCover = Scheme{
	Name: "esa-worldcover",
	Classes: []Class{
		{10, "Tree cover", color.RGBA{0x00, 0x64, 0x00, 0xff}},
		{20, "Shrubland", color.RGBA{0xff, 0xbb, 0x22, 0xff}},
		{30, "Grassland", color.RGBA{0xff, 0xff, 0x4c, 0xff}},
		{40, "Cropland", color.RGBA{0xf0, 0x96, 0xff, 0xff}},
		{50, "Built-up", color.RGBA{0xfa, 0x00, 0x00, 0xff}},
		{60, "Bare / sparse vegetation", color.RGBA{0xb4, 0xb4, 0xb4, 0xff}},
		{70, "Snow and ice", color.RGBA{0xf0, 0xf0, 0xf0, 0xff}},
		{80, "Permanent water bodies", color.RGBA{0x00, 0x64, 0xc8, 0xff}},
		{90, "Herbaceous wetland", color.RGBA{0x00, 0x96, 0xa0, 0xff}},
		{95, "Mangroves", color.RGBA{0x00, 0xcf, 0x75, 0xff}},
		{100, "Moss and lichen", color.RGBA{0xfa, 0xe6, 0xa0, 0xff}},
	},
}

// EsriIO is Impact Observatory and Esri's 10 m annual land use / land
// cover legend (version 2, as Planetary Computer's io-lulc-annual-v02
// collection declares it in classification:classes, with its colour
// hints; the same legend as Sentinel Hub's custom script for the
// collection). Code 0 (no data) is not a class.
var EsriIO = Scheme{
	Name: "esri-io",
	Classes: []Class{
		{1, "Water", color.RGBA{0x41, 0x9b, 0xdf, 0xff}},
		{2, "Trees", color.RGBA{0x39, 0x7d, 0x49, 0xff}},
		{4, "Flooded vegetation", color.RGBA{0x7a, 0x87, 0xc6, 0xff}},
		{5, "Crops", color.RGBA{0xe4, 0x96, 0x35, 0xff}},
		{7, "Built area", color.RGBA{0xc4, 0x28, 0x1b, 0xff}},
		{8, "Bare ground", color.RGBA{0xa5, 0x9b, 0x8f, 0xff}},
		{9, "Snow/ice", color.RGBA{0xa8, 0xeb, 0xff, 0xff}},
		{10, "Clouds", color.RGBA{0x61, 0x61, 0x61, 0xff}},
		{11, "Rangeland", color.RGBA{0xe3, 0xe2, 0xc3, 0xff}},
	},
}

// Builtin returns the built-in scheme of that name: esa-worldcover or
// esri-io.
func Builtin(name string) (Scheme, bool) {
	for _, s := range []Scheme{WorldCover, EsriIO} {
		if s.Name == name {
			return s, true
		}
	}
	return Scheme{}, false
}

// STACClass is one entry of the STAC classification extension's
// classification:classes.
type STACClass struct {
	Value       int    `json:"value"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// The colour, "rrggbb": classification v1.0 names it color-hint,
	// later versions color_hint.
	ColorHint  string `json:"color-hint,omitempty"`
	ColorHint2 string `json:"color_hint,omitempty"`
}

// FromSTAC makes a scheme named name from classification:classes: each
// class's name (else its description), its colour hint (grey without
// one). Values outside 1–255 (0 is no data) are left out; the result is
// validated.
func FromSTAC(name string, classes []STACClass) (Scheme, error) {
	s := Scheme{Name: name}
	for _, c := range classes {
		if c.Value < 1 || c.Value > 255 {
			continue
		}
		label := c.Name
		if label == "" {
			label = c.Description
		}
		col := color.RGBA{0x80, 0x80, 0x80, 0xff}
		var r, g, b uint8
		if h := strings.TrimPrefix(cmp.Or(c.ColorHint, c.ColorHint2), "#"); len(h) == 6 {
			if n, _ := fmt.Sscanf(h, "%02x%02x%02x", &r, &g, &b); n == 3 {
				col = color.RGBA{r, g, b, 0xff}
			}
		}
		s.Classes = append(s.Classes, Class{Code: uint8(c.Value), Name: label, Color: col})
	}
	return s, s.Validate()
}

// Equal reports whether two schemes have the same classes (codes, names
// and colours, in order).
func (s Scheme) Equal(o Scheme) bool { return slices.Equal(s.Classes, o.Classes) }

// Has reports whether code is a class of the scheme.
func (s Scheme) Has(code uint8) bool {
	_, ok := s.Class(code)
	return ok
}

// Class returns the class with the given code.
func (s Scheme) Class(code uint8) (Class, bool) {
	i := slices.IndexFunc(s.Classes, func(c Class) bool { return c.Code == code })
	if i < 0 {
		return Class{}, false
	}
	return s.Classes[i], true
}

// Codes returns the class codes in scheme order.
func (s Scheme) Codes() []uint8 {
	codes := make([]uint8, len(s.Classes))
	for i, c := range s.Classes {
		codes[i] = c.Code
	}
	return codes
}

// Validate checks that codes are unique and non-zero and names are set.
func (s Scheme) Validate() error {
	if len(s.Classes) == 0 {
		return fmt.Errorf("class scheme %q has no classes", s.Name)
	}
	seen := map[uint8]bool{}
	for _, c := range s.Classes {
		if c.Code == 0 {
			return fmt.Errorf("class scheme %q: code 0 is reserved for nodata", s.Name)
		}
		if seen[c.Code] {
			return fmt.Errorf("class scheme %q: code %d appears twice", s.Name, c.Code)
		}
		if c.Name == "" {
			return fmt.Errorf("class scheme %q: code %d has no name", s.Name, c.Code)
		}
		seen[c.Code] = true
	}
	return nil
}

// Legend returns the scheme as text lines "code  name", the form the
// WorldCover COGs carry in their "legend" metadata item.
func (s Scheme) Legend() string {
	var out []byte
	for _, c := range s.Classes {
		out = fmt.Appendf(out, "%-3d %s\n", c.Code, c.Name)
	}
	return string(out)
}

// CodeOf returns the code of the class whose name is name, compared
// case-insensitively with spaces around it trimmed.
func (s Scheme) CodeOf(name string) (uint8, bool) {
	name = strings.TrimSpace(name)
	for _, c := range s.Classes {
		if strings.EqualFold(c.Name, name) {
			return c.Code, true
		}
	}
	return 0, false
}

// Numbered makes a scheme named name whose classes are names, coded 1, 2,
// … in the order given, each with a colour of its own: hues a golden
// angle apart, so that neighbours differ however many classes there are.
func Numbered(name string, names []string) Scheme {
	s := Scheme{Name: name}
	for i, n := range names {
		s.Classes = append(s.Classes, Class{Code: uint8(i + 1), Name: n, Color: Spread(i)})
	}
	return s
}

// Spread is the colour lulc gives the n-th class that has none of its
// own: hues a golden angle apart, so that neighbours differ however many
// classes there are.
func Spread(n int) color.RGBA { return hue(float64(n) * 137.50776405) }

// hue is the colour of hue h (degrees) at saturation 0.6 and value 0.85.
func hue(h float64) color.RGBA {
	h = math.Mod(h, 360) / 60
	const v, s = 0.85, 0.6
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var r, g, b float64
	switch int(h) {
	case 0:
		r, g = c, x
	case 1:
		r, g = x, c
	case 2:
		g, b = c, x
	case 3:
		g, b = x, c
	case 4:
		r, b = x, c
	default:
		r, b = c, x
	}
	m := v - c
	to8 := func(f float64) uint8 { return uint8(math.Round((f + m) * 255)) }
	return color.RGBA{to8(r), to8(g), to8(b), 0xff}
}
