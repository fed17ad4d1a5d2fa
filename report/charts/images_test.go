package charts

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
)

func TestRGBStretchesAndClips(t *testing.T) {
	nan := float32(math.NaN())
	r := []float32{0, 0.15, 0.3, 0.6}
	g := []float32{0.3, 0.15, 0, nan}
	b := []float32{-0.1, 0.15, 0.3, 0.1}
	img, err := RGB(r, g, b, 2, 2, 0, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	want := []color.RGBA{{0, 255, 0, 255}, {128, 128, 128, 255}, {255, 0, 255, 255}, {}}
	for i, w := range want {
		if got := img.RGBAAt(i%2, i/2); got != w {
			t.Errorf("pixel %d: got %v, want %v", i, got, w)
		}
	}
	if _, err := RGB(r, g, b[:3], 2, 2, 0, 0.3); err == nil {
		t.Error("short plane: no error")
	}
	if _, err := RGB(r, g, b, 2, 2, 0.3, 0.3); err == nil {
		t.Error("empty stretch: no error")
	}
}

func TestGradientEndsAndMiddle(t *testing.T) {
	ramp := []color.RGBA{{0, 0, 0, 255}, {200, 100, 0, 255}, {200, 200, 200, 255}}
	v := []float32{-5, 0, 0.5, 0.75, 1, float32(math.NaN())}
	img, err := Gradient(v, 6, 1, 0, 1, ramp)
	if err != nil {
		t.Fatal(err)
	}
	want := []color.RGBA{ramp[0], ramp[0], ramp[1], {200, 150, 100, 255}, ramp[2], {}}
	for i, w := range want {
		if got := img.RGBAAt(i, 0); got != w {
			t.Errorf("value %g: got %v, want %v", v[i], got, w)
		}
	}
	if _, err := Gradient(v, 6, 1, 0, 1, ramp[:1]); err == nil {
		t.Error("one-colour ramp: no error")
	}
}

func TestHighlightPaintsMaskOnly(t *testing.T) {
	base := image.NewRGBA(image.Rect(0, 0, 2, 1))
	base.SetRGBA(0, 0, color.RGBA{1, 2, 3, 255})
	base.SetRGBA(1, 0, color.RGBA{4, 5, 6, 255})
	magenta := color.RGBA{255, 0, 255, 255}
	out, err := Highlight(base, []bool{false, true}, magenta)
	if err != nil {
		t.Fatal(err)
	}
	if out.RGBAAt(0, 0) != (color.RGBA{1, 2, 3, 255}) || out.RGBAAt(1, 0) != magenta {
		t.Errorf("got %v %v", out.RGBAAt(0, 0), out.RGBAAt(1, 0))
	}
	if base.RGBAAt(1, 0) == magenta {
		t.Error("the input image was changed")
	}
	if _, err := Highlight(base, []bool{true}, magenta); err == nil {
		t.Error("short mask: no error")
	}
}

// ClassMap is the picture Quicklook writes: the two must not drift apart.
func TestClassMapIsTheQuicklook(t *testing.T) {
	const w, h = 300, 200
	codes := make([]uint8, w*h)
	for i := range codes {
		codes[i] = []uint8{0, 10, 30, 80, 7}[(i/w/40+i%w/50)%5] // 7: not a class
	}
	path := filepath.Join(t.TempDir(), "q.png")
	if err := Quicklook(path, codes, w, h, 128, landcover.WorldCover); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ClassMap(codes, w, h, 128, landcover.WorldCover)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bounds() != want.Bounds() {
		t.Fatalf("bounds %v, quicklook %v", got.Bounds(), want.Bounds())
	}
	for y := range got.Bounds().Dy() {
		for x := range got.Bounds().Dx() {
			if g, q := got.At(x, y), color.RGBAModel.Convert(want.At(x, y)); g != q {
				t.Fatalf("pixel (%d, %d): %v, quicklook %v", x, y, g, q)
			}
		}
	}
	// 300 px shrunk to at most 128 (step 3): 100 px of map, then the legend
	// of the three classes present.
	if got.Bounds().Dx() != 100+270 {
		t.Errorf("width %d", got.Bounds().Dx())
	}
	if _, err := ClassMap(codes, w, h+1, 128, landcover.WorldCover); err == nil {
		t.Error("wrong size: no error")
	}
}

func TestTitledAndRowLayout(t *testing.T) {
	a := image.NewRGBA(image.Rect(0, 0, 30, 10))
	b := image.NewRGBA(image.Rect(5, 5, 25, 45)) // bounds need not start at 0
	red := color.RGBA{255, 0, 0, 255}
	b.SetRGBA(5, 5, red)
	row := Row(4, a, b)
	if got := row.Bounds(); got != image.Rect(0, 0, 30+4+20, 40) {
		t.Errorf("row bounds %v", got)
	}
	if row.RGBAAt(34, 0) != red {
		t.Errorf("second image's corner: %v", row.RGBAAt(34, 0))
	}
	titled := Titled("a long caption wider than the image", a)
	if titled.Bounds().Dx() <= 30 || titled.Bounds().Dy() != 30 {
		t.Errorf("titled bounds %v", titled.Bounds())
	}
}

// TestPresentClasses: classes with neither a reference nor a prediction
// leave the confusion chart; the others keep their counts.
func TestPresentClasses(t *testing.T) {
	conf := [][]int64{
		{5, 0, 1},
		{0, 0, 0}, // class B: absent
		{2, 0, 7},
	}
	got, names := presentClasses(conf, []string{"A", "B", "C"})
	if len(got) != 2 || len(names) != 2 || names[0] != "A" || names[1] != "C" || got[0][1] != 1 || got[1][0] != 2 || got[1][1] != 7 {
		t.Fatalf("got %v %v", got, names)
	}
	// Predicted but never in the reference: kept.
	conf[0][1] = 3
	if got, _ := presentClasses(conf, []string{"A", "B", "C"}); len(got) != 3 {
		t.Fatalf("a predicted class was dropped: %v", got)
	}
}

// TestLegendDrawsOtherScripts: class names in Greek and Cyrillic have a
// glyph for every letter in the legends' font (the ASCII-only font before
// drew none), and the quicklook's legend shows them: the name's area is
// inked as much as a Latin name of as many letters.
func TestLegendDrawsOtherScripts(t *testing.T) {
	face := legendFace()
	for _, name := range []string{"Forêt dense", "Δάσος", "Лес и луг", "Wheat"} {
		for _, r := range name {
			if _, ok := face.GlyphAdvance(r); !ok {
				t.Errorf("%q: no glyph for %q", name, r)
			}
		}
	}
	ink := func(name string) int {
		s := landcover.Scheme{Name: "s", Classes: []landcover.Class{{Code: 1, Name: name, Color: color.RGBA{0, 0x64, 0, 0xff}}}}
		codes := make([]uint8, 40*40)
		for i := range codes {
			codes[i] = 1
		}
		img, err := ClassMap(codes, 40, 40, 40, s)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		// The legend's text starts 30 px right of the map.
		for y := 0; y < 24; y++ {
			for x := 40 + 30 + 14; x < img.Bounds().Dx(); x++ {
				if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
					n++
				}
			}
		}
		return n
	}
	latin, cyrillic, greek := ink("Forest"), ink("Лесной"), ink("Δάσους")
	if cyrillic < latin/3 || greek < latin/3 {
		t.Errorf("ink of the legend's name: Latin %d px, Cyrillic %d, Greek %d: the other scripts are not drawn", latin, cyrillic, greek)
	}
}
