package cuda

import (
	"os"
	"unsafe"
)

// pageSize is the host's memory page size.
var pageSize = os.Getpagesize()

// touchPages writes T's zero value into one element of every memory page
// s spans, so that the pages a copy down will fill are faulted in on the
// caller's goroutine, before it takes a lock the copy holds. A page that
// Go's heap took fresh from the system (a process's first windows, while
// its heap grows) is otherwise faulted in by the driver's copy, under
// that lock, one window after another. s's contents are lost: callers
// pass outputs that the copy fills whole.
func touchPages[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	step := max(1, pageSize/max(1, int(unsafe.Sizeof(zero))))
	for i := 0; i < len(s); i += step {
		s[i] = zero
	}
	s[len(s)-1] = zero
}
