package cog

import (
	"encoding/binary"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GeoKeys are the three GeoTIFF tags that carry a CRS: the GeoKey
// directory and the double and ASCII parameters it points into.
type GeoKeys struct {
	Directory []uint16  // GeoKeyDirectory
	Doubles   []float64 // GeoDoubleParams, nil when absent
	ASCII     string    // GeoASCIIParams with its terminating NUL, "" when absent
}

// ParseGeoKeys reads the GeoKey tags of the first IFD of a classic
// little-endian TIFF, such as the one GDAL writes for a CRS.
func ParseGeoKeys(b []byte) (GeoKeys, error) {
	le := binary.LittleEndian
	if len(b) < 8 || string(b[:4]) != "II*\x00" {
		return GeoKeys{}, fmt.Errorf("not a classic little-endian tiff")
	}
	off := int(le.Uint32(b[4:]))
	if off+2 > len(b) {
		return GeoKeys{}, fmt.Errorf("ifd beyond the end")
	}
	n := int(le.Uint16(b[off:]))
	if off+2+12*n > len(b) {
		return GeoKeys{}, fmt.Errorf("ifd beyond the end")
	}
	var k GeoKeys
	for i := range n {
		e := b[off+2+12*i:]
		tag, typ, count := le.Uint16(e), le.Uint16(e[2:]), int(le.Uint32(e[4:]))
		size := map[uint16]int{typeASCII: 1, typeShort: 2, typeDouble: 8}[typ]
		if size == 0 || tag < tagGeoKeyDirectory || tag > tagGeoASCIIParams {
			continue
		}
		val := e[8:12]
		if size*count > 4 {
			at := int(le.Uint32(e[8:]))
			if at+size*count > len(b) {
				return GeoKeys{}, fmt.Errorf("tag %d beyond the end", tag)
			}
			val = b[at : at+size*count]
		}
		switch tag {
		case tagGeoKeyDirectory:
			for j := range count {
				k.Directory = append(k.Directory, le.Uint16(val[2*j:]))
			}
		case tagGeoDoubleParams:
			for j := range count {
				k.Doubles = append(k.Doubles, math.Float64frombits(le.Uint64(val[8*j:])))
			}
		case tagGeoASCIIParams:
			k.ASCII = string(val[:count])
		}
	}
	if len(k.Directory) < 4 {
		return GeoKeys{}, fmt.Errorf("no geokey directory")
	}
	return k, nil
}

// gdalNoData formats a nodata value as GDAL writes the GDAL_NODATA tag.
func gdalNoData(v float64) string {
	if math.IsNaN(v) {
		return "nan" // as GDAL writes it
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprintf("%.18g", v)
}

// gdalMetadataXML builds the GDAL_METADATA tag as GDAL's GeoTIFF driver
// does: dataset items in the given order, then per band its offset and
// scale (unless 0 and 1) and description. It returns "" when there is
// nothing to write.
func gdalMetadataXML(keys []string, items map[string]string, bands []Band) string {
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  <Item name=\"%s\">%s</Item>\n", k, gdalEscape(items[k]))
	}
	for i, band := range bands {
		if band.Scale != 0 && (band.Scale != 1 || band.Offset != 0) {
			fmt.Fprintf(&b, "  <Item name=\"OFFSET\" sample=\"%d\" role=\"offset\">%.18g</Item>\n", i, band.Offset)
			fmt.Fprintf(&b, "  <Item name=\"SCALE\" sample=\"%d\" role=\"scale\">%.18g</Item>\n", i, band.Scale)
		}
		if band.Description != "" {
			fmt.Fprintf(&b, "  <Item name=\"DESCRIPTION\" sample=\"%d\" role=\"description\">%s</Item>\n", i, gdalEscape(band.Description))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "<GDALMetadata>\n" + b.String() + "</GDALMetadata>\n"
}

// gdalEscape escapes a metadata value as GDAL does: once as XML text
// and once more when the XML tree is written, so "&" is stored as
// "&amp;amp;"; GDAL undoes both when reading.
func gdalEscape(s string) string {
	return strings.NewReplacer("&", "&amp;amp;", "<", "&amp;lt;", ">", "&amp;gt;", `"`, "&amp;quot;").Replace(s)
}

// plainMetadataKey reports whether GDAL stores key as an ordinary item of
// the GDAL_METADATA tag (not AREA_OR_POINT nor a TIFFTAG_ item, which it
// turns into TIFF tags or GeoKeys) that needs no escaping.
func plainMetadataKey(key string) bool {
	if key == "" || key == "AREA_OR_POINT" || strings.HasPrefix(key, "TIFFTAG_") {
		return false
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

// plainMetadataValue reports whether s survives GDAL's metadata XML the
// way gdalEscape writes it: valid UTF-8 with no control character other
// than tab and newline.
func plainMetadataValue(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f {
			return false
		}
	}
	return true
}

// tiffColorMap is a palette as a TIFF ColorMap: 256 reds, greens and
// blues scaled to 16 bits (alpha has no place in TIFF; GDAL reads entry
// nodata back as transparent), black past the palette's end.
func tiffColorMap(palette []color.RGBA) []uint16 {
	m := make([]uint16, 3*256)
	for i, c := range palette {
		m[i] = uint16(c.R) * 257
		m[256+i] = uint16(c.G) * 257
		m[512+i] = uint16(c.B) * 257
	}
	return m
}
