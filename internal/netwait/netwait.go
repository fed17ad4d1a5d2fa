// Package netwait makes waits on the network visible: code about to wait
// on a remote file or request (a COG block over /vsicurl/, an object
// upload, a STAC page) calls Begin, and Watch logs, at a fixed interval,
// every wait that has lasted longer than that interval, naming what it
// waits for and for how long. A process whose network stalls then says so
// in its log instead of falling silent until a stall limit ends the wait.
package netwait

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is how often Watch logs an unfinished wait: a line at
// least every 30 s while lulc waits (Watch checks four times per
// interval, so a line comes at most 25 s after the last).
const DefaultInterval = 20 * time.Second

type wait struct {
	what   string
	start  time.Time
	logged time.Time // when a line last named it; start until then
}

var (
	mu     sync.Mutex
	next   int
	active = map[int]*wait{}
)

// Begin records a wait on what (a URL or GDAL network path; it is logged
// as given, so it must be free of credentials or redacted by the log
// handler) and returns the function that ends it.
func Begin(what string) (end func()) {
	now := time.Now()
	mu.Lock()
	id := next
	next++
	active[id] = &wait{what: what, start: now, logged: now}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(active, id)
		mu.Unlock()
	}
}

// Remote reports whether a path that GDAL opens reaches the network: a
// URL, or a path through one of GDAL's network file systems (also inside
// an archive one, /vsizip//vsicurl/…).
func Remote(path string) bool {
	if strings.Contains(path, "://") {
		return true
	}
	for _, fs := range []string{"/vsicurl", "/vsis3", "/vsigs", "/vsiaz", "/vsiadls", "/vsioss", "/vsiswift", "/vsiwebhdfs", "/vsihdfs"} {
		if strings.Contains(path, fs+"/") || strings.Contains(path, fs+"_streaming/") {
			return true
		}
	}
	return false
}

// Track is Begin for a path that may be local: it records a wait only
// when the path is Remote.
func Track(path string) (end func()) {
	if !Remote(path) {
		return func() {}
	}
	return Begin(path)
}

// Due returns the waits that have gone without a line for at least
// interval at now, one entry per thing waited on (the oldest wait's
// start, and how many wait on it), and marks them logged.
func Due(now time.Time, interval time.Duration) []Pending {
	mu.Lock()
	defer mu.Unlock()
	by := map[string]*Pending{}
	for _, w := range active {
		if now.Sub(w.logged) < interval {
			continue
		}
		w.logged = now
		p := by[w.what]
		if p == nil {
			p = &Pending{What: w.what, Since: w.start}
			by[w.what] = p
		}
		p.Count++
		if w.start.Before(p.Since) {
			p.Since = w.start
		}
	}
	out := make([]Pending, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Since.Compare(b.Since) })
	return out
}

// Pending is one thing waited on, as Due reports it.
type Pending struct {
	What  string
	Since time.Time // when the oldest wait on it began
	Count int       // how many waits on it are in flight and due
}

// Watch logs the waits that Due returns, checking four times per
// interval, until ctx is done. Lines are warnings: a stalled network is
// worth seeing without -v.
func Watch(ctx context.Context, log *slog.Logger, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.NewTicker(max(interval/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, p := range Due(now, interval) {
				log.Warn("waiting on the network", "for", p.What, "waited", now.Sub(p.Since).Round(time.Second/10), "requests", p.Count)
			}
		}
	}
}
