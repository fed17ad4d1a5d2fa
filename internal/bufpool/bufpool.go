// Package bufpool recycles large slices between the windows of a tile, so
// that streaming a tile allocates a few windows' worth of memory instead
// of one per window: less for the collector to sweep and a smaller heap.
package bufpool

import "sync"

// Pool holds slices of T for reuse. The zero value is ready.
type Pool[T any] struct{ p sync.Pool }

// Get returns a slice of length n. Its contents are whatever it last
// held: callers overwrite it, or clear it.
func (p *Pool[T]) Get(n int) []T {
	if s, ok := p.p.Get().(*[]T); ok && cap(*s) >= n {
		return (*s)[:n]
	}
	return make([]T, n)
}

// Put gives s back for a later Get. s must not be used after.
func (p *Pool[T]) Put(s []T) {
	if cap(s) > 0 {
		p.p.Put(&s)
	}
}
