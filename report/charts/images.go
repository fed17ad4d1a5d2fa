package charts

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"

	"github.com/lulc/lulc/geo/landcover"
)

// This file renders rasters as in-memory images, for looking at a scene
// (the notebooks show them inline): colour composites of reflectance
// planes, one plane through a colour ramp, a mask painted over an image,
// a class map with its legend, and captions and rows to lay them out.
// Planes are row-major, width × height, as raster reads return them.

// RGB renders three reflectance planes as the red, green and blue channels
// of an image, stretching [lo, hi] linearly onto 0–255 and clipping values
// outside. A pixel that is NaN in any plane is transparent. Red, green and
// blue bands give a true-colour composite; NIR, red and green the classic
// false-colour one, where vegetation is red.
func RGB(r, g, b []float32, width, height int, lo, hi float32) (*image.RGBA, error) {
	n := width * height
	if width <= 0 || height <= 0 || len(r) != n || len(g) != n || len(b) != n {
		return nil, fmt.Errorf("rgb: planes of %d, %d and %d pixels for %d×%d", len(r), len(g), len(b), width, height)
	}
	if !(hi > lo) {
		return nil, fmt.Errorf("rgb: stretch [%g, %g] is empty", lo, hi)
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i := range n {
		if isNaN(r[i]) || isNaN(g[i]) || isNaN(b[i]) {
			continue // stays transparent
		}
		img.Pix[4*i] = stretch(r[i], lo, hi)
		img.Pix[4*i+1] = stretch(g[i], lo, hi)
		img.Pix[4*i+2] = stretch(b[i], lo, hi)
		img.Pix[4*i+3] = 0xff
	}
	return img, nil
}

// VegetationRamp runs from water and bare soil (brown) through sparse
// vegetation (pale yellow) to dense vegetation (dark green): a ramp for
// NDVI and similar indices.
var VegetationRamp = []color.RGBA{
	{0x8c, 0x51, 0x0a, 0xff},
	{0xd8, 0xb3, 0x65, 0xff},
	{0xf6, 0xe8, 0xc3, 0xff},
	{0xa6, 0xd9, 0x6a, 0xff},
	{0x1a, 0x96, 0x41, 0xff},
	{0x00, 0x44, 0x1b, 0xff},
}

// Gradient renders one plane through a colour ramp: lo maps to the first
// colour, hi to the last, and values between are interpolated linearly
// between neighbouring colours (evenly spaced over [lo, hi]); values
// outside are clipped. NaN is transparent.
func Gradient(v []float32, width, height int, lo, hi float32, ramp []color.RGBA) (*image.RGBA, error) {
	if width <= 0 || height <= 0 || len(v) != width*height {
		return nil, fmt.Errorf("gradient: %d pixels for %d×%d", len(v), width, height)
	}
	if !(hi > lo) || len(ramp) < 2 {
		return nil, fmt.Errorf("gradient: needs hi > lo and two colours or more, got [%g, %g] and %d", lo, hi, len(ramp))
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	steps := float64(len(ramp) - 1)
	for i, x := range v {
		if isNaN(x) {
			continue
		}
		t := min(max((float64(x)-float64(lo))/(float64(hi)-float64(lo)), 0), 1) * steps
		k := min(int(t), len(ramp)-2)
		f := t - float64(k)
		a, b := ramp[k], ramp[k+1]
		img.Pix[4*i] = mix(a.R, b.R, f)
		img.Pix[4*i+1] = mix(a.G, b.G, f)
		img.Pix[4*i+2] = mix(a.B, b.B, f)
		img.Pix[4*i+3] = 0xff
	}
	return img, nil
}

// Highlight returns a copy of img with the pixels where mask is true
// painted c: a cloud mask over a composite, say. mask is row-major over
// img's bounds.
func Highlight(img image.Image, mask []bool, c color.RGBA) (*image.RGBA, error) {
	b := img.Bounds()
	if len(mask) != b.Dx()*b.Dy() {
		return nil, fmt.Errorf("highlight: %d mask pixels for a %d×%d image", len(mask), b.Dx(), b.Dy())
	}
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Bounds(), img, b.Min, draw.Src)
	for i, m := range mask {
		if m {
			out.SetRGBA(i%b.Dx(), i/b.Dx(), c)
		}
	}
	return out, nil
}

// ClassMap draws a class map (codes, width × height) shrunk to at most
// maxSide pixels (nearest neighbour) with a legend of the scheme's classes
// present; code 0 (nodata) and codes outside the scheme are transparent.
// It is the picture Quicklook writes to a file.
func ClassMap(codes []uint8, width, height, maxSide int, scheme landcover.Scheme) (*image.RGBA, error) {
	if len(codes) != width*height || width <= 0 || height <= 0 || maxSide <= 0 {
		return nil, fmt.Errorf("class map: %d pixels for %d×%d (at most %d px)", len(codes), width, height, maxSide)
	}
	step := max(1, (max(width, height)+maxSide-1)/maxSide)
	w, h := (width+step-1)/step, (height+step-1)/step
	var palette [256]color.RGBA
	for _, c := range scheme.Classes {
		palette[c.Code] = c.Color
	}
	var present [256]bool
	for _, v := range codes {
		present[v] = true
	}
	var shown []landcover.Class
	for _, c := range scheme.Classes {
		if present[c.Code] {
			shown = append(shown, c)
		}
	}
	const legendW, row = 270, 18
	img := image.NewRGBA(image.Rect(0, 0, w+legendW, max(h, 12+row*len(shown))))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, palette[codes[(y*step)*width+x*step]])
		}
	}
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: legendFace()}
	for i, c := range shown {
		top := 6 + i*row
		draw.Draw(img, image.Rect(w+10, top, w+24, top+14), image.NewUniform(c.Color), image.Point{}, draw.Src)
		d.Dot = fixed.P(w+30, top+11)
		d.DrawString(fmt.Sprintf("%d %s", c.Code, c.Name))
	}
	return img, nil
}

// Titled returns img with a one-line caption above it, on white. The
// caption is drawn in legendFace.
func Titled(title string, img image.Image) *image.RGBA {
	const capH = 20
	face := legendFace()
	b := img.Bounds()
	textW := font.MeasureString(face, title).Ceil()
	out := image.NewRGBA(image.Rect(0, 0, max(b.Dx(), textW+4), b.Dy()+capH))
	draw.Draw(out, out.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	d := &font.Drawer{Dst: out, Src: image.NewUniform(color.Black), Face: face, Dot: fixed.P(2, 14)}
	d.DrawString(title)
	draw.Draw(out, image.Rect(0, capH, b.Dx(), capH+b.Dy()), img, b.Min, draw.Over)
	return out
}

// Row lays images side by side, top-aligned, gap pixels apart, on white.
func Row(gap int, imgs ...image.Image) *image.RGBA {
	w, h := 0, 0
	for i, img := range imgs {
		if i > 0 {
			w += gap
		}
		w += img.Bounds().Dx()
		h = max(h, img.Bounds().Dy())
	}
	out := image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	draw.Draw(out, out.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	x := 0
	for _, img := range imgs {
		b := img.Bounds()
		draw.Draw(out, image.Rect(x, 0, x+b.Dx(), b.Dy()), img, b.Min, draw.Over)
		x += b.Dx() + gap
	}
	return out
}

func isNaN(v float32) bool { return v != v }

func stretch(v, lo, hi float32) uint8 {
	t := (float64(v) - float64(lo)) / (float64(hi) - float64(lo))
	return uint8(math.Round(min(max(t, 0), 1) * 255))
}

func mix(a, b uint8, f float64) uint8 {
	return uint8(math.Round(float64(a) + (float64(b)-float64(a))*f))
}
