package features

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Policy for missing data and division by zero, shared by every feature
// and by the forest (which bins NaN to its own code): a NaN input gives a
// NaN output, and a ratio whose denominator is zero is NaN. Every NaN
// output is the canonical quiet NaN (bits 0x7fc00000), whatever produced
// it (∞ − ∞ gives another NaN on x86 than on a GPU). Reflectances come from
// the stack (NaN where it holds no valid observation).
//
// Every index is one float32 expression evaluated in the order written,
// with explicit float32 conversions after each product so that no compiler
// fuses a multiply and an add: the CUDA twins must reproduce these bits.

// Feature is one feature: per pixel, a raw band, a named spectral index or
// a normalised difference of two bands; or a context feature, a statistic
// of a per-pixel feature over a window (context.go).
type Feature struct {
	Name   string   // as configured: "ndvi", "B04", "nd(B08,B11)", "mean(B08,15)", "p10(ndvi)"
	Kind   string   // "band", "index", "nd", "context", "temporal" or "layer"
	Index  string   // registry name for Kind "index"
	Inputs []string // lulc band names it reads, in the order fn takes them
	// Op names the expression for the GPU twin: band, nd, evi, savi or bsi
	// (every registry ratio is an nd of its two inputs), context, or shift
	// (a temporal plane of an index: the plane − TemporalShift), or affine
	// (a layer: its plane mapped by Map).
	Op string
	// Stat ("mean", "std" or "range"), Size (the window's odd side) and
	// Base (the per-pixel feature summarised) describe a context feature.
	Stat string
	Size int
	Base *Feature
	// Percentile (1–99) or Season (a season's name) says which statistic
	// over the dates a temporal feature is (temporal.go); Base is then the
	// feature summarised. The stack holds the values as a plane of the
	// feature's own name, its one input.
	Percentile int
	Season     string
	// Map, for a layer and a context feature of one, takes the value
	// computed on the layer's plane to the layer's units (layers.go).
	Map *Affine
	fn  func(in []float32) float32
}

// index is a registry entry: inputs as band names and the expression.
type index struct {
	inputs []string
	doc    string
	fn     func(in []float32) float32
}

// ops gives the GPU operation of the indices that are not plain nd.
var ops = map[string]string{"evi": "evi", "savi": "savi", "bsi": "bsi"}

// nd is the normalised difference (a − b) / (a + b).
func nd(a, b float32) float32 {
	den := a + b
	if den == 0 {
		return float32(math.NaN())
	}
	return (a - b) / den
}

// registry holds the spectral indices, by lower-case name.
var registry = map[string]index{
	"ndvi":  {[]string{"B08", "B04"}, "(NIR − red) / (NIR + red)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"ndwi":  {[]string{"B03", "B08"}, "McFeeters: (green − NIR) / (green + NIR)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"mndwi": {[]string{"B03", "B11"}, "(green − SWIR1) / (green + SWIR1)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"ndbi":  {[]string{"B11", "B08"}, "(SWIR1 − NIR) / (SWIR1 + NIR)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"nbr":   {[]string{"B08", "B12"}, "(NIR − SWIR2) / (NIR + SWIR2)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"ndmi":  {[]string{"B08", "B11"}, "(NIR − SWIR1) / (NIR + SWIR1)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"ndre1": {[]string{"B08", "B05"}, "(NIR − red edge 1) / (NIR + red edge 1)", func(v []float32) float32 { return nd(v[0], v[1]) }},
	"evi": {[]string{"B08", "B04", "B02"}, "2.5 (NIR − red) / (NIR + 6 red − 7.5 blue + 1)", func(v []float32) float32 {
		n, r, b := v[0], v[1], v[2]
		den := float32(float32(n+float32(6*r))-float32(7.5*b)) + 1
		if den == 0 {
			return float32(math.NaN())
		}
		return float32(2.5*float32(n-r)) / den
	}},
	"savi": {[]string{"B08", "B04"}, "1.5 (NIR − red) / (NIR + red + 0.5)", func(v []float32) float32 {
		n, r := v[0], v[1]
		den := float32(n+r) + 0.5
		if den == 0 {
			return float32(math.NaN())
		}
		return float32(1.5*float32(n-r)) / den
	}},
	"bsi": {[]string{"B11", "B04", "B08", "B02"}, "((SWIR1 + red) − (NIR + blue)) / ((SWIR1 + red) + (NIR + blue))", func(v []float32) float32 {
		return nd(v[0]+v[1], v[2]+v[3])
	}},
}

// Indices lists the registry's names with their formulas, sorted.
func Indices() []string {
	var out []string
	for name, ix := range registry {
		out = append(out, fmt.Sprintf("%s = %s", name, ix.doc))
	}
	slices.Sort(out)
	return out
}

// ParseFeature parses a configured feature name: a band ("B04" or an
// asset key such as "red"), an index name ("ndvi"), a custom normalised
// difference "nd(a, b)" of two bands, a context feature "stat(f, size)"
// with stat mean, std or range, or a temporal feature "pNN(f)" or
// "season(f, name)" (temporal.go).
func ParseFeature(name string) (Feature, error) { return parse(name, nil) }

// parse is ParseFeature with the stack's layers (layers.go), which a name
// may also give when ls is not nil.
func parse(name string, ls *layerSet) (Feature, error) {
	s := strings.TrimSpace(name)
	if f, ok, err := parseContext(s, ls); ok {
		return f, err
	}
	if f, ok, err := parseTemporal(s, ls); ok {
		return f, err
	}
	if ix, ok := registry[strings.ToLower(s)]; ok {
		op := ops[strings.ToLower(s)]
		if op == "" {
			op = "nd"
		}
		return Feature{Name: strings.ToLower(s), Kind: "index", Index: strings.ToLower(s), Inputs: ix.inputs, Op: op, fn: ix.fn}, nil
	}
	if strings.HasPrefix(s, "nd(") && strings.HasSuffix(s, ")") {
		args := strings.Split(s[3:len(s)-1], ",")
		if len(args) != 2 {
			return Feature{}, fmt.Errorf("feature %q: nd takes two bands, as in nd(nir, swir16)", name)
		}
		for _, arg := range args {
			if l, ok := ls.lookup(strings.TrimSpace(arg)); ok {
				return Feature{}, fmt.Errorf("feature %q: nd takes two Sentinel-2 bands; %s is a layer, a feature itself, which context functions take: mean(%s, 7)", name, l.Name, l.Name)
			}
		}
		a, err := LookupBand(strings.TrimSpace(args[0]))
		if err != nil {
			return Feature{}, fmt.Errorf("feature %q: %w", name, err)
		}
		b, err := LookupBand(strings.TrimSpace(args[1]))
		if err != nil {
			return Feature{}, fmt.Errorf("feature %q: %w", name, err)
		}
		return Feature{Name: "nd(" + a.Name + "," + b.Name + ")", Kind: "nd", Inputs: []string{a.Name, b.Name}, Op: "nd",
			fn: func(v []float32) float32 { return nd(v[0], v[1]) }}, nil
	}
	if b, err := LookupBand(s); err == nil {
		return Feature{Name: b.Name, Kind: "band", Inputs: []string{b.Name}, Op: "band", fn: func(v []float32) float32 { return v[0] }}, nil
	}
	if l, ok := ls.lookup(s); ok {
		return l.feature(), nil
	}
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return Feature{}, fmt.Errorf("unknown feature %q (indices: %s; or a band such as B04, nd(a, b), mean|std|range(feature, size), pNN(feature) or season(feature, name))%s", name, strings.Join(names, ", "), ls.known())
}

// Set is an ordered list of features computed from a stack whose bands
// come in a known order.
type Set struct {
	Features []Feature
	Bands    []string // the stack's band order
	Layers   []Layer  // the stack's layers, each one of Bands
	inputs   [][]int  // per feature, positions of its inputs in Bands
	// contextPlane is, per context feature, its plane among a Computer's
	// inputs (after the bands).
	contextPlane map[int]int
}

// Planes is the number of input planes a Computer takes: the bands, then
// a plane per context feature.
func (s *Set) Planes() int { return len(s.Bands) + len(s.contextPlane) }

// NewSet parses the feature names against the stack's bands and layers
// (its planes that are not reflectance: elevation, backscatter, …; each
// also named in bands), and fails naming any band a feature needs that
// the stack lacks.
func NewSet(names, bands []string, layers ...Layer) (*Set, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("no features configured")
	}
	s := &Set{Bands: bands, Layers: layers}
	ls := &layerSet{list: layers}
	seen := map[string]bool{}
	for _, n := range names {
		f, err := parse(n, ls)
		if err != nil {
			return nil, err
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("feature %s listed twice", f.Name)
		}
		seen[f.Name] = true
		var pos []int
		for _, in := range f.Inputs {
			i := slices.Index(bands, in)
			if i < 0 && (f.Kind == "temporal" || f.Base != nil && f.Base.Kind == "temporal") {
				return nil, fmt.Errorf("feature %s needs the temporal plane %s, which the stack lacks: the ingest config's temporal section makes it (stack planes: %s)", f.Name, in, strings.Join(bands, ", "))
			}
			if i < 0 {
				return nil, fmt.Errorf("feature %s needs band %s, which the stack lacks (stack bands: %s)", f.Name, in, strings.Join(bands, ", "))
			}
			pos = append(pos, i)
		}
		if f.Kind == "context" {
			if s.contextPlane == nil {
				s.contextPlane = map[int]int{}
			}
			s.contextPlane[len(s.Features)] = len(bands) + len(s.contextPlane)
		}
		s.Features = append(s.Features, f)
		s.inputs = append(s.inputs, pos)
	}
	return s, nil
}

// Inputs returns the stack positions of feature f's inputs.
func (s *Set) Inputs(f int) []int { return s.inputs[f] }

// Names returns the feature names in order.
func (s *Set) Names() []string {
	out := make([]string, len(s.Features))
	for i, f := range s.Features {
		out[i] = f.Name
	}
	return out
}

// Computer computes a Set's features for a window of pixels. src holds one
// reflectance plane per stack band, then, when the set has context
// features, one plane per context feature (Set.ContextCompute's, which a
// context feature's value is taken from); dst one plane per feature, of
// the same length. The CPU implementation below is the reference; the GPU one in
// package cuda implements the same interface.
type Computer interface {
	Compute(dst, src [][]float32) error
}

// CPU computes features with Go on all cores.
type CPU struct{ Set *Set }

// Compute implements Computer.
func (c CPU) Compute(dst, src [][]float32) error {
	s := c.Set
	if len(src) != s.Planes() || len(dst) != len(s.Features) {
		return fmt.Errorf("features: %d input planes and %d feature planes for %d bands, %d context features and %d features", len(src), len(dst), len(s.Bands), s.Planes()-len(s.Bands), len(s.Features))
	}
	n := len(src[0])
	for _, p := range append(append([][]float32{}, src...), dst...) {
		if len(p) != n {
			return fmt.Errorf("features: planes of %d and %d pixels", n, len(p))
		}
	}
	workers := runtime.GOMAXPROCS(0)
	chunk := max(4096, (n+workers-1)/workers)
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		wg.Go(func() {
			in := make([]float32, 4)
			for fi, f := range s.Features {
				pos := s.inputs[fi]
				out := dst[fi]
				if f.Kind == "context" {
					copy(out[lo:hi], src[s.contextPlane[fi]][lo:hi])
					continue
				}
				for i := lo; i < hi; i++ {
					nan := false
					for k, p := range pos {
						v := src[p][i]
						in[k] = v
						nan = nan || v != v
					}
					if nan {
						out[i] = float32(math.NaN())
						continue
					}
					v := f.fn(in[:len(pos)])
					if v != v {
						v = float32(math.NaN()) // canonical: see the policy above
					}
					out[i] = v
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// Columns turns n rows of width values each (row-major, as samples are
// stored) into width planes of n values, the layout a Computer and the
// predictors take.
func Columns(x []float32, width int) [][]float32 {
	n := len(x) / width
	planes := make([][]float32, width)
	for c := range planes {
		planes[c] = make([]float32, n)
	}
	byRows(n, func(lo, hi int) {
		// Blocks of rows read plane by plane while they stay in cache
		// (Rows' reason, the other way).
		const block = 256
		for b := lo; b < hi; b += block {
			e := min(hi, b+block)
			for c, p := range planes {
				for i := b; i < e; i++ {
					p[i] = x[i*width+c]
				}
			}
		}
	})
	return planes
}

// Rows is Columns' inverse: planes of n values each become n rows of
// len(planes) values, row-major.
func Rows(planes [][]float32) []float32 {
	if len(planes) == 0 {
		return nil
	}
	width, n := len(planes), len(planes[0])
	x := make([]float32, n*width)
	byRows(n, func(lo, hi int) {
		// Blocks of rows that stay in cache while every plane writes
		// into them: a plane at a time over the whole range would bring
		// each row's cache lines in once per plane.
		const block = 256
		for b := lo; b < hi; b += block {
			e := min(hi, b+block)
			for c, p := range planes {
				for i, v := range p[b:e] {
					x[(b+i)*width+c] = v
				}
			}
		}
	})
	return x
}

// byRows runs f over n rows split into a range per core: transposing
// samples is bound by memory, which one core cannot keep busy.
func byRows(n int, f func(lo, hi int)) { parallel(n, 4096, f) }

// parallel runs f over [0, n) split into a range per core, each of at
// least least items (one range when n is below twice that).
func parallel(n, least int, f func(lo, hi int)) {
	parts := max(1, min(runtime.GOMAXPROCS(0), n/least))
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { f(k*n/parts, (k+1)*n/parts) })
	}
	wg.Wait()
}
