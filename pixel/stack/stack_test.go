package stack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lulc/lulc/geo"
)

func filled(t *testing.T) *Tile {
	t.Helper()
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}, Width: 7, Height: 5}
	tile := New("31TEJ", g, []string{"B04", "B08"}, 0.0001, -0.1)
	// Two windows that cover the grid, written as ingest would.
	for _, w := range [][4]int{{0, 0, 4, 5}, {4, 0, 3, 5}} {
		x, y, ww, hh := w[0], w[1], w[2], w[3]
		n := ww * hh
		dn := [][]uint16{make([]uint16, n), make([]uint16, n)}
		count, labels := make([]uint8, n), make([]uint8, n)
		for r := range hh {
			for c := range ww {
				i := r*ww + c
				px := (y+r)*g.Width + x + c
				dn[0][i], dn[1][i] = uint16(1000+px), uint16(2000+px)
				count[i], labels[i] = uint8(px%3), uint8(10*(px%5))
			}
		}
		if err := tile.Write(x, y, ww, hh, dn, count, labels); err != nil {
			t.Fatal(err)
		}
	}
	return tile
}

func TestWindows(t *testing.T) {
	t.Parallel()
	tile := filled(t)
	for px := range 35 {
		if tile.DN[0][px] != uint16(1000+px) || tile.DN[1][px] != uint16(2000+px) || tile.Labels[px] != uint8(10*(px%5)) || tile.Count[px] != uint8(px%3) {
			t.Fatalf("pixel %d: %d %d %d %d", px, tile.DN[0][px], tile.DN[1][px], tile.Labels[px], tile.Count[px])
		}
	}
	dst := make([]uint16, 6)
	tile.ReadBand(1, 2, 3, 3, 2, dst)
	want := []uint16{2000 + 23, 2000 + 24, 2000 + 25, 2000 + 30, 2000 + 31, 2000 + 32}
	if !reflect.DeepEqual(dst, want) {
		t.Errorf("ReadBand = %v, want %v", dst, want)
	}
	if err := tile.Write(5, 0, 3, 1, [][]uint16{{1, 2, 3}, {1, 2, 3}}, []uint8{1, 2, 3}, []uint8{1, 2, 3}); err == nil {
		t.Error("a window past the grid's edge was accepted")
	}
}

func TestSpillRoundTrip(t *testing.T) {
	t.Parallel()
	tile := filled(t)
	path := filepath.Join(t.TempDir(), "31TEJ.spill")
	if err := tile.Spill(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tile) {
		t.Fatalf("loaded tile differs:\n%+v\n%+v", back, tile)
	}
	body, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"truncated": body[:len(body)-1], "trailing": append(body, 0), "not a spill": []byte("{}\n"), "empty": nil,
	} {
		p := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(p, bad, 0o644)
		if _, err := Load(p); err == nil {
			t.Errorf("%s file loaded", name)
		}
	}
}

// FuzzDecode feeds the spill decoder mutated files, seeded with a real
// spill: it must return an error or a tile whose planes fit its grid, and
// never allocate more than the input backs.
func FuzzDecode(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed.raw")
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{0, 10, 0, 0, 0, -10}, Width: 3, Height: 2}
	if err := New("t", g, []string{"B04"}, 0.0001, -0.1).Spill(path); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, body []byte) {
		tile, err := decode(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			return
		}
		n := tile.Grid.Width * tile.Grid.Height
		if len(tile.Labels) != n || len(tile.Count) != n || len(tile.DN) == 0 || len(tile.DN[0]) != n || int64(n) > int64(len(body)) {
			t.Fatalf("decoded a %d×%d tile from %d bytes", tile.Grid.Width, tile.Grid.Height, len(body))
		}
	})
}

// TestAwaitFollowsTheFill writes a tile's windows out of order and checks
// that Await lets a reader through exactly when the rows it asks for are
// whole in every plane (the layer plane included), and that a failed fill
// or an ended context releases it with the reason.
func TestAwaitFollowsTheFill(t *testing.T) {
	t.Parallel()
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}, Width: 6, Height: 6}
	tile := New("31TEJ", g, []string{"B04", "elevation"}, 0.0001, -0.1)
	tile.StartFilling(1)
	write := func(x, y, w, h int) {
		t.Helper()
		n := w * h
		if err := tile.Write(x, y, w, h, [][]uint16{make([]uint16, n)}, make([]uint8, n), make([]uint8, n)); err != nil {
			t.Fatal(err)
		}
	}
	// ready says whether Await(rows) returns within a short wait.
	ready := func(rows int) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		err := tile.Await(ctx, rows)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await(%d): %v", rows, err)
		}
		return err == nil
	}
	if !ready(0) {
		t.Fatal("Await(0) waits: no row was asked for")
	}
	write(3, 0, 3, 3) // the right half of the top rows
	write(0, 3, 3, 3) // the left half of the bottom rows
	if ready(1) {
		t.Fatal("Await(1) returned with row 0 half written")
	}
	write(0, 0, 3, 3)
	if ready(3) {
		t.Fatal("Await(3) returned before the layer plane was stored")
	}
	if err := tile.WriteLayers(1, [][]uint16{make([]uint16, 36)}); err != nil {
		t.Fatal(err)
	}
	if !ready(3) {
		t.Fatal("Await(3) waits with rows 0–2 whole and the layer stored")
	}
	if ready(4) {
		t.Fatal("Await(4) returned with row 3 half written")
	}
	// A reader waiting when the last window lands is woken by it.
	done := make(chan error, 1)
	go func() { done <- tile.Await(context.Background(), 6) }()
	time.Sleep(10 * time.Millisecond)
	write(3, 3, 3, 3)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A fill that fails releases its waiters with its error, naming the
	// tile, and every later Await returns it too.
	bad := New("31TFJ", g, []string{"B04"}, 0.0001, -0.1)
	bad.StartFilling(1)
	go func() { done <- bad.Await(context.Background(), 6) }()
	time.Sleep(10 * time.Millisecond)
	boom := errors.New("window 3 unreadable")
	bad.EndFilling(boom)
	for _, err := range []error{<-done, bad.Await(context.Background(), 1)} {
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "31TFJ") {
			t.Fatalf("Await after a failed fill: %v, want %v naming the tile", err, boom)
		}
	}
	// A fill that ends whole releases readers even of rows no window
	// wrote; a tile never filled never waits.
	short := New("31TFH", g, []string{"B04"}, 0.0001, -0.1)
	short.StartFilling(1)
	short.EndFilling(nil)
	if err := short.Await(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	if err := filled(t).Await(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	// A window of fewer planes than the fill's windowed ones does not
	// make its rows whole: readers wait for the fill's end.
	partial := New("31TGJ", g, []string{"B04", "B08"}, 0.0001, -0.1)
	partial.StartFilling(2)
	if err := partial.Write(0, 0, 6, 6, [][]uint16{make([]uint16, 36)}, make([]uint8, 36), make([]uint8, 36)); err != nil {
		t.Fatal(err)
	}
	short2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if err := partial.Await(short2, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Await after a window of one plane of two: %v, want it to wait", err)
	}
	// An ended context releases a waiter.
	waiting := New("31TEH", g, []string{"B04"}, 0.0001, -0.1)
	waiting.StartFilling(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waiting.Await(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await with an ended context: %v", err)
	}
}

// TestElsewhere writes windows into a tile whose planes a device holds:
// the counts and labels are kept, the planes are not, the fill is followed
// as for a whole tile, and the memory counted is the counts' and labels'.
func TestElsewhere(t *testing.T) {
	g := geo.Grid{EPSG: 32631, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}, Width: 6, Height: 4}
	tile := NewElsewhere("31TEJ", g, []string{"B04", "B08"}, 0.0001, -0.1)
	if tile.HasPlanes() || !New("31TEJ", g, []string{"B04"}, 1, 0).HasPlanes() {
		t.Fatal("HasPlanes is wrong")
	}
	if got, want := tile.Bytes(), int64(2*6*4); got != want {
		t.Errorf("Bytes %d, want %d", got, want)
	}
	tile.StartFilling(2)
	dn := [][]uint16{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}
	if err := tile.Write(0, 0, 6, 1, dn, []uint8{1, 1, 2, 2, 0, 1}, []uint8{10, 20, 30, 40, 50, 60}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tile.Await(ctx, 1); err != nil {
		t.Fatalf("the first row written: %v", err)
	}
	if tile.Count[3] != 2 || tile.Labels[5] != 60 || tile.DN[0] != nil || tile.DN[1] != nil {
		t.Errorf("after a window: counts %v, labels %v, planes %d and %d long", tile.Count[:6], tile.Labels[:6], len(tile.DN[0]), len(tile.DN[1]))
	}
	tile.EndFilling(nil)
	if err := tile.Await(ctx, 4); err != nil {
		t.Fatalf("an ended fill: %v", err)
	}
}
