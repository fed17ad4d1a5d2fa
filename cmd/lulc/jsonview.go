package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// jsonView is a command's result as --json prints it, one schema for every
// command (docs/json.md): struct fields under their json tag's name, or
// their Go name in snake_case (PeakRSS: peak_rss); durations in seconds,
// their keys ending in _seconds (Elapsed: elapsed_seconds); map keys as
// they are (they are data: tiles, bands, classes); NaN and infinities as
// null. Types that marshal themselves (json.Marshaler, or
// encoding.TextMarshaler) keep their own form.
func jsonView(v any) any {
	return viewValue(reflect.ValueOf(v))
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

func viewValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == durationType {
		return v.Interface().(time.Duration).Seconds()
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface && (v.Type().Implements(marshalerType) || v.Type().Implements(textType)) {
		return v.Interface()
	}
	if v.Kind() == reflect.Pointer && !v.IsNil() && (v.Type().Implements(marshalerType) || v.Type().Implements(textType)) {
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return viewValue(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		viewStruct(v, out)
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = viewValue(it.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface() // base64, as encoding/json writes bytes
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = viewValue(v.Index(i))
		}
		return out
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return nil
	}
	return v.Interface()
}

// viewStruct adds a struct's exported fields to out, embedded structs'
// fields flattened as encoding/json does.
func viewStruct(v reflect.Value, out map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !(f.Anonymous && f.Type.Kind() == reflect.Struct) {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ev := fv
			if ev.Kind() == reflect.Pointer {
				if ev.IsNil() {
					continue
				}
				ev = ev.Elem()
			}
			if ev.Kind() == reflect.Struct && !ev.Type().Implements(marshalerType) {
				viewStruct(ev, out)
				continue
			}
		}
		if strings.Contains(","+opts+",", ",omitempty,") && fv.IsZero() {
			continue
		}
		if name == "" {
			name = snakeCase(f.Name)
		}
		if f.Type == durationType && !strings.HasSuffix(name, "seconds") {
			name += "_seconds"
		}
		out[name] = viewValue(fv)
	}
}

// snakeCase writes a Go name in snake_case: an underscore before each
// word, acronyms kept whole (PeakRSS: peak_rss, GPUMemory: gpu_memory,
// BLAKE3: blake3, ItemIDs: item_ids).
func snakeCase(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			// A plural acronym (IDs) is one word: its s starts none.
			plural := i+1 < len(r) && r[i+1] == 's' && (i+2 == len(r) || unicode.IsUpper(r[i+2]))
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1]) && !plural
			if unicode.IsLower(prev) || unicode.IsDigit(prev) && !unicode.IsUpper(r[max(0, i-2)]) || unicode.IsUpper(prev) && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
