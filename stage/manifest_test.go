package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/source/catalog"
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

// TestDescribeAssetsAtOnce: DescribeAssets asks a remote catalog about
// several assets at once, and each answer lands in its own asset's
// place, beside local files (their sizes) and other schemes (nothing
// known). The server answers no HEAD until two are in flight, so asking
// one at a time fails the test (after its server gives up waiting).
func TestDescribeAssetsAtOnce(t *testing.T) {
	var inFlight, most atomic.Int32
	both := make(chan struct{})
	var closeOnce atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n >= 2 && closeOnce.CompareAndSwap(false, true) {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			// Asked one at a time: the rest need not wait too.
			if closeOnce.CompareAndSwap(false, true) {
				close(both)
			}
		}
		k, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/b"))
		w.Header().Set("ETag", fmt.Sprintf(`"e%d"`, k))
		w.Header().Set("Content-Length", strconv.Itoa(1000+k))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	local := filepath.Join(t.TempDir(), "B04.tif")
	if err := os.WriteFile(local, make([]byte, 77), 0o644); err != nil {
		t.Fatal(err)
	}
	var refs []AssetRef
	for k := range 20 {
		refs = append(refs, AssetRef{Asset: catalog.Asset{Href: fmt.Sprintf("%s/b%d", srv.URL, k)}, Scale: float64(k), Offset: -0.1})
	}
	refs = append(refs, AssetRef{Asset: catalog.Asset{Href: local}}, AssetRef{Asset: catalog.Asset{Href: "s3://bucket/B08.tif"}})
	got := DescribeAssets(context.Background(), srv.Client(), refs)
	if most.Load() < 2 {
		t.Errorf("at most %d HEAD requests in flight: the assets were asked about one at a time", most.Load())
	}
	if len(got) != len(refs) {
		t.Fatalf("%d descriptions of %d assets", len(got), len(refs))
	}
	for k := range 20 {
		g := got[k]
		if g.Href != refs[k].Asset.Href || g.Size != int64(1000+k) || g.ETag != fmt.Sprintf(`"e%d"`, k) || g.Scale != float64(k) || g.Offset != -0.1 {
			t.Errorf("asset %d: %+v", k, g)
		}
	}
	if g := got[20]; g.Size != 77 || g.ETag != "" {
		t.Errorf("local file: %+v, want 77 bytes", g)
	}
	if g := got[21]; g.Size != 0 || g.Href != "s3://bucket/B08.tif" {
		t.Errorf("s3 asset: %+v, want nothing known", g)
	}
}
