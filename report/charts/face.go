package charts

import (
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
)

// goRegular is the Go Regular font, parsed once.
var goRegular = sync.OnceValue(func() *opentype.Font {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		panic("charts: the embedded Go Regular font does not parse: " + err.Error())
	}
	return f
})

// legendFace returns the font of the legends and captions lulc draws on
// its images: Go Regular at 12 px, whose glyphs cover Latin, Greek and
// Cyrillic (the WGL4 set), so that a scheme's class names in those
// scripts are drawn as written. A face holds buffers of its own: each
// drawing takes a new one, as quicklooks are drawn concurrently.
func legendFace() font.Face {
	face, err := opentype.NewFace(goRegular(), &opentype.FaceOptions{Size: 12, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		panic("charts: Go Regular at 12 px: " + err.Error())
	}
	return face
}
