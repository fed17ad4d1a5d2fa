package driver

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// parallelCopy copies every byte, for sizes below, at and across its
// pieces.
func TestParallelCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 4<<20 - 1, 4 << 20, 4<<20 + 1, 37<<20 + 5} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		dst := make([]byte, n)
		parallelCopy(dst, src)
		if !bytes.Equal(dst, src) {
			t.Errorf("%d bytes: copy differs", n)
		}
	}
}

// The stager's copies reach the device whole: sources of one chunk, of
// several (both buffers reused), and ending mid-chunk, one after another
// through the same stager.
func TestStagerCopy(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{1000, stageChunk, 3*stageChunk + 12345} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		var dst Buffer
		must(t, d.Do(func() (err error) {
			dst, err = Alloc(uint64(n))
			return err
		}))
		must(t, d.CopyAside(dst.Ptr, src, false))
		got := make([]byte, n)
		must(t, d.Do(func() error {
			defer dst.Free()
			return Download(got, dst)
		}))
		if !bytes.Equal(got, src) {
			t.Errorf("%d bytes: the device's copy differs", n)
		}
	}
}
