package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/learn/aoa"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/pixel/features"
)

// Inputs lists the local files and directories training reads, which its
// output must not touch.
func (c TrainConfig) Inputs() []string {
	in := append([]string{c.Input.Stack}, c.Input.Samples...)
	for _, r := range c.Input.Rasters {
		in = append(in, r.Image, r.Labels)
	}
	return in
}

// SamplingConfig says how labelled pixels are drawn (sampling.Config).
type SamplingConfig = sampling.Config

// TrainConfig describes a training run: where the labelled imagery is,
// which features, the class scheme, how to sample, and the forest.
type TrainConfig struct {
	Input struct {
		// Stack is an ingest output directory: every tile's stack.tif and
		// labels.tif, with band order and scaling from its manifest.
		Stack string `yaml:"stack"`
		// Rasters are image/label pairs on identical grids, for data that
		// did not come through ingest (the band order and scaling below
		// apply to every image).
		Rasters []struct {
			Image  string `yaml:"image"`
			Labels string `yaml:"labels"`
		} `yaml:"rasters"`
		// Samples are the draws of a job's sample phase (lulc run --phase
		// sample: draw.lulcd files, or directories holding them), merged
		// into the samples one process would have drawn. The hash leaves
		// them out when empty, so that configs without them keep theirs.
		Samples []string `yaml:"samples" json:",omitempty"`
		Bands   []string `yaml:"bands"`
		Scale   float64  `yaml:"scale"`
		Offset  float64  `yaml:"offset"`
		NoData  *float64 `yaml:"nodata"` // image value marking missing pixels, if any
	} `yaml:"input"`
	// Features are the model's features, or the name of a set of them
	// (features.SetNames: default, per-pixel, context, temporal), also
	// among the items; default: default.
	Features FeatureList `yaml:"features"`
	Classes  struct {
		// Scheme is a built-in scheme (esa-worldcover or esri-io), custom
		// (List), labels: the scheme the inputs' labels carry (their STAC
		// items' classification:classes, or the classes of text labels,
		// as ingest recorded them), or auto, the default: labels when the
		// inputs carry one, else esa-worldcover.
		Scheme string        `yaml:"scheme"`
		Name   string        `yaml:"name"`
		List   []ClassConfig `yaml:"list"`
		// Remap maps label codes onto the scheme's codes (for example
		// Esri/IO's 2, trees, onto WorldCover's 10, or one of the
		// scheme's own classes onto another to merge them): those pixels
		// train, and are evaluated, as that class. A class of the scheme
		// remapped away keeps no pixel of its own. The model records it.
		// Left out of the hash when empty.
		Remap map[int]int `yaml:"remap" json:",omitempty"`
	} `yaml:"classes"`
	Sampling SamplingConfig `yaml:"sampling"`
	Engine   string         `yaml:"engine"` // lulc or golearn
	Forest   forest.Params  `yaml:"forest"`
	// AOA says how the model's area of applicability is prepared (package
	// aoa); left out of the hash when unset, so that configs without it
	// keep theirs.
	AOA     AOAConfig `yaml:"aoa" json:",omitzero"`
	Golearn struct {
		Trees           int `yaml:"trees"`
		FeaturesPerTree int `yaml:"features_per_tree"`
		MaxSamples      int `yaml:"max_samples"` // training rows given to golearn (a seeded subset)
	} `yaml:"golearn"`
	// labels is the scheme of classes.scheme labels, once resolved from
	// the inputs (resolveLabels).
	labels *landcover.Scheme
}

// AOAConfig is a train config's aoa section.
type AOAConfig struct {
	// Off trains a model without an area of applicability.
	Off bool `yaml:"off" json:",omitempty"`
	// MaxPoints caps the training samples the model keeps for it (default
	// aoa.DefaultMaxPoints): those with the smallest seeded keys.
	MaxPoints int `yaml:"max_points" json:",omitempty"`
}

// PointCap is max_points with its default.
func (c AOAConfig) PointCap() int {
	if c.MaxPoints == 0 {
		return aoa.DefaultMaxPoints
	}
	return c.MaxPoints
}

// ClassConfig declares one class of a custom scheme.
type ClassConfig struct {
	Code  int    `yaml:"code"`
	Name  string `yaml:"name"`
	Color string `yaml:"color"` // #rrggbb
}

// FeatureList is a config's features: a list, or one name (features:
// default). Names of feature sets among them are expanded as it is read
// (features.Expand), in any config that holds one.
type FeatureList []string

// UnmarshalYAML reads a sequence, or a scalar as a list of one, and
// expands the names of feature sets.
func (f *FeatureList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*f = features.Expand([]string{n.Value})
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*f = features.Expand(joinParens(s))
	return nil
}

// Train defaults: docs/train.md lists them, and lulc config show
// --defaults prints a config with them filled in.
const (
	DefaultMaxPerClass        = 2000
	DefaultBlockSize          = 32
	DefaultValidationFraction = 0.3
	DefaultTrees              = 100
	DefaultMaxDepth           = 16
	DefaultBins               = 128
)

// defaults fills the keys a config leaves out (set holds the keys its
// YAML gives, by section): a key given, even as 0, keeps its value, which
// Validate then judges.
func (c *TrainConfig) defaults(set map[string]map[string]any) {
	unset := func(section, key string) bool {
		_, ok := set[section][key]
		return !ok
	}
	if c.Engine == "" {
		c.Engine = "lulc"
	}
	if c.Classes.Scheme == "" {
		c.Classes.Scheme = "auto"
	}
	if len(c.Features) == 0 && set[""]["features"] == nil {
		c.Features = FeatureList{"default"}
	}
	for _, d := range []struct {
		section, key string
		to           *int
		v            int
	}{
		{"sampling", "max_per_class", &c.Sampling.MaxPerClass, DefaultMaxPerClass},
		{"sampling", "block_size", &c.Sampling.BlockSize, DefaultBlockSize},
		{"forest", "trees", &c.Forest.Trees, DefaultTrees},
		{"forest", "max_depth", &c.Forest.MaxDepth, DefaultMaxDepth},
		{"forest", "min_samples_leaf", &c.Forest.MinSamplesLeaf, 1},
		{"forest", "bins", &c.Forest.Bins, DefaultBins},
		{"golearn", "trees", &c.Golearn.Trees, 10},
		{"golearn", "features_per_tree", &c.Golearn.FeaturesPerTree, 20},
		{"golearn", "max_samples", &c.Golearn.MaxSamples, 5000},
	} {
		if unset(d.section, d.key) {
			*d.to = d.v
		}
	}
	if unset("sampling", "validation_fraction") {
		c.Sampling.ValidationFraction = DefaultValidationFraction
	}
	if unset("forest", "bootstrap") {
		c.Forest.Bootstrap = true
	}
}

// ParseTrainConfig decodes YAML strictly, fills the defaults and
// validates it.
func ParseTrainConfig(raw []byte) (TrainConfig, error) {
	var c TrainConfig
	if err := configs.DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	var keys struct {
		Features any            `yaml:"features"`
		Sampling map[string]any `yaml:"sampling"`
		Forest   map[string]any `yaml:"forest"`
		Golearn  map[string]any `yaml:"golearn"`
	}
	if err := yaml.Unmarshal(raw, &keys); err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	c.defaults(map[string]map[string]any{"": {"features": keys.Features}, "sampling": keys.Sampling, "forest": keys.Forest, "golearn": keys.Golearn})
	// The default is a set's name, expanded here.
	c.Features = features.Expand(c.Features)
	// Without a sampling.buffer of its own, the split's buffer is the
	// features' largest context radius: no training pixel then sees a
	// validation pixel through its window.
	// A split by features takes no buffer (sampling.Config.Check).
	if _, set := keys.Sampling["buffer"]; !set && c.Sampling.Split != sampling.SplitFeatures {
		c.Sampling.Buffer = ContextRadius(c.Features)
		if r := c.Sampling.Buffer; r > 0 && r >= c.Sampling.BlockSize && c.Sampling.BlockSize > 0 {
			return c, fmt.Errorf("sampling.block_size: %d is too small for the context features' window radius %d, the split's buffer by default: use blocks above %d pixels, or set sampling.buffer", c.Sampling.BlockSize, r, r)
		}
	}
	if c.noInput() {
		// A config without input (features: default) is for lulc run,
		// or for lulc train --stack: Train checks it once given.
		return c, c.ValidateTraining()
	}
	return c, c.Validate()
}

// DefaultTrainConfig is a train config with every default and no input:
// the default features and scheme, sampling and forest (docs/train.md,
// Defaults).
func DefaultTrainConfig() TrainConfig {
	c, err := ParseTrainConfig([]byte("features: default\n"))
	if err != nil {
		panic("the default train config is invalid: " + err.Error())
	}
	return c
}

// noInput reports whether the config's input section is empty.
func (c TrainConfig) noInput() bool {
	in := c.Input
	return in.Stack == "" && len(in.Rasters) == 0 && len(in.Samples) == 0 && len(in.Bands) == 0 &&
		in.Scale == 0 && in.Offset == 0 && in.NoData == nil
}

// ContextRadius is the largest window radius among the named features
// (0 without context features, or for names that do not parse, which
// Validate reports).
func ContextRadius(names []string) int {
	r := 0
	for _, n := range names {
		if f, err := features.ParseFeature(n); err == nil && f.Kind == "context" {
			r = max(r, f.Size/2)
		}
	}
	return r
}

// joinParens undoes what YAML's flow sequences do to features with
// arguments: [mean(B08, 15), ndvi] reads as "mean(B08", "15)", "ndvi".
// Items are joined back, with a comma, until their parentheses balance.
func joinParens(items []string) []string {
	var out []string
	depth := 0
	for _, it := range items {
		if depth > 0 {
			out[len(out)-1] += "," + it
		} else {
			out = append(out, it)
		}
		depth += strings.Count(it, "(") - strings.Count(it, ")")
	}
	return out
}

var colorRE = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// Scheme returns the configured class scheme.
func (c TrainConfig) Scheme() (landcover.Scheme, error) {
	if b, ok := landcover.Builtin(c.Classes.Scheme); ok {
		if len(c.Classes.List) > 0 {
			return landcover.Scheme{}, errors.New("classes: list is for scheme custom")
		}
		return b, nil
	}
	switch c.Classes.Scheme {
	case "auto":
		if len(c.Classes.List) > 0 {
			return landcover.Scheme{}, errors.New("classes: list is for scheme custom")
		}
		if c.labels != nil {
			return *c.labels, nil
		}
		return landcover.WorldCover, nil
	case "labels":
		if len(c.Classes.List) > 0 {
			return landcover.Scheme{}, errors.New("classes: list is for scheme custom")
		}
		if c.labels == nil {
			return landcover.Scheme{}, errors.New("classes.scheme labels: the inputs' labels carry no class scheme (STAC label items without classification:classes, raster pairs, vector labels, or sample phases' draws): name one (esa-worldcover, esri-io or custom)")
		}
		return *c.labels, nil
	case "custom":
		s := landcover.Scheme{Name: c.Classes.Name}
		for _, k := range c.Classes.List {
			if k.Code < 1 || k.Code > 255 {
				return s, fmt.Errorf("classes: code %d is outside 1–255", k.Code)
			}
			if !colorRE.MatchString(k.Color) {
				return s, fmt.Errorf("classes: colour %q of class %d is not #rrggbb", k.Color, k.Code)
			}
			var r, g, b uint8
			fmt.Sscanf(k.Color[1:], "%02x%02x%02x", &r, &g, &b)
			s.Classes = append(s.Classes, landcover.Class{Code: uint8(k.Code), Name: k.Name, Color: color.RGBA{r, g, b, 0xff}})
		}
		if s.Name == "" {
			return s, errors.New("classes: a custom scheme needs a name")
		}
		return s, s.Validate()
	}
	return landcover.Scheme{}, fmt.Errorf("classes.scheme: %q is not auto, esa-worldcover, esri-io, custom or labels", c.Classes.Scheme)
}

// SamplingConfig is the sampling section with the classes' remap.
func (c TrainConfig) SamplingConfig() sampling.Config {
	s := c.Sampling
	s.Remap = c.Remap()
	return s
}

// Remap is classes.remap as codes (nil when empty; Validate checked it).
func (c TrainConfig) Remap() map[uint8]uint8 {
	if len(c.Classes.Remap) == 0 {
		return nil
	}
	m := map[uint8]uint8{}
	for from, to := range c.Classes.Remap {
		m[uint8(from)] = uint8(to)
	}
	return m
}

// checkRemap checks classes.remap against the scheme: codes 1–255, from
// any code (the scheme's own too) onto a code of the scheme.
func (c TrainConfig) checkRemap(s landcover.Scheme) error {
	for _, from := range slices.Sorted(maps.Keys(c.Classes.Remap)) {
		to := c.Classes.Remap[from]
		switch {
		case from < 1 || from > 255 || to < 1 || to > 255:
			return fmt.Errorf("classes.remap: %d: %d: codes are 1–255", from, to)
		case !s.Has(uint8(to)):
			return fmt.Errorf("classes.remap: %d: %d is not a class of the scheme %s (%v)", from, to, s.Name, s.Codes())
		}
	}
	return nil
}

// ResolveLabels gives classes.scheme labels the scheme of the inputs'
// labels (nil where one has none): they must all carry the same one.
// Other schemes are left as they are.
func (c *TrainConfig) ResolveLabels(schemes []*landcover.Scheme) error {
	if c.Classes.Scheme == "auto" {
		// The labels' scheme when every input carries the same one, else
		// WorldCover's.
		c.labels = nil
		for _, s := range schemes {
			if s == nil || !s.Equal(*schemes[0]) {
				return c.checkRemap(landcover.WorldCover)
			}
		}
		if len(schemes) > 0 {
			c.labels = schemes[0]
			return c.checkRemap(*c.labels)
		}
		return nil
	}
	if c.Classes.Scheme != "labels" {
		return nil
	}
	for i, s := range schemes {
		if s == nil {
			return errors.New("classes.scheme labels: an input's labels carry no class scheme (raster pairs, vector labels, sample phases' draws, or stacks ingested before lulc recorded schemes): name one (esa-worldcover, esri-io or custom)")
		}
		if !s.Equal(*schemes[0]) {
			return fmt.Errorf("classes.scheme labels: the inputs' labels carry different schemes (%s and %s)", schemes[0].Name, schemes[i].Name)
		}
	}
	if len(schemes) > 0 {
		c.labels = schemes[0]
		return c.checkRemap(*c.labels)
	}
	return nil
}

// Validate names the first key at fault.
func (c TrainConfig) Validate() error {
	if err := c.validateInput(); err != nil {
		return err
	}
	return c.ValidateTraining()
}

// validateInput checks the input section, which lulc run does without: it
// trains on its own tiles.
func (c TrainConfig) validateInput() error {
	in := c.Input
	switch {
	case len(in.Samples) > 0 && (in.Stack != "" || len(in.Rasters) > 0):
		return errors.New("input: set exactly one of stack, rasters and samples")
	case len(in.Samples) > 0 && (len(in.Bands) > 0 || in.Scale != 0):
		return errors.New("input: bands and scale come from the samples' draws; set them only for rasters")
	case len(in.Samples) > 0:
		return nil
	case (in.Stack == "") == (len(in.Rasters) == 0):
		return errors.New("input: set exactly one of stack, rasters and samples (lulc train --stack DIR gives the stack)")
	case len(in.Rasters) > 0 && len(in.Bands) == 0:
		return errors.New("input.bands: rasters need their band order")
	case len(in.Rasters) > 0 && in.Scale == 0:
		return errors.New("input.scale: rasters need a scale (reflectance = value × scale + offset)")
	case in.Stack != "" && (len(in.Bands) > 0 || in.Scale != 0):
		return errors.New("input: bands and scale come from the stack's manifest; set them only for rasters")
	}
	// The names ingest accepts, and no others: a model must name bands a
	// stack can have.
	if err := checkBandNames("input.bands", in.Bands); err != nil {
		return err
	}
	for i, r := range in.Rasters {
		if r.Image == "" || r.Labels == "" {
			return fmt.Errorf("input.rasters[%d]: image and labels are both required", i)
		}
	}
	return nil
}

// ValidateTraining checks everything but the input: features, classes,
// sampling and the engine's parameters.
func (c TrainConfig) ValidateTraining() error {
	if len(c.Features) == 0 {
		return errors.New("features: none configured")
	}
	switch c.Classes.Scheme {
	case "auto", "labels":
		// The inputs resolve them (resolveLabels), which checks the remap
		// against the scheme they resolve to.
		if len(c.Classes.List) > 0 {
			return errors.New("classes: list is for scheme custom")
		}
	default:
		s, err := c.Scheme()
		if err != nil {
			return err
		}
		if err := c.checkRemap(s); err != nil {
			return err
		}
	}
	s := c.Sampling
	switch {
	case s.MaxPerClass < 1:
		return fmt.Errorf("sampling.max_per_class: %d is below 1", s.MaxPerClass)
	case s.BlockSize < 1:
		return fmt.Errorf("sampling.block_size: %d is below 1", s.BlockSize)
	case s.ValidationFraction <= 0 || s.ValidationFraction >= 1:
		return fmt.Errorf("sampling.validation_fraction: %g is outside (0, 1)", s.ValidationFraction)
	case s.MinPerClass < 0:
		return fmt.Errorf("sampling.min_per_class: %d is negative", s.MinPerClass)
	case c.AOA.MaxPoints != 0 && (c.AOA.MaxPoints < 2 || c.AOA.MaxPoints > 200_000):
		return fmt.Errorf("aoa.max_points: %d is not between 2 and 200000", c.AOA.MaxPoints)
	}
	if err := s.Check(); err != nil {
		return err
	}
	switch c.Engine {
	case "lulc":
		if err := c.Forest.Validate(len(c.Features)); err != nil {
			return fmt.Errorf("forest.%w", err)
		}
	case "golearn":
	default:
		return fmt.Errorf("engine: %q is not lulc or golearn", c.Engine)
	}
	// A golearn block is checked whenever it is there, used or not: a bad
	// value waiting for the day the engine is switched is still bad.
	if g := c.Golearn; c.Engine == "golearn" || g.Trees != 0 || g.FeaturesPerTree != 0 || g.MaxSamples != 0 {
		switch {
		case g.Trees < 1:
			return fmt.Errorf("golearn.trees: %d is below 1", g.Trees)
		case g.FeaturesPerTree < 1:
			return fmt.Errorf("golearn.features_per_tree: %d is below 1", g.FeaturesPerTree)
		case c.Engine == "golearn" && g.FeaturesPerTree > len(c.Features):
			return fmt.Errorf("golearn.features_per_tree: %d is more than the %d features", g.FeaturesPerTree, len(c.Features))
		case g.MaxSamples < 1:
			return fmt.Errorf("golearn.max_samples: %d is below 1", g.MaxSamples)
		}
	}
	return nil
}

// Hash identifies the resolved config.
func (c TrainConfig) Hash() string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SampleKey identifies what the samples depend on (not the forest), so
// that retraining with other forest parameters can reuse them.
func (c TrainConfig) SampleKey() string {
	b, _ := json.Marshal(struct {
		Input    any
		Features []string
		Classes  any
		Sampling any
	}{c.Input, c.Features, c.schemeKey(), c.Sampling})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// schemeKey is what the samples' key holds of the classes: the config's
// section, and for classes.scheme labels the scheme it resolved to.
func (c TrainConfig) schemeKey() any {
	if c.labels == nil {
		return c.Classes
	}
	return struct {
		Config   any
		Resolved landcover.Scheme
	}{c.Classes, *c.labels}
}
