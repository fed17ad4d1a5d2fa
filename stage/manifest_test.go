package stage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lulc/lulc/internal/digest"
)

// Outputs are recorded with BLAKE3; manifests and STAC items written
// before, with SHA-256, still give their checksums and still verify.
func TestOutputChecksums(t *testing.T) {
	p := filepath.Join(t.TempDir(), "map.tif")
	body := []byte("a class map's bytes")
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	b3 := digest.Bytes(body)
	s := sha256.Sum256(body)
	sha := hex.EncodeToString(s[:])
	if got := (ManifestOutput{BLAKE3: b3}).Multihash(); got != "1e20"+b3 {
		t.Errorf("BLAKE3 output: %s", got)
	}
	if got := (ManifestOutput{SHA256: sha}).Multihash(); got != "1220"+sha {
		t.Errorf("an old manifest's SHA-256 output: %s", got)
	}
	for _, c := range []struct {
		sum  string
		want bool
	}{
		{"1e20" + b3, true}, {"1220" + sha, true},
		{"1e20" + sha, false}, {"1220" + b3, false}, {"1b20" + b3, false}, {"", false},
	} {
		if got := digest.Matches(p, c.sum); got != c.want {
			t.Errorf("digest.Matches(%q) = %v", c.sum, got)
		}
	}
	if digest.Matches(p+".gone", "1e20"+b3) {
		t.Error("a missing file matches")
	}
	// The manifest's JSON keys the checksum by its algorithm.
	if m, err := parseOutputs(`[{"file":"a","blake3":"x","size":1},{"file":"b","sha256":"y","size":2}]`); err != nil || m[0].BLAKE3 != "x" || m[1].SHA256 != "y" {
		t.Errorf("outputs %+v, %v", m, err)
	}
}

func parseOutputs(s string) ([]ManifestOutput, error) {
	var o []ManifestOutput
	return o, json.Unmarshal([]byte(s), &o)
}
