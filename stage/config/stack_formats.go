package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Stack formats.
const (
	// StackCOG is the stack as Cloud-Optimized GeoTIFFs (stack.tif,
	// labels.tif, valid_count.tif): what lulc's train, predict and chips
	// read.
	StackCOG = "cog"
	// StackZarr is the stack as one Zarr v3 store per tile (stack.zarr):
	// for xarray and other Zarr readers.
	StackZarr = "zarr"
)

// StackFormats are the formats a stack is written in, in the order cog,
// zarr. In YAML: a format (zarr), a list ([cog, zarr]), or true (cog)
// and false (none), as run's outputs.stack was first spelled.
type StackFormats []string

// UnmarshalYAML reads a word, a list or a boolean.
func (f *StackFormats) UnmarshalYAML(n *yaml.Node) error {
	var words []string
	switch n.Kind {
	case yaml.ScalarNode:
		var b bool
		if n.Tag == "!!bool" && n.Decode(&b) == nil {
			*f = nil
			if b {
				*f = StackFormats{StackCOG}
			}
			return nil
		}
		words = []string{n.Value}
	case yaml.SequenceNode:
		if err := n.Decode(&words); err != nil {
			return fmt.Errorf("line %d: a list of formats (cog, zarr): %w", n.Line, err)
		}
		if len(words) == 0 {
			return fmt.Errorf("line %d: an empty list of formats: give cog, zarr or both, or false for no stack", n.Line)
		}
	default:
		return fmt.Errorf("line %d: a format (cog or zarr), a list of them, or true/false", n.Line)
	}
	out, err := ParseStackFormats(words)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*f = out
	return nil
}

// ParseStackFormats checks formats named in a config or flag, each once.
func ParseStackFormats(words []string) (StackFormats, error) {
	var out StackFormats
	for _, w := range words {
		w = strings.ToLower(strings.TrimSpace(w))
		if w != StackCOG && w != StackZarr {
			return nil, fmt.Errorf("stack format %q: not cog or zarr", w)
		}
		if slices.Contains(out, w) {
			return nil, fmt.Errorf("stack format %s given twice", w)
		}
		out = append(out, w)
	}
	slices.Sort(out) // cog before zarr
	return out, nil
}

// MarshalJSON writes the COG stack alone as true and no stack as false,
// as run configs' hashes had them before Zarr, so that their runs resume.
func (f StackFormats) MarshalJSON() ([]byte, error) {
	switch {
	case len(f) == 0:
		return []byte("false"), nil
	case slices.Equal(f, StackFormats{StackCOG}):
		return []byte("true"), nil
	}
	return json.Marshal([]string(f))
}

// MarshalYAML writes the formats as a list.
func (f StackFormats) MarshalYAML() (any, error) { return []string(f), nil }

// COG reports whether the stack is written as COGs.
func (f StackFormats) COG() bool { return slices.Contains(f, StackCOG) }

// Zarr reports whether the stack is written as a Zarr store.
func (f StackFormats) Zarr() bool { return slices.Contains(f, StackZarr) }

// Any reports whether a stack is written at all.
func (f StackFormats) Any() bool { return len(f) > 0 }

// StackFormats are the formats ingest writes its stack in: output.stack,
// the COGs by default.
func (c IngestConfig) StackFormats() StackFormats {
	if len(c.Output.Stack) == 0 {
		return StackFormats{StackCOG}
	}
	return c.Output.Stack
}

// ZarrArrays names the arrays of a Zarr stack beside its planes.
var ZarrArrays = []string{"labels", "valid_count", "x", "y", "spatial_ref"}

// ZarrName is a stack plane's array name in a Zarr store: the plane's
// name with every character but letters, digits, _, - and . made _
// (p10(ndvi) is p10_ndvi, season(ndvi,summer) season_ndvi_summer), so
// that it is a portable key in any file system or object store; the
// plane's own name is the array's long_name.
func ZarrName(plane string) string {
	var b strings.Builder
	for _, r := range plane {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			r = '_'
		}
		if r == '_' && strings.HasSuffix(b.String(), "_") {
			continue
		}
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), "_")
}

// CheckZarrNames refuses planes whose array names would collide with
// one another or with the store's other arrays.
func CheckZarrNames(planes []string) error {
	seen := map[string]string{}
	for _, a := range ZarrArrays {
		seen[a] = a + " (the store's own)"
	}
	for _, p := range planes {
		n := ZarrName(p)
		if n == "" || strings.HasPrefix(n, "__") || n == "." || n == ".." {
			return fmt.Errorf("plane %q has no usable array name (%q)", p, n)
		}
		if other, ok := seen[n]; ok {
			return fmt.Errorf("planes %q and %s would both be array %s", p, other, n)
		}
		seen[n] = fmt.Sprintf("%q", p)
	}
	return nil
}
