package landcover_test

import (
	"slices"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/pixel/composite"
)

func TestSCL(t *testing.T) {
	t.Parallel()
	if err := landcover.SCL.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := landcover.SCL.Codes(), []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(got, want) {
		t.Errorf("codes %v, want %v", got, want)
	}
	// Every class composite masks by default, except no data, is in the scheme.
	for _, code := range composite.DefaultDropSCL {
		if _, ok := landcover.SCL.Class(code); !ok && code != 0 {
			t.Errorf("masked SCL class %d is not in the scheme", code)
		}
	}
}
