package driver

import (
	"os"
	"testing"
)

// gpu opens GPU 0, skipping without one unless LULC_REQUIRE_GPU=1.
func gpu(t testing.TB) *Device {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		if os.Getenv("LULC_REQUIRE_GPU") == "1" {
			t.Fatalf("LULC_REQUIRE_GPU=1 but no usable GPU: %v", err)
		}
		t.Skipf("no usable GPU: %v", err)
	}
	return d
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
