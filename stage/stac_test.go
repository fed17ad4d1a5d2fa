package stage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLocalHref(t *testing.T) {
	cwd, _ := os.Getwd()
	cases := []struct{ dir, href, want string }{
		{"/out/T1", "/out/model/model.lulcrf", "../model/model.lulcrf"},
		{"/out/T1", "/out/T1/x.json", "./x.json"},
		{"/out/shards/0-of-2/T1", "/models/m.lulcrf", "../../../../models/m.lulcrf"},
		{"/out/T1", "https://example.com/a/item.json", "https://example.com/a/item.json"},
		{"/out/T1", "s3://bucket/a.tif", "s3://bucket/a.tif"},
		{"/out/T1", "/vsis3/bucket/a.tif", "/vsis3/bucket/a.tif"},
		{filepath.Join(cwd, "out", "T1"), "model.lulcrf", "../../model.lulcrf"},
		{"out/T1", "m/model.lulcrf", "../../m/model.lulcrf"},
	}
	for _, c := range cases {
		if got := LocalHref(c.dir, c.href); got != c.want {
			t.Errorf("localHref(%q, %q) = %q, want %q", c.dir, c.href, got, c.want)
		}
	}
}
