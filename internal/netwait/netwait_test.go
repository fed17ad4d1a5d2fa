package netwait

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDueOncePerInterval: a wait is due once it has lasted an interval,
// then again only an interval after its last line; several waits on one
// URL make one entry; an ended wait is never due.
func TestDueOncePerInterval(t *testing.T) {
	t0 := time.Now()
	endA := Begin("http://a/x.tif")
	endA2 := Begin("http://a/x.tif")
	endB := Begin("http://b/y.tif")
	endB()
	defer endA()
	defer endA2()
	if got := Due(t0.Add(500*time.Millisecond), time.Second); len(got) != 0 {
		t.Fatalf("due before an interval: %+v", got)
	}
	got := Due(t0.Add(1100*time.Millisecond), time.Second)
	if len(got) != 1 || got[0].What != "http://a/x.tif" || got[0].Count != 2 {
		t.Fatalf("due after an interval: %+v, want http://a/x.tif twice", got)
	}
	if got := Due(t0.Add(1600*time.Millisecond), time.Second); len(got) != 0 {
		t.Fatalf("due again within an interval of its line: %+v", got)
	}
	if got := Due(t0.Add(2200*time.Millisecond), time.Second); len(got) != 1 {
		t.Fatalf("not due an interval after its line: %+v", got)
	}
}

// TestWatchLogs: Watch names a wait that lasts, with how long it has
// waited, and stops with its context.
func TestWatchLogs(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Watch(ctx, log, 40*time.Millisecond); close(done) }()
	end := Track("/vsis3/bucket/slow.tif")
	fast := Track("/tmp/local.tif")
	fast()
	time.Sleep(150 * time.Millisecond)
	end()
	cancel()
	<-done
	out := buf.String()
	if !strings.Contains(out, "waiting on the network") || !strings.Contains(out, "/vsis3/bucket/slow.tif") || !strings.Contains(out, "waited=") {
		t.Fatalf("no line names the wait: %q", out)
	}
	if strings.Contains(out, "/tmp/local.tif") {
		t.Errorf("a local path was tracked: %q", out)
	}
	if n := strings.Count(out, "slow.tif"); n < 2 {
		t.Errorf("%d lines in 150 ms at a 40 ms interval, want several", n)
	}
}

func TestRemote(t *testing.T) {
	for p, want := range map[string]bool{
		"/vsicurl/http://h/a.tif": true, "https://h/a.geojson": true, "/vsis3/b/k": true,
		"/vsizip//vsicurl/http://h/a.zip/x.shp": true, "/vsimem/x.tif": false, "/data/a.tif": false,
		"/vsis3_streaming/b/k": true,
	} {
		if Remote(p) != want {
			t.Errorf("Remote(%q) = %v", p, !want)
		}
	}
}
