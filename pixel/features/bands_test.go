package features

import "testing"

func TestLookupBand(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"B8A": "nir08", "red": "B04", "rededge2": "B06", "swir22": "B12"} {
		b, err := LookupBand(name)
		if err != nil || (b.Key != want && b.Name != want) {
			t.Errorf("%s: %+v %v", name, b, err)
		}
	}
	if _, err := LookupBand("B10"); err == nil {
		t.Error("B10 (not in L2A) was found")
	}
	if _, err := LookupBand("rededge"); err == nil {
		t.Error("the ambiguous common name rededge was accepted")
	}
}
