package predict

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestStreamOrComposite: a tile predicted beside its composite reports
// the composite's own error when the stream failed for it or not at all,
// and the stream's when the stream failed first (its composite, stopped,
// then says only that it was cancelled).
func TestStreamOrComposite(t *testing.T) {
	unreadable := errors.New("read B04.tif: short read")
	full := errors.New("class.tif: write: no space left on device")
	waited := fmt.Errorf("tile 31TEJ: %w", unreadable) // what the windows waiting for its rows got
	for _, c := range []struct {
		stream, composite, want error
	}{
		{nil, nil, nil},
		{nil, unreadable, unreadable},
		{waited, unreadable, unreadable},
		{full, context.Canceled, full},
		{full, nil, full},
		{context.Canceled, context.Canceled, context.Canceled},
	} {
		if got := streamOrComposite(c.stream, c.composite); got != c.want {
			t.Errorf("stream %v, composite %v: %v, want %v", c.stream, c.composite, got, c.want)
		}
	}
}
