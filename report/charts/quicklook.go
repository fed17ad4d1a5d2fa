package charts

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"runtime"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/atomicfs"
)

// Quicklook writes a PNG of a class map (codes, width × height) shrunk to
// at most maxSide pixels (nearest neighbour), with a legend of the classes
// present. Code 0 (nodata) is transparent.
func Quicklook(path string, codes []uint8, width, height, maxSide int, scheme landcover.Scheme) error {
	if len(codes) != width*height || width == 0 || height == 0 {
		return fmt.Errorf("quicklook %s: %d pixels for %d×%d", path, len(codes), width, height)
	}
	step := max(1, (max(width, height)+maxSide-1)/maxSide)
	w, h := (width+step-1)/step, (height+step-1)/step
	var palette [256]color.RGBA
	for _, c := range scheme.Classes {
		palette[c.Code] = c.Color
	}
	const legendW, row = 270, 18
	var shown []landcover.Class
	present := codesPresent(codes)
	for _, c := range scheme.Classes {
		if present[c.Code] {
			shown = append(shown, c)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, w+legendW, max(h, 12+row*len(shown))))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	for y := range h {
		for x := range w {
			if v := codes[(y*step)*width+x*step]; v != 0 {
				img.SetRGBA(x, y, palette[v])
			} else {
				img.SetRGBA(x, y, color.RGBA{})
			}
		}
	}
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: legendFace()}
	for i, c := range shown {
		top := 6 + i*row
		draw.Draw(img, image.Rect(w+10, top, w+24, top+14), image.NewUniform(c.Color), image.Point{}, draw.Src)
		d.Dot = fixed.P(w+30, top+11)
		d.DrawString(fmt.Sprintf("%d %s", c.Code, c.Name))
	}
	f, err := os.Create(atomicfs.TempName(path))
	if err != nil {
		return fmt.Errorf("quicklook %s: %w", path, err)
	}
	// The fastest deflate level: the quicklook is written at the end of
	// every tile, and its size matters less than the job's wall time.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(f, img); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("quicklook %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("quicklook %s: %w", path, err)
	}
	return os.Rename(atomicfs.TempName(path), path)
}

// codesPresent reports which codes occur in codes. A full tile is a
// hundred million pixels: each core scans a range, into an array rather
// than a map.
func codesPresent(codes []uint8) [256]bool {
	parts := max(1, min(runtime.GOMAXPROCS(0), len(codes)>>20))
	seen := make([][256]bool, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			p := &seen[k]
			for _, v := range codes[k*len(codes)/parts : (k+1)*len(codes)/parts] {
				p[v] = true
			}
		})
	}
	wg.Wait()
	var present [256]bool
	for _, p := range seen {
		for v, ok := range p {
			present[v] = present[v] || ok
		}
	}
	return present
}
