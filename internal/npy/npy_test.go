package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoundTrip writes a 2-D uint8 array with Header and reads it back;
// other dtypes, ranks and truncated files are refused with the reason.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, descr string, shape []int, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, append(Header(descr, shape), data...), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := Header("|u1", []int{2, 3})
	if len(h)%64 != 0 || !bytes.HasPrefix(h, []byte("\x93NUMPY\x01\x00")) {
		t.Fatalf("header %q", h)
	}
	got, r, c, err := ReadUint8(write("a.npy", "|u1", []int{2, 3}, []byte{1, 2, 3, 4, 5, 6}))
	if err != nil || r != 2 || c != 3 || !bytes.Equal(got, []byte{1, 2, 3, 4, 5, 6}) {
		t.Errorf("read %v %d×%d %v", got, r, c, err)
	}
	for name, want := range map[string]string{
		write("f.npy", "<f4", []int{1, 1}, make([]byte, 4)): "dtype <f4, want uint8",
		write("r.npy", "|u1", []int{4}, make([]byte, 4)):    "want 2-D",
		write("s.npy", "|u1", []int{3, 3}, make([]byte, 4)): "file too short",
	} {
		if _, _, _, err := ReadUint8(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", filepath.Base(name), err, want)
		}
	}
}
