// Package landcover defines class schemes: the codes a label or class map
// holds, their names and their display colours.
//
// ESA WorldCover is the default scheme. Later stages read other schemes from
// configs; this package gives them one representation and the checks that
// every stage needs (is this code part of the scheme, what colour does it
// have).
package landcover

import (
	"fmt"
	"image/color"
	"slices"
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
