package config

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestStackFormats: the words, lists and booleans outputs.stack and
// output.stack take, their JSON (true for the COGs alone, as run configs
// hashed before Zarr), and the errors that name what is wrong.
func TestStackFormats(t *testing.T) {
	for _, c := range []struct {
		yaml, want, json string
	}{
		{"stack: true", "cog", "true"},
		{"stack: false", "", "false"},
		{"stack: zarr", "zarr", `["zarr"]`},
		{"stack: [zarr, COG]", "cog,zarr", `["cog","zarr"]`},
		{"stack: cog", "cog", "true"},
	} {
		var v struct{ Stack StackFormats }
		if err := yaml.Unmarshal([]byte(c.yaml), &v); err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		j, _ := json.Marshal(v.Stack)
		if got := strings.Join(v.Stack, ","); got != c.want || string(j) != c.json {
			t.Errorf("%s: %q %s, want %q %s", c.yaml, got, j, c.want, c.json)
		}
	}
	for _, c := range []struct{ yaml, err string }{
		{"stack: parquet", `"parquet": not cog or zarr`},
		{"stack: [zarr, zarr]", "zarr given twice"},
		{"stack: []", "empty list"},
		{"stack: {zarr: 1}", "a format"},
	} {
		var v struct{ Stack StackFormats }
		err := yaml.Unmarshal([]byte(c.yaml), &v)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.err)
		}
	}
	if n := ZarrName("season(nd(B08,B11),summer)"); n != "season_nd_B08_B11_summer" {
		t.Errorf("ZarrName: %s", n)
	}
	if err := CheckZarrNames([]string{"B04", "p10(ndvi)", "p10_ndvi"}); err == nil || !strings.Contains(err.Error(), "p10_ndvi") {
		t.Errorf("collision: %v", err)
	}
	if err := CheckZarrNames([]string{"B04", "x"}); err == nil || !strings.Contains(err.Error(), "store's own") {
		t.Errorf("reserved name: %v", err)
	}
}
