package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogBar: off a terminal, progress is a plain line at most every 10 s
// (what is done, the rate the stage describes, the time spent and left),
// a last line at the end when any was written, and nothing for a stage
// done sooner.
func TestLogBar(t *testing.T) {
	clock := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var out bytes.Buffer
	b := newLogBar(&out, 8, "predict 31TEJ windows", now)
	for i := range 8 {
		clock = clock.Add(4 * time.Second)
		b.Describe("predict: 12.5 Mpx/s, windows")
		b.Add(1)
		if i == 0 && out.Len() != 0 {
			t.Fatalf("a line before 10 s: %q", out.String())
		}
	}
	b.Finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 32 s in 4 s steps: lines at 12, 24 s, and the last at 32 s.
	want := []string{
		"lulc: predict: 12.5 Mpx/s, windows 3/8 (38 %), 12s elapsed, about 20s left",
		"lulc: predict: 12.5 Mpx/s, windows 6/8 (75 %), 24s elapsed, about 8s left",
		"lulc: predict: 12.5 Mpx/s, windows 8/8 (100 %), 32s elapsed",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant\n%s", out.String(), strings.Join(want, "\n"))
	}
	out.Reset()
	quick := newLogBar(&out, 3, "ingest", now)
	quick.Add(3)
	quick.Finish()
	if out.Len() != 0 {
		t.Errorf("a stage done within 10 s wrote %q", out.String())
	}
}
