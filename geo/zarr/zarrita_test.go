package zarr

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestZarrita reads a store this package wrote with zarrita, a Zarr v3
// reader from npm (scripts/zarr-check): every value of every array equal
// to lulc's own reader's. Skips where node, npm or the registry is
// missing.
func TestZarrita(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.zarr")
	writeStore(t, path, 1000, 700, 128, Options{Chunk: 256, Shard: 512})
	out := filepath.Join(dir, "out")
	cmd := exec.Command("../../scripts/zarr-check", path, out)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("zarrita: %s", b)
	}
	if err != nil {
		t.Fatalf("zarrita: %v\n%s", err, b)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range s.Names() {
		want, err := s.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(out, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		e := size(s.Arrays[name].DataType)
		if len(raw) != len(want)*e {
			t.Fatalf("%s: zarrita read %d bytes, want %d", name, len(raw), len(want)*e)
		}
		for i, w := range want {
			var got float64
			switch s.Arrays[name].DataType {
			case Uint8:
				got = float64(raw[i])
			case Uint16:
				got = float64(binary.LittleEndian.Uint16(raw[2*i:]))
			case Int32:
				got = float64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			case Float64:
				got = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
			if got != w {
				t.Fatalf("%s[%d]: zarrita %v, lulc %v", name, i, got, w)
			}
		}
	}
}
