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
