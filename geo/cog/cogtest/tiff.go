// Package cogtest holds what the tests of lulc's COG encoder (geo/cog)
// and of the GDAL door that calls it (geo/raster) share: a reader of
// little-endian (Big)TIFF files written independently of the encoder, a
// checker of GDAL's COG layout, the overview rule stated pixel by pixel,
// and the rasters they encode. Only tests import it.
package cogtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// File is a little-endian (Big)TIFF parsed independently of the encoder,
// for checking the layout the tests expect.
type File struct {
	Big   bool
	Data  []byte
	First int64 // offset of the first IFD
	IFDs  []IFD
}

// IFD is one image file directory: where it lies and its tags.
type IFD struct {
	Offset, End int64 // the directory itself, entries and next pointer
	Tags        map[uint16]Tag
}

// Tag is one entry: numeric values widened to uint64 (or float64 for
// DOUBLE), or the text of an ASCII tag, and where out-of-line values lie.
type Tag struct {
	Type   uint16
	Count  uint64
	At     int64 // offset of the values when not inline, else -1
	Size   int64 // bytes of the values
	Ints   []uint64
	Floats []float64
	Text   string
}

// Read reads and parses the TIFF at path.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse parses a little-endian TIFF or BigTIFF: its header and every IFD.
func Parse(b []byte) (*File, error) {
	le := binary.LittleEndian
	if len(b) < 16 || string(b[:2]) != "II" {
		return nil, fmt.Errorf("not a little-endian tiff")
	}
	t := &File{Data: b}
	switch le.Uint16(b[2:]) {
	case 42:
		t.First = int64(le.Uint32(b[4:]))
	case 43:
		t.Big = true
		t.First = int64(le.Uint64(b[8:]))
	default:
		return nil, fmt.Errorf("bad tiff version %d", le.Uint16(b[2:]))
	}
	sizes := map[uint16]int64{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8, 17: 8, 18: 8}
	for off := t.First; off != 0; {
		if off < 0 || off >= int64(len(b)) || len(t.IFDs) > 64 {
			return nil, fmt.Errorf("ifd offset %d out of range", off)
		}
		ifd := IFD{Offset: off, Tags: map[uint16]Tag{}}
		var n, entry, inline int64
		var p int64
		if t.Big {
			n, entry, inline, p = int64(le.Uint64(b[off:])), 20, 8, off+8
		} else {
			n, entry, inline, p = int64(le.Uint16(b[off:])), 12, 4, off+2
		}
		for i := int64(0); i < n; i++ {
			e := b[p+i*entry:]
			tag, typ := le.Uint16(e), le.Uint16(e[2:])
			var count uint64
			var val []byte
			if t.Big {
				count, val = le.Uint64(e[4:]), e[12:20]
			} else {
				count, val = uint64(le.Uint32(e[4:])), e[8:12]
			}
			sz, ok := sizes[typ]
			if !ok {
				return nil, fmt.Errorf("tag %d: unknown type %d", tag, typ)
			}
			tt := Tag{Type: typ, Count: count, At: -1, Size: sz * int64(count)}
			if tt.Size > inline {
				if t.Big {
					tt.At = int64(le.Uint64(val))
				} else {
					tt.At = int64(le.Uint32(val))
				}
				if tt.At+tt.Size > int64(len(b)) {
					return nil, fmt.Errorf("tag %d values beyond the file", tag)
				}
				val = b[tt.At : tt.At+tt.Size]
			}
			for j := uint64(0); j < count; j++ {
				switch typ {
				case 1, 7:
					tt.Ints = append(tt.Ints, uint64(val[j]))
				case 2:
				case 3:
					tt.Ints = append(tt.Ints, uint64(le.Uint16(val[2*j:])))
				case 4:
					tt.Ints = append(tt.Ints, uint64(le.Uint32(val[4*j:])))
				case 16:
					tt.Ints = append(tt.Ints, le.Uint64(val[8*j:]))
				case 12:
					tt.Floats = append(tt.Floats, math.Float64frombits(le.Uint64(val[8*j:])))
				}
			}
			if typ == 2 {
				tt.Text = string(val[:count])
			}
			ifd.Tags[tag] = tt
		}
		q := p + n*entry
		if t.Big {
			off = int64(le.Uint64(b[q:]))
			ifd.End = q + 8
		} else {
			off = int64(le.Uint32(b[q:]))
			ifd.End = q + 4
		}
		t.IFDs = append(t.IFDs, ifd)
	}
	return t, nil
}
