package landcover

import (
	"slices"
	"testing"

	"github.com/lulc/lulc/composite"
)

func TestSCL(t *testing.T) {
	t.Parallel()
	if err := SCL.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := SCL.Codes(), []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(got, want) {
		t.Errorf("codes %v, want %v", got, want)
	}
	// Every class composite masks by default, except no data, is in the scheme.
	for _, code := range composite.DefaultDropSCL {
		if _, ok := SCL.Class(code); !ok && code != 0 {
			t.Errorf("masked SCL class %d is not in the scheme", code)
		}
	}
}
