package raster

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/airbusgeo/godal"
)

// LabelCensus is what a vector layer's class field holds, feature by
// feature: how many features burn a label (a whole number 1–255) and the
// values of those that burn none or cannot be burned as meant.
type LabelCensus struct {
	Layer    string
	Features int
	Usable   int
	// Unusable are the other values, the most frequent first.
	Unusable []LabelValue
	// Text are the values that are words, not numbers, whether or not
	// they map to a code, by TextKey order; Why is empty.
	Text []LabelValue
}

// LabelValue is one unusable value of a class field, as the layer holds
// it ("NULL" for none), why it burns no label, and how many features
// hold it.
type LabelValue struct {
	Value string
	Why   string
	Count int
}

// Bad counts the features whose class code is unusable.
func (c LabelCensus) Bad() int {
	n := 0
	for _, v := range c.Unusable {
		n += v.Count
	}
	return n
}

// Describe lists up to max unusable values with their counts and why:
// `NULL ×3 (no value), 0 ×2 (0 means no label)`.
func (c LabelCensus) Describe(max int) string {
	var parts []string
	for i, v := range c.Unusable {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d other value(s)", len(c.Unusable)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d (%s)", v.Value, v.Count, v.Why))
	}
	return strings.Join(parts, ", ")
}

// CensusLabels reads the class field (v.Field) of every feature of the
// layer v names, and sorts the values into usable codes (whole numbers
// 1–255, also when written as text; text v.Codes maps) and unusable ones:
// NULL or unset, 0 (no label), negative, above 255, not a whole number,
// text that is no number and that v.Codes does not map. A layer without
// the field is an error naming the fields it has.
func CensusLabels(path string, v VectorLabels) (LabelCensus, error) {
	_, c, err := featureCodes(path, v)
	return c, err
}

// featureCodes reads the class field of every feature of the layer v
// names, as CensusLabels does, and returns the code each feature burns by
// its FID (0 for an unusable value) with the census.
func featureCodes(path string, v VectorLabels) (map[int64]uint8, LabelCensus, error) {
	register()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return nil, LabelCensus{}, fmt.Errorf("read labels %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return nil, LabelCensus{}, err
	}
	c := LabelCensus{Layer: layer}
	names := fieldNames(vec, layer)
	if names == nil {
		return nil, c, nil // no feature
	}
	if !slices.Contains(names, v.Field) {
		return nil, c, fmt.Errorf("read labels %s: layer %s has no class field %q (fields: %s)", path, layer, v.Field, strings.Join(names, ", "))
	}
	codes := map[int64]uint8{}
	bad := map[[2]string]int{}
	text := map[string]map[string]int{} // by TextKey: spellings' counts
	// OGR's own SQL, whatever the format; nulls asked for apart, since
	// godal reads a null field as set (to 0).
	quoted, from := `"`+strings.ReplaceAll(v.Field, `"`, `""`)+`"`, ` FROM "`+strings.ReplaceAll(layer, `"`, `""`)+`"`
	for _, where := range []string{" IS NULL", " IS NOT NULL"} {
		rs, err := vec.ExecuteSQL("SELECT FID AS lulc_fid, "+quoted+from+" WHERE "+quoted+where, godal.OGRSQLDialect())
		if err != nil {
			return nil, c, fmt.Errorf("read labels %s: field %s: %w", path, v.Field, err)
		}
		for f := rs.NextFeature(); f != nil; f = rs.NextFeature() {
			fields := f.Fields()
			fid, fld := fields["lulc_fid"].Int(), fields[v.Field]
			f.Close()
			c.Features++
			value, code, why := "NULL", uint8(0), "no value"
			if where == " IS NOT NULL" && fld.IsSet() {
				value, code, why = judgeCode(fld, v.Codes)
				if w, ok := isText(fld); ok {
					countText(text, w)
				}
			}
			if why != "" {
				bad[[2]string{value, why}]++
				continue
			}
			c.Usable++
			codes[fid] = code
		}
		rs.Close()
	}
	for k, n := range bad {
		c.Unusable = append(c.Unusable, LabelValue{Value: k[0], Why: k[1], Count: n})
	}
	slices.SortFunc(c.Unusable, func(a, b LabelValue) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Value, b.Value))
	})
	for _, spellings := range text {
		c.Text = append(c.Text, commonSpelling(spellings))
	}
	slices.SortFunc(c.Text, func(a, b LabelValue) int { return strings.Compare(TextKey(a.Value), TextKey(b.Value)) })
	return codes, c, nil
}

// TextKey is how text class values are compared: case-insensitively,
// spaces around them trimmed. VectorLabels.Codes is keyed by it.
func TextKey(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// isText returns a field's text when it holds words rather than a number.
func isText(f godal.Field) (string, bool) {
	if f.Type() != godal.FTString {
		return "", false
	}
	s := strings.TrimSpace(f.String())
	if _, err := strconv.ParseFloat(s, 64); err == nil || s == "" {
		return "", false
	}
	return s, true
}

// countText counts one text value into text, by TextKey and spelling.
func countText(text map[string]map[string]int, s string) {
	k := TextKey(s)
	if text[k] == nil {
		text[k] = map[string]int{}
	}
	text[k][s]++
}

// commonSpelling is a text value's most frequent spelling (the first in
// byte order among equals) with the count of all its spellings.
func commonSpelling(spellings map[string]int) LabelValue {
	var best LabelValue
	n := 0
	for s, c := range spellings {
		n += c
		if c > best.Count || c == best.Count && s < best.Value {
			best = LabelValue{Value: s, Count: c}
		}
	}
	best.Count = n
	return best
}

// judgeCode returns a class field's value as written, the code it burns,
// and why it burns none ("" when it is a usable code). Text that is no
// number is looked up in codes (keyed by TextKey).
func judgeCode(f godal.Field, codes map[string]uint8) (value string, code uint8, why string) {
	switch f.Type() {
	case godal.FTInt, godal.FTInt64:
		return judgeNumber(float64(f.Int()), strconv.FormatInt(f.Int(), 10))
	case godal.FTReal:
		return judgeNumber(f.Float(), strconv.FormatFloat(f.Float(), 'g', -1, 64))
	case godal.FTString:
		s := strings.TrimSpace(f.String())
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			return judgeNumber(x, strconv.Quote(f.String()))
		}
		if c, ok := codes[TextKey(s)]; ok {
			return strconv.Quote(f.String()), c, ""
		}
		if len(codes) > 0 {
			return strconv.Quote(f.String()), 0, "text the label codes do not map"
		}
		return strconv.Quote(f.String()), 0, "text, not a class code"
	}
	return f.String(), 0, "not a number"
}

func judgeNumber(x float64, value string) (string, uint8, string) {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return value, 0, "not a number"
	case x != math.Trunc(x):
		return value, 0, "not a whole number"
	case x == 0:
		return value, 0, "0 means no label"
	case x < 0:
		return value, 0, "negative"
	case x > math.MaxUint8:
		return value, 0, "above 255"
	}
	return value, uint8(x), ""
}

// fieldNames are the sorted field names of the named layer of vec (nil
// when it has no feature to read them from).
func fieldNames(vec *godal.Dataset, layer string) []string {
	for _, l := range vec.Layers() {
		if l.Name() == layer {
			return slices.Sorted(maps.Keys(layerFields(l)))
		}
	}
	return nil
}

// FieldCheck is a field that a setting (Key, for messages) names in a
// vector layer of labels; an empty Field is not checked.
type FieldCheck struct {
	Key, Field string
}

// CheckFields refuses a layer (the one v names) that lacks a field the
// checks name, before anything is burned: GDAL's rasterizer only warns
// ("Failed to find field …, skipping") and burns nothing. The error names
// the setting, the field and the fields the layer has. A layer without
// features is not refused here (CensusLabels reports it).
func CheckFields(path string, v VectorLabels, checks ...FieldCheck) error {
	register()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return fmt.Errorf("read labels %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return err
	}
	names := fieldNames(vec, layer)
	if names == nil {
		return nil
	}
	for _, c := range checks {
		if c.Field != "" && !slices.Contains(names, c.Field) {
			return fmt.Errorf("read labels %s: %s: layer %s has no field %q (fields: %s)", path, c.Key, layer, c.Field, strings.Join(names, ", "))
		}
	}
	return nil
}
