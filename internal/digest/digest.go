// Package digest is the checksum lulc records for the files it writes:
// BLAKE3 with a 256-bit output, in hex, as `b3sum` prints it; Matches
// checks a file against a multihash of it (BLAKE3, or the SHA-256 older
// outputs record).
//
// BLAKE3 hashes a file as a tree of 1 KiB chunks, so one file is hashed on
// every core; SHA-256 is a chain that one core must walk from the first
// byte to the last. For a 3 GB stack that chain (about 1–2 GB/s with the
// SHA extensions) was the longest step left after a GPU ingest's windows,
// and it cannot start before the last tile is compressed, because a COG's
// header, which lists every tile's offset, comes first in the file.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"lukechampine.com/blake3"
)

// Name is the algorithm's name, as manifests key the checksum.
const Name = "blake3"

// Multihash is the multihash of a hex checksum (BLAKE3's code 0x1e, 32
// bytes), as STAC's file extension records it in file:checksum.
func Multihash(sum string) string { return "1e20" + sum }

// blockSize is how much Writer gathers before writing and hashing: large
// enough that the hasher spreads a block over every core (it hashes
// writes of a few kilobytes at a tenth of its speed), small enough that
// three blocks are little memory.
const blockSize = 32 << 20

// Bytes returns the checksum of b.
func Bytes(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

// File returns the checksum and size of the file at path.
func File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("checksum %s: %w", path, err)
	}
	defer f.Close()
	h := blake3.New(32, nil)
	// Hidden behind a plain Reader, the file is copied in blockSize
	// pieces (an *os.File would choose 32 KiB ones itself, which the
	// hasher spreads over fewer cores).
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, blockSize))
	if err != nil {
		return "", 0, fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Writer writes through to an io.Writer and takes the checksum of what it
// wrote. It gathers writes into large blocks and hands each to a goroutine
// that writes it out and hashes it at once, while the caller fills the
// next: the file's writing, its hashing and the caller's producing
// overlap.
type Writer struct {
	dst  io.Writer
	h    *blake3.Hasher
	buf  []byte // being filled
	free chan []byte
	full chan []byte
	done chan struct{}
	n    int64

	mu  sync.Mutex
	err error // the first write error
}

// NewWriter returns a Writer to dst for about size bytes (its blocks are
// no larger); Close must be called, once.
func NewWriter(dst io.Writer, size int64) *Writer {
	n := int(min(max(size, 64<<10), blockSize))
	w := &Writer{dst: dst, h: blake3.New(32, nil), free: make(chan []byte, 3), full: make(chan []byte, 2), done: make(chan struct{})}
	w.free <- make([]byte, 0, n)
	w.free <- make([]byte, 0, n)
	w.buf = make([]byte, 0, n)
	go w.drain()
	return w
}

// drain writes and hashes the blocks in order.
func (w *Writer) drain() {
	defer close(w.done)
	for b := range w.full {
		var wg sync.WaitGroup
		wg.Go(func() { w.h.Write(b) })
		if w.failed() == nil {
			if _, err := w.dst.Write(b); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
		}
		wg.Wait()
		w.free <- b[:0]
	}
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Write implements io.Writer; an error of the underlying writer comes
// back from a later Write or from Close.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.failed(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf, p = w.buf[:len(w.buf)+k], p[k:]
		if len(w.buf) == cap(w.buf) {
			w.full <- w.buf
			w.buf = <-w.free
		}
	}
	w.n += int64(n)
	return n, nil
}

// Close writes what is left, waits for the blocks in flight, and returns
// the checksum and size of all that was written, or the first error.
func (w *Writer) Close() (string, int64, error) {
	if len(w.buf) > 0 {
		w.full <- w.buf
	}
	close(w.full)
	<-w.done
	if err := w.failed(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(w.h.Sum(nil)), w.n, nil
}

// Matches reports whether the file at path has the checksum multihash
// names: BLAKE3-256 (prefix 1e20, what lulc writes) or SHA-256 (1220,
// what it wrote before and still verifies). A missing file or another
// hash does not match.
func Matches(path, multihash string) bool {
	switch {
	case strings.HasPrefix(multihash, "1e20"):
		sum, _, err := File(path)
		return err == nil && Multihash(sum) == multihash
	case strings.HasPrefix(multihash, "1220"):
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return false
		}
		return "1220"+hex.EncodeToString(h.Sum(nil)) == multihash
	}
	return false
}
