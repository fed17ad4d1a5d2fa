package interop

import (
	"bytes"
	"encoding/xml"
	"fmt"

	"github.com/lulc/lulc/geo/landcover"
)

// QML is a class scheme as a QGIS layer style: a paletted renderer of band
// 1 with each class's code, colour and name. QGIS applies a style file
// named after a raster (class.qml beside class.tif) when it opens the
// raster, so the map shows the scheme's colours and names in its legend
// and identify tool without the user picking them.
func QML(s landcover.Scheme) ([]byte, error) {
	type entry struct {
		Value int    `xml:"value,attr"`
		Color string `xml:"color,attr"`
		Alpha int    `xml:"alpha,attr"`
		Label string `xml:"label,attr"`
	}
	type renderer struct {
		Type         string   `xml:"type,attr"`
		Band         int      `xml:"band,attr"`
		Opacity      int      `xml:"opacity,attr"`
		AlphaBand    int      `xml:"alphaBand,attr"`
		Transparency struct{} `xml:"rasterTransparency"`
		Palette      []entry  `xml:"colorPalette>paletteEntry"`
	}
	type style struct {
		XMLName    xml.Name `xml:"qgis"`
		Version    string   `xml:"version,attr"`
		Categories string   `xml:"styleCategories,attr"`
		Renderer   renderer `xml:"pipe>rasterrenderer"`
	}
	if len(s.Classes) == 0 {
		return nil, fmt.Errorf("qml: scheme %q has no classes", s.Name)
	}
	st := style{Version: "3.28", Categories: "Symbology", Renderer: renderer{Type: "paletted", Band: 1, Opacity: 1, AlphaBand: -1}}
	for _, c := range s.Classes {
		st.Renderer.Palette = append(st.Renderer.Palette, entry{
			Value: int(c.Code), Color: fmt.Sprintf("#%02x%02x%02x", c.Color.R, c.Color.G, c.Color.B), Alpha: 255, Label: c.Name,
		})
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n")
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(st); err != nil {
		return nil, fmt.Errorf("qml: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
