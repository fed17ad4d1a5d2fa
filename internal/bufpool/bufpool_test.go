package bufpool

import "testing"

func TestGetLengthAndReuse(t *testing.T) {
	var p Pool[uint16]
	a := p.Get(100)
	if len(a) != 100 {
		t.Fatalf("Get(100) has length %d", len(a))
	}
	a[0] = 7
	p.Put(a)
	// A smaller request may reuse the slice; a larger one must not fail.
	if b := p.Get(50); len(b) != 50 {
		t.Fatalf("Get(50) has length %d", len(b))
	}
	if c := p.Get(1000); len(c) != 1000 {
		t.Fatalf("Get(1000) has length %d", len(c))
	}
	p.Put(nil) // ignored
	if d := p.Get(0); len(d) != 0 {
		t.Fatalf("Get(0) has length %d", len(d))
	}
}
