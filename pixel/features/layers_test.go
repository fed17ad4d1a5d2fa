package features

import (
	"math"
	"strings"
	"testing"
)

// layerTile is contextTile with two layers after the bands: an elevation
// plane (values up to the clamp and beyond it) and a backscatter plane.
func layerTile(w, h int) ([]string, []Layer, [][]float32) {
	bands, planes := contextTile(w, h, 7)
	layers := []Layer{{Name: "elevation", Map: Affine{Scale: 2375, Offset: -500}}, {Name: "VV", Map: Affine{Scale: -17.5, Offset: -50.3}}}
	for k := range layers {
		p := make([]float32, w*h)
		for i := range p {
			p[i] = float32(float32((i*7+k*13)%4100)*1e-3) - 0.05
			if (i+k)%53 == 0 {
				p[i] = float32(math.NaN())
			}
		}
		bands = append(bands, layers[k].Name)
		planes = append(planes, p)
	}
	return bands, layers, planes
}

// TestLayerFeatures checks a layer's value (its plane, mapped) and its
// context features: the statistic of the plane values, the mean mapped by
// the layer's map and a spread by |a| alone, the same through
// ContextCompute and ContextAt.
func TestLayerFeatures(t *testing.T) {
	const w, h = 67, 41
	bands, layers, planes := layerTile(w, h)
	names := []string{"elevation", "VV", "ndvi", "mean(elevation,7)", "std(elevation,7)", "range(VV,5)", "mean(VV,3)"}
	set, err := NewSet(names, bands, layers...)
	if err != nil {
		t.Fatal(err)
	}
	n := w * h
	ctx := make([][]float32, len(set.ContextFeatures()))
	for k := range ctx {
		ctx[k] = make([]float32, n)
	}
	if err := set.ContextCompute(ctx, planes, Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(names))
	for f := range out {
		out[f] = make([]float32, n)
	}
	if err := (CPU{Set: set}).Compute(out, append(planes, ctx...)); err != nil {
		t.Fatal(err)
	}
	// The same set without maps: what the planes alone give.
	plain := []Layer{{Name: "elevation", Map: Affine{Scale: 1}}, {Name: "VV", Map: Affine{Scale: 1}}}
	raw, err := NewSet(names, bands, plain...)
	if err != nil {
		t.Fatal(err)
	}
	rawCtx := make([][]float32, len(ctx))
	for k := range rawCtx {
		rawCtx[k] = make([]float32, n)
	}
	if err := raw.ContextCompute(rawCtx, planes, Rect{Width: w, Height: h, InnerW: w, InnerH: h}); err != nil {
		t.Fatal(err)
	}
	el, vv := layers[0].Map, layers[1].Map
	spread := func(m Affine) Affine { return Affine{Scale: float32(math.Abs(float64(m.Scale)))} }
	want := map[string]func(i int) float32{
		"elevation":         func(i int) float32 { return el.Apply(planes[10][i]) },
		"VV":                func(i int) float32 { return vv.Apply(planes[11][i]) },
		"mean(elevation,7)": func(i int) float32 { return el.Apply(rawCtx[0][i]) },
		"std(elevation,7)":  func(i int) float32 { return rawCtx[1][i] * 2375 },
		"range(VV,5)":       func(i int) float32 { return spread(vv).Apply(rawCtx[2][i]) },
		"mean(VV,3)":        func(i int) float32 { return vv.Apply(rawCtx[3][i]) },
	}
	nonNaN := 0
	for f, name := range names {
		wf := want[name]
		if wf == nil {
			continue
		}
		for i := range n {
			got, w := out[f][i], wf(i)
			if math.Float32bits(got) != math.Float32bits(w) && !(got != got && w != w) {
				t.Fatalf("%s at %d: %v, want %v", name, i, got, w)
			}
			if got == got {
				nonNaN++
			}
		}
	}
	if nonNaN < n*5 {
		t.Fatalf("only %d values are numbers", nonNaN)
	}
	// The layer's own value is in its units: a plane of 0.2 is 0.2 × 2375 − 500 m.
	if got := el.Apply(0.2); got != float32(float32(0.2*float32(2375)))-500 || math.Abs(float64(got)-(-25)) > 1e-3 {
		t.Errorf("elevation of plane 0.2: %v", got)
	}
	// ContextAt gives ContextCompute's bits, maps included.
	xs, ys := []int{0, 66, 30, 12}, []int{0, 40, 20, 33}
	at := make([]float32, len(xs)*len(ctx))
	if err := set.ContextAt(at, xs, ys, w, h, func(b, i int) float32 { return planes[b][i] }); err != nil {
		t.Fatal(err)
	}
	for p := range xs {
		for k := range ctx {
			g, w := at[p*len(ctx)+k], ctx[k][ys[p]*w+xs[p]]
			if math.Float32bits(g) != math.Float32bits(w) {
				t.Errorf("ContextAt pixel %d feature %d: %v, ContextCompute %v", p, k, g, w)
			}
		}
	}
}

// TestLayerNames checks what a layer may be called and what a set says of
// a layer it lacks or a layer given to a temporal statistic.
func TestLayerNames(t *testing.T) {
	for _, bad := range []string{"B04", "red", "ndvi", "default", "mean", "labels", "9lives", "a b", ""} {
		if err := CheckLayerName(bad); err == nil {
			t.Errorf("layer name %q accepted", bad)
		}
	}
	for _, good := range []string{"elevation", "VV", "slope", "emb_03", "s1-vh"} {
		if err := CheckLayerName(good); err != nil {
			t.Errorf("layer name %q: %v", good, err)
		}
	}
	bands := []string{"B04", "B08", "elevation"}
	layers := []Layer{{Name: "elevation", Map: Affine{Scale: 2375, Offset: -500}}}
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"slope"}, "the stack's layers: elevation"},
		{[]string{"mean(VH,7)"}, "the stack's layers: elevation"},
		{[]string{"p50(elevation)"}, "layer elevation has one value per pixel"},
		{[]string{"nd(elevation,B04)"}, "nd takes two Sentinel-2 bands; elevation is a layer"},
	} {
		_, err := NewSet(c.names, bands, layers...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.names, err, c.want)
		}
	}
	if _, err := NewSet([]string{"elevation"}, []string{"B04"}); err == nil || !strings.Contains(err.Error(), "the stack has no layers") {
		t.Errorf("a layer of a stack without layers: %v", err)
	}
	// A layer's context features split from a draw's values by their form.
	b, c := SplitValues([]string{"B04", "elevation", "mean(elevation,7)", "std(B04,3)"})
	if len(b) != 2 || len(c) != 2 {
		t.Errorf("SplitValues: %v, %v", b, c)
	}
}
