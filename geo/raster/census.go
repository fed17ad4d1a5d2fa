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
// 1–255, also when written as text, as GDAL's rasterizer reads them) and
// unusable ones: NULL or unset, 0 (no label), negative, above 255, not a
// whole number, text that is no number. A layer without the field is an
// error naming the fields it has.
func CensusLabels(path string, v VectorLabels) (LabelCensus, error) {
	register()
	vec, err := godal.Open(path, godal.VectorOnly())
	if err != nil {
		return LabelCensus{}, fmt.Errorf("read labels %s: open vector: %w", path, err)
	}
	defer vec.Close()
	layer, err := findLayer(path, vec, v)
	if err != nil {
		return LabelCensus{}, err
	}
	c := LabelCensus{Layer: layer}
	names := fieldNames(vec, layer)
	if names == nil {
		return c, nil // no feature
	}
	if !slices.Contains(names, v.Field) {
		return c, fmt.Errorf("read labels %s: layer %s has no class field %q (fields: %s)", path, layer, v.Field, strings.Join(names, ", "))
	}
	bad := map[[2]string]int{}
	// OGR's own SQL, whatever the format; nulls asked for apart, since
	// godal reads a null field as set (to 0).
	quoted, from := `"`+strings.ReplaceAll(v.Field, `"`, `""`)+`"`, ` FROM "`+strings.ReplaceAll(layer, `"`, `""`)+`"`
	for _, where := range []string{" IS NULL", " IS NOT NULL"} {
		rs, err := vec.ExecuteSQL("SELECT "+quoted+from+" WHERE "+quoted+where, godal.OGRSQLDialect())
		if err != nil {
			return c, fmt.Errorf("read labels %s: field %s: %w", path, v.Field, err)
		}
		for f := rs.NextFeature(); f != nil; f = rs.NextFeature() {
			fld := f.Fields()[v.Field]
			f.Close()
			c.Features++
			value, why := "NULL", "no value"
			if where == " IS NOT NULL" && fld.IsSet() {
				value, why = judgeCode(fld)
			}
			if why == "" {
				c.Usable++
				continue
			}
			bad[[2]string{value, why}]++
		}
		rs.Close()
	}
	for k, n := range bad {
		c.Unusable = append(c.Unusable, LabelValue{Value: k[0], Why: k[1], Count: n})
	}
	slices.SortFunc(c.Unusable, func(a, b LabelValue) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Value, b.Value))
	})
	return c, nil
}

// judgeCode returns a class field's value as written and why it burns no
// label ("" when it is a usable code).
func judgeCode(f godal.Field) (value, why string) {
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
		return strconv.Quote(f.String()), "text, not a class code"
	}
	return f.String(), "not a number"
}

func judgeNumber(x float64, value string) (string, string) {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return value, "not a number"
	case x != math.Trunc(x):
		return value, "not a whole number"
	case x == 0:
		return value, "0 means no label"
	case x < 0:
		return value, "negative"
	case x > math.MaxUint8:
		return value, "above 255"
	}
	return value, ""
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
