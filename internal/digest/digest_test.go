package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The empty input's and a counting input's checksums are BLAKE3's own
// test vectors, so the library and the wiring are checked against the
// specification, not against themselves.
func TestVectors(t *testing.T) {
	if got := Bytes(nil); got != "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" {
		t.Errorf("empty input: %s", got)
	}
	in := make([]byte, 1023)
	for i := range in {
		in[i] = byte(i % 251)
	}
	if got := Bytes(in); got != "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11" {
		t.Errorf("1023 bytes: %s", got)
	}
}

// A Writer writes exactly what it was given, through writes of every
// size (across its blocks' edges), and its checksum is the bytes'.
func TestWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 3*blockSize+12345)
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	var got bytes.Buffer
	w := NewWriter(&got, int64(len(want)))
	for p := want; len(p) > 0; {
		k := min(len(p), []int{0, 1, 4, 4096, 300_000, blockSize + 7}[r.IntN(6)])
		if n, err := w.Write(p[:k]); n != k || err != nil {
			t.Fatalf("Write(%d) = %d, %v", k, n, err)
		}
		p = p[k:]
	}
	sum, n, err := w.Close()
	if err != nil || n != int64(len(want)) || sum != Bytes(want) || !bytes.Equal(got.Bytes(), want) {
		t.Errorf("Close = %s, %d, %v; want %s, %d, and the bytes equal: %v", sum, n, err, Bytes(want), len(want), bytes.Equal(got.Bytes(), want))
	}
	// The size is a hint: more bytes than it says go through too.
	got.Reset()
	w = NewWriter(&got, 1000)
	w.Write(want[:5<<20])
	if sum, n, err := w.Close(); err != nil || n != 5<<20 || sum != Bytes(want[:5<<20]) || !bytes.Equal(got.Bytes(), want[:5<<20]) {
		t.Errorf("5 MiB through a Writer sized for 1000 bytes: %s, %d, %v", sum, n, err)
	}
	// A Writer given nothing writes nothing and sums the empty input.
	got.Reset()
	if sum, n, err := NewWriter(&got, 0).Close(); sum != Bytes(nil) || n != 0 || err != nil || got.Len() != 0 {
		t.Errorf("empty: %s, %d, %v, %d bytes written", sum, n, err, got.Len())
	}
}

type failing struct{ after int }

func (f *failing) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// The underlying writer's error comes back, from a later Write or from
// Close, and no checksum with it.
func TestWriterError(t *testing.T) {
	w := NewWriter(&failing{after: 1}, 4*blockSize)
	big := make([]byte, blockSize)
	var werr error
	for range 4 {
		if _, err := w.Write(big); err != nil {
			werr = err
			break
		}
	}
	sum, _, err := w.Close()
	if err == nil || sum != "" || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Close = %q, %v; want the writer's error", sum, err)
	}
	if werr != nil && !strings.Contains(werr.Error(), "disk full") {
		t.Errorf("Write failed with %v", werr)
	}
}

// File's checksum is the bytes', and b3sum's where that tool is installed.
func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.bin")
	b := make([]byte, blockSize+999)
	for i := range b {
		b[i] = byte(i * 31)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, n, err := File(p)
	if err != nil || n != int64(len(b)) || sum != Bytes(b) {
		t.Fatalf("File = %s, %d, %v; want %s, %d", sum, n, err, Bytes(b), len(b))
	}
	if _, _, err := File(p + ".missing"); err == nil || !strings.Contains(err.Error(), "x.bin.missing") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := exec.LookPath("b3sum"); err != nil {
		t.Log("b3sum not installed: checked against the library only")
		return
	}
	out, err := exec.Command("b3sum", p).Output()
	if err != nil || !strings.HasPrefix(string(out), sum+" ") {
		t.Errorf("b3sum says %q (%v); File %s", out, err, sum)
	}
}

func TestMultihash(t *testing.T) {
	if got := Multihash(Bytes(nil)); got != "1e20af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" {
		t.Errorf("Multihash = %s", got)
	}
}

// BenchmarkWriter writes and hashes 256 MiB through a Writer to
// io.Discard, and BenchmarkSHA256 hashes the same bytes with SHA-256 as
// outputs were hashed before, for comparing on one machine.
func BenchmarkWriter(b *testing.B) {
	buf := benchBytes()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		w := NewWriter(io.Discard, int64(len(buf)))
		for p := buf; len(p) > 0; p = p[min(len(p), 300_000):] {
			w.Write(p[:min(len(p), 300_000)]) // tile-sized writes, as a COG's
		}
		if _, _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSHA256(b *testing.B) {
	buf := benchBytes()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		sha256.Sum256(buf)
	}
}

func benchBytes() []byte {
	buf := make([]byte, 256<<20)
	r := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
	}
	return buf
}
