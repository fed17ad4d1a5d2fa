package forest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/lulc/lulc/learn/aoa"
)

func smallModel(t testing.TB) *Model {
	t.Helper()
	const nf, k = 3, 3
	x, y := gaussians(2000, nf, k, 2, 0.02, 4)
	p := Params{Trees: 4, MaxDepth: 5, MinSamplesLeaf: 2, Bins: 32, Bootstrap: true, Seed: 9}
	b, _ := QuantileBins(x, nf, p.Bins, 1000, p.Seed)
	xb, _ := b.Bin(x, nf)
	f, err := Train(context.Background(), xb, y, k, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	return &Model{
		Features: []string{"ndvi", "B04", "nd(B08,B11)"}, Bands: []string{"B04", "B08", "B11"},
		Scale: 0.0001, Offset: -0.1, Params: p, ConfigHash: "abc", Samples: 2000,
		Classes: []Class{{10, "Tree cover", "#006400"}, {40, "Cropland", "#f096ff"}, {80, "Water", "#0064c8"}},
		Bins:    b, Forest: f,
	}
}

func TestModelRoundTrip(t *testing.T) {
	t.Parallel()
	m := smallModel(t)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Encode()
	if !bytes.Equal(data, again) {
		t.Fatal("encoding is not deterministic")
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Forest, m.Forest) || !reflect.DeepEqual(got.Bins, m.Bins) || !reflect.DeepEqual(got.Classes, m.Classes) || got.Params != m.Params {
		t.Fatal("decoded model differs")
	}
	if err := got.Check(m.Features, m.Bands); err != nil {
		t.Error(err)
	}
	err = got.Check([]string{"ndvi", "B04"}, []string{"B04", "B08", "B12"})
	if err == nil || !strings.Contains(err.Error(), "features: model [ndvi, B04, nd(B08,B11)], input [ndvi, B04]") || !strings.Contains(err.Error(), "bands") {
		t.Errorf("mismatch error: %v", err)
	}
}

func TestModelCorruption(t *testing.T) {
	t.Parallel()
	data, _ := smallModel(t).Encode()
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty":     {nil, "truncated"},
		"truncated": {data[:len(data)/2], "checksum"},
		"flipped":   {flip(data, len(data)/3), "checksum"},
		"magic":     {append([]byte("NOTMODEL"), data[8:]...), "not a lulc model"},
		"version":   {flip(data, 7), "format version"},
	} {
		if _, err := Decode(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Bin edges that are not increasing numbers (a model written by
	// something else) are refused: binning searches them.
	for name, bad := range map[string]func(e []float32){
		"unsorted": func(e []float32) { e[0], e[1] = e[1], e[0] },
		"repeated": func(e []float32) { e[1] = e[0] },
		"NaN":      func(e []float32) { e[len(e)/2] = float32(math.NaN()) },
	} {
		m := smallModel(t)
		bad(m.Bins.Edges[1])
		data, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(data); err == nil || !strings.Contains(err.Error(), "feature 1's bin edges are not increasing") {
			t.Errorf("%s edges: %v", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0x5a
	return out
}

// withSum appends a valid checksum, so that fuzzed bodies reach the parser.
func withSum(body []byte) []byte {
	s := sha256.Sum256(body)
	return append(bytes.Clone(body), s[:]...)
}

// FuzzDecode feeds the decoder mutated models with valid checksums: it
// must return an error or a well-formed model, never panic.
func FuzzDecode(f *testing.F) {
	data, _ := smallModel(f).Encode()
	body := data[:len(data)-sha256.Size]
	f.Add(body)
	f.Add(body[:100])
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Decode(withSum(body))
		if err != nil {
			return
		}
		// A model that decodes must also predict without panicking.
		xb := &Binned{N: 1, F: m.Forest.Features, Codes: make([]uint8, m.Forest.Features)}
		if _, _, err := m.Forest.Classify(xb); err != nil {
			t.Fatal(err)
		}
	})
}

func TestModelAOARoundTrip(t *testing.T) {
	t.Parallel()
	m := smallModel(t)
	plain, _ := m.Encode()
	if bytes.Contains(plain, []byte(`"aoa"`)) {
		t.Fatal("a model without an area of applicability names one")
	}
	var s []aoa.Sample
	x, _ := gaussians(300, 3, 3, 2, 0.02, 5)
	for i := range 300 {
		s = append(s, aoa.Sample{X: x[i*3 : (i+1)*3], Fold: uint64(i % 5), Key: uint64(i * 7919 % 300)})
	}
	ref, err := aoa.Build(context.Background(), s, 3, m.Forest.Importance, 200, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.AOA = ref
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.AOA, ref) || !reflect.DeepEqual(got.Forest, m.Forest) {
		t.Fatal("decoded area of applicability differs")
	}
	// A header that claims more points than follow is refused.
	body := bytes.Replace(data[:len(data)-sha256.Size], []byte(`"points":200`), []byte(`"points":201`), 1)
	if _, err := Decode(withSum(body)); err == nil || !strings.Contains(err.Error(), "area of applicability") {
		t.Errorf("wrong point count: %v", err)
	}
}
