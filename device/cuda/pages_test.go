package cuda

import (
	"testing"
	"unsafe"
)

// TestTouchPages: every memory page a slice spans gets one zero written
// (its last element too), whatever the slice's start within a page, and
// every other element is left as it was.
func TestTouchPages(t *testing.T) {
	back := make([]uint16, 5*pageSize)
	for _, off := range []int{0, 1, 1000} {
		s := back[off : off+3*pageSize/2+3]
		for i := range s {
			s[i] = 7
		}
		touchPages(s)
		pages := map[uintptr]bool{}
		zeros := 0
		for i := range s {
			page := uintptr(unsafe.Pointer(&s[i])) / uintptr(pageSize)
			if s[i] == 0 {
				pages[page] = true
				zeros++
			} else if s[i] != 7 {
				t.Fatalf("offset %d: element %d is %d", off, i, s[i])
			}
		}
		first := uintptr(unsafe.Pointer(&s[0])) / uintptr(pageSize)
		last := uintptr(unsafe.Pointer(&s[len(s)-1])) / uintptr(pageSize)
		for p := first; p <= last; p++ {
			if !pages[p] {
				t.Errorf("offset %d: page %d of %d..%d not touched", off, p-first, 0, last-first)
			}
		}
		if s[len(s)-1] != 0 {
			t.Errorf("offset %d: last element not touched", off)
		}
		// One a page's worth of elements, and the last.
		if want := (len(s)+pageSize/2-1)/(pageSize/2) + 1; zeros > want {
			t.Errorf("offset %d: %d elements zeroed, want at most %d", off, zeros, want)
		}
	}
	touchPages([]float32(nil))
}
