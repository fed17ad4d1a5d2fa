package cuda

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"slices"
)

// fatbin is lulc's kernels as the driver loads them: machine code (SASS)
// for the GPUs lulc is measured on, compiled ahead from the committed PTX
// by ptxas, with that PTX as the fallback the driver JIT-compiles for any
// other GPU (kernels/gen.sh). Loading machine code skips the JIT, which
// costs a fresh machine about five seconds before the first kernel.
//
//go:embed kernels/lulc.fatbin
var fatbin []byte

// Fatbin returns the embedded fatbin.
func Fatbin() []byte { return fatbin }

// Image is one entry of a fatbin: machine code for an architecture (sm_90
// is 90), or PTX for a virtual one (compute_75 is 75).
type Image struct {
	PTX  bool
	Arch int
}

// String names the image as nvcc does: sm_90, or compute_75 (PTX).
func (im Image) String() string {
	if im.PTX {
		return fmt.Sprintf("compute_%d (PTX)", im.Arch)
	}
	return fmt.Sprintf("sm_%d", im.Arch)
}

// fatbinMagic opens a fatbin (CUDA's fatBinaryHeader).
const fatbinMagic = 0xBA55ED50

// Images lists a fatbin's entries. The layout read is the one nvcc's
// fatbinary writes: a 16-byte header (magic, version, header size, size
// of the entries) and per entry a header whose first fields are its kind
// (1 PTX, 2 ELF), its header's size and its payload's size, and whose
// architecture is at byte 28.
func Images(b []byte) ([]Image, error) {
	le := binary.LittleEndian
	if len(b) < 16 || le.Uint32(b) != fatbinMagic {
		return nil, fmt.Errorf("fatbin: no fatbin header")
	}
	off, end := uint64(le.Uint16(b[6:])), uint64(le.Uint16(b[6:]))+le.Uint64(b[8:])
	if end > uint64(len(b)) {
		return nil, fmt.Errorf("fatbin: %d bytes of entries in a file of %d", end, len(b))
	}
	var out []Image
	for off < end {
		if off+32 > end {
			return nil, fmt.Errorf("fatbin: an entry header cut at byte %d", off)
		}
		e := b[off:]
		kind, hdr, size := le.Uint16(e), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
		if kind != 1 && kind != 2 {
			return nil, fmt.Errorf("fatbin: entry of kind %d at byte %d", kind, off)
		}
		out = append(out, Image{PTX: kind == 1, Arch: int(le.Uint32(e[28:]))})
		off += hdr + size
	}
	return out, nil
}

// MachineCode says which machine code of images runs on a device of
// compute capability major.minor without the JIT: sm_XY runs on X.Y and
// on later minors of the same major. ok is false where the driver
// JIT-compiles the PTX instead.
func MachineCode(images []Image, major, minor int) (Image, bool) {
	var best Image
	found := false
	for _, im := range images {
		if im.PTX || im.Arch/10 != major || im.Arch%10 > minor {
			continue
		}
		if !found || im.Arch > best.Arch {
			best, found = im, true
		}
	}
	return best, found
}

// machineArchs lists the architectures of the fatbin's machine code.
func machineArchs(images []Image) []string {
	var out []string
	for _, im := range images {
		if !im.PTX {
			out = append(out, im.String())
		}
	}
	slices.Sort(out)
	return out
}
