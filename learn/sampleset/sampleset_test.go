package sampleset

import (
	"crypto/sha256"
	"reflect"
	"testing"
)

func smallSet() *Set {
	return &Set{Header: Header{Features: []string{"B04", "ndvi"}, Classes: []uint8{10, 40}, Sources: []string{"31TEJ"}, Seed: 7, Config: "abc"},
		X: []float32{0.1, 0.5, 0.2, -0.3, 0.3, 0.9}, Y: []uint8{0, 1, 1}, Split: []uint8{0, 0, 1}, Pixel: []uint64{1, 2, 3}}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	body, err := smallSet().Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, smallSet()) {
		t.Fatalf("round trip: %+v", back)
	}
	body[len(body)/2] ^= 1
	if _, err := Decode(body); err == nil {
		t.Error("a corrupted file decoded")
	}
}

// FuzzDecode feeds the decoder mutated samples files with valid checksums
// (so that the mutations reach the parser): it must return an error or a
// set whose tables agree in length, never panic.
func FuzzDecode(f *testing.F) {
	body, _ := smallSet().Encode()
	f.Add(body[:len(body)-sha256.Size])
	f.Add(body[:20])
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha256.Sum256(body)
		s, err := Decode(append(body[:len(body):len(body)], sum[:]...))
		if err != nil {
			return
		}
		n := s.N()
		if len(s.Split) != n || len(s.Pixel) != n || len(s.X) != n*len(s.Features) {
			t.Fatalf("decoded %d labels, %d splits, %d pixels, %d values for %d features", n, len(s.Split), len(s.Pixel), len(s.X), len(s.Features))
		}
		for _, y := range s.Y {
			if int(y) >= len(s.Classes) {
				t.Fatalf("label index %d beyond %d classes", y, len(s.Classes))
			}
		}
	})
}

// TestSubset: each split's rows, in their order, with their labels, for a
// row count that leaves the last block of the parallel copy short.
func TestSubset(t *testing.T) {
	t.Parallel()
	const nf, n = 3, 40_000
	s := &Set{Header: Header{Features: []string{"a", "b", "c"}}, X: make([]float32, n*nf), Y: make([]uint8, n), Split: make([]uint8, n)}
	for i := range n {
		s.Split[i] = uint8(i*7%11) % 3 // splits 0, 1 and 2 interleaved
		s.Y[i] = uint8(i % 5)
		for f := range nf {
			s.X[i*nf+f] = float32(i*nf + f)
		}
	}
	for split := range uint8(3) {
		var wantX []float32
		var wantY []uint8
		for i := range n {
			if s.Split[i] == split {
				wantX = append(wantX, s.X[i*nf:(i+1)*nf]...)
				wantY = append(wantY, s.Y[i])
			}
		}
		x, y := s.Subset(split)
		if !reflect.DeepEqual(x, wantX) || !reflect.DeepEqual(y, wantY) {
			t.Errorf("split %d: %d rows, want %d, or their values differ", split, len(y), len(wantY))
		}
	}
	if x, y := s.Subset(9); len(x) != 0 || len(y) != 0 {
		t.Errorf("a split no row has: %d values", len(x))
	}
}

// BenchmarkSubset takes the training half of a full tile's samples:
// 1,600,000 rows of 56 features.
func BenchmarkSubset(b *testing.B) {
	const nf, n = 56, 1_600_000
	s := &Set{Header: Header{Features: make([]string, nf)}, X: make([]float32, n*nf), Y: make([]uint8, n), Split: make([]uint8, n)}
	for i := range n {
		s.Split[i] = uint8(i % 2)
	}
	for b.Loop() {
		s.Subset(0)
	}
}
