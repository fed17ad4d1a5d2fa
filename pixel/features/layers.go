package features

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Layers are a stack's planes that are not Sentinel-2 reflectance:
// elevation and what is derived from it, radar backscatter, a band of the
// user's own (an embedding, a product). The stack keeps every plane in one
// encoding (package stack: UInt16 digital numbers, value = DN × Scale +
// Offset, the reflectance scale), so a layer is held there mapped into it:
// its plane value p stands for the layer's value float32(float32(p × a) +
// b), a and b being the layer's Map, which ingest chooses so that the
// layer's range lies in p's [0, 4] and records in the stack's manifest.
//
// A feature named like a layer ("elevation") is that value, in the
// layer's own units; a context feature of a layer (mean(elevation, 7)) is
// computed on the plane values, whose [0, 4] lies inside the context
// arithmetic's exact range, and mapped after: the mean by the layer's Map,
// the standard deviation and the range by |a| alone. Both mappings are
// one float32 product and one float32 sum, each rounded, which the GPU
// twins reproduce. A layer has no dates, so no temporal feature takes one.

// Affine is a layer's map from its plane's values to its own units:
// float32(float32(p × Scale) + Offset).
type Affine struct {
	Scale  float32 `json:"scale"`
	Offset float32 `json:"offset"`
}

// Apply maps a plane value (NaN stays NaN, canonical).
func (a Affine) Apply(p float32) float32 {
	v := float32(p*a.Scale) + a.Offset
	if v != v {
		return nan32
	}
	return v
}

// Layer names a stack plane that is not reflectance and maps its values
// to the layer's units.
type Layer struct {
	Name string `json:"name"`
	Map  Affine `json:"map"`
}

// CheckLayerName accepts a layer's name: letters, digits, '_' and '-',
// starting with a letter, and not a Sentinel-2 band, an asset key or an
// index (which the name would hide), nor a named feature set.
func CheckLayerName(name string) error {
	if err := CheckSeasonName(name); err != nil {
		return fmt.Errorf("layer name %q: use letters, digits, _ and -, starting with a letter", name)
	}
	if _, err := LookupBand(name); err == nil {
		return fmt.Errorf("layer name %q is a Sentinel-2 band's name", name)
	}
	if _, ok := registry[strings.ToLower(name)]; ok {
		return fmt.Errorf("layer name %q is a spectral index's name", name)
	}
	if _, ok := named[name]; ok {
		return fmt.Errorf("layer name %q is a named feature set's", name)
	}
	switch strings.ToLower(name) {
	case "nd", "mean", "std", "range", "season", "labels", "count", "scl":
		return fmt.Errorf("layer name %q is reserved", name)
	}
	return nil
}

// feature is the per-pixel feature of the layer: its plane, mapped.
func (l Layer) feature() Feature {
	m := l.Map
	return Feature{Name: l.Name, Kind: "layer", Inputs: []string{l.Name}, Op: "affine", Map: &m,
		fn: func(v []float32) float32 { return m.Apply(v[0]) }}
}

// layerContext makes a context feature of a layer summarise the layer's
// plane values (its base reads the plane as a band) and map the result:
// the mean as the layer's values are mapped, a spread by |a| alone.
func layerContext(f *Feature) {
	m := *f.Base.Map
	if f.Stat != "mean" {
		m = Affine{Scale: float32(math.Abs(float64(m.Scale)))}
	}
	f.Map = &m
	base := *f.Base
	base.Op, base.Map = "band", nil
	base.fn = func(v []float32) float32 { return v[0] }
	f.Base = &base
}

// layerSet is what a parse knows of the stack's layers: nil, none (a
// name alone, out of a stack's context); else its list, or any name of a
// layer's form (where only a name's form matters: SplitValues).
type layerSet struct {
	list []Layer
	any  bool
}

// lookup finds the layer called name.
func (ls *layerSet) lookup(name string) (Layer, bool) {
	if ls == nil {
		return Layer{}, false
	}
	if ls.any {
		return Layer{Name: name, Map: Affine{Scale: 1}}, CheckLayerName(name) == nil
	}
	i := slices.IndexFunc(ls.list, func(l Layer) bool { return l.Name == name })
	if i < 0 {
		return Layer{}, false
	}
	return ls.list[i], true
}

// known says, for an unknown feature's error, which layers the stack has.
func (ls *layerSet) known() string {
	switch {
	case ls == nil || ls.any:
		return ""
	case len(ls.list) == 0:
		return "; the stack has no layers (ingest's layers section adds elevation, backscatter or rasters of your own: docs/ingest.md, Layers)"
	}
	names := make([]string, len(ls.list))
	for i, l := range ls.list {
		names[i] = l.Name
	}
	return "; the stack's layers: " + strings.Join(names, ", ")
}

// mapContext maps the context features of layers in dst (one plane per
// context feature, in ContextFeatures' order) to their layers' units.
func (s *Set) mapContext(dst [][]float32) {
	for k, fi := range s.ContextFeatures() {
		if m := s.Features[fi].Map; m != nil {
			p := dst[k]
			parallel(len(p), 1<<14, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					p[i] = m.Apply(p[i])
				}
			})
		}
	}
}

// MapContextAt maps the context features of layers among ContextAt's
// pixel-major values to their layers' units, as ContextAt does before it
// returns: for a twin that computes ContextAt's values on plane values.
func (s *Set) MapContextAt(dst []float32) {
	ctx := s.ContextFeatures()
	for k, fi := range ctx {
		if m := s.Features[fi].Map; m != nil {
			for i := k; i < len(dst); i += len(ctx) {
				dst[i] = m.Apply(dst[i])
			}
		}
	}
}
