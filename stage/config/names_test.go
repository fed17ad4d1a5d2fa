package config

import (
	"errors"
	"testing"

	"github.com/lulc/lulc/internal/atomicfs"
)

func TestCheckTileName(t *testing.T) {
	for _, ok := range []string{"31TEJ", "field-7", "plot.a"} {
		if err := CheckTileName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../../victim", "a/b", `a\b`, "a\nb", ".spill", ".out.partial", "model", "Model", "shards", "collection", "report.json", "ingest.yaml"} {
		if err := CheckTileName(bad); !errors.Is(err, atomicfs.ErrBadName) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
}
