package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// logEvery is how often a plain progress line is written when stderr is
// not a terminal (Slurm's and Kubernetes' logs).
const logEvery = 10 * time.Second

// logBar is progress for a log: in place of a bar redrawn with carriage
// returns, a plain line at most every logEvery (and a last one at the end
// when any was written): what is done of what, its rate as the stage
// describes it, the time spent and the time left at that pace. A stage
// done within logEvery writes nothing.
type logBar struct {
	w           io.Writer
	now         func() time.Time
	mu          sync.Mutex
	desc        string
	n, total    int64
	start, last time.Time
	wrote       bool
}

func newLogBar(w io.Writer, total int64, desc string, now func() time.Time) *logBar {
	t := now()
	return &logBar{w: w, now: now, desc: desc, total: total, start: t, last: t}
}

// Add implements progress.Bar.
func (b *logBar) Add(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(n)
	if t := b.now(); t.Sub(b.last) >= logEvery {
		b.last = t
		b.line(t)
	}
	return nil
}

// Describe implements progress.Bar.
func (b *logBar) Describe(d string) {
	b.mu.Lock()
	b.desc = d
	b.mu.Unlock()
}

// Finish implements progress.Bar.
func (b *logBar) Finish() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wrote {
		b.line(b.now())
		b.wrote = false
	}
	return nil
}

// line writes the bar's state at t.
func (b *logBar) line(t time.Time) {
	b.wrote = true
	elapsed := t.Sub(b.start)
	s := fmt.Sprintf("lulc: %s %d/%d", b.desc, b.n, b.total)
	if b.total > 0 {
		s += fmt.Sprintf(" (%.0f %%)", 100*float64(b.n)/float64(b.total))
	}
	s += ", " + elapsed.Round(time.Second).String() + " elapsed"
	if b.n > 0 && b.n < b.total {
		left := time.Duration(float64(elapsed) * float64(b.total-b.n) / float64(b.n))
		s += ", about " + left.Round(time.Second).String() + " left"
	}
	fmt.Fprintln(b.w, s)
}
