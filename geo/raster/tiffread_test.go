package raster

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// tiffFile is a little-endian (Big)TIFF parsed independently of the
// encoder, for checking the layout the tests expect.
type tiffFile struct {
	big   bool
	data  []byte
	first int64 // offset of the first IFD
	ifds  []tiffIFD
}

// tiffIFD is one image file directory: where it lies and its tags.
type tiffIFD struct {
	offset, end int64 // the directory itself, entries and next pointer
	tags        map[uint16]tiffTag
}

// tiffTag is one entry: numeric values widened to uint64 (or float64 for
// DOUBLE), or the text of an ASCII tag, and where out-of-line values lie.
type tiffTag struct {
	typ    uint16
	count  uint64
	at     int64 // offset of the values when not inline, else -1
	size   int64 // bytes of the values
	ints   []uint64
	floats []float64
	text   string
}

func readTIFF(path string) (*tiffFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTIFF(b)
}

func parseTIFF(b []byte) (*tiffFile, error) {
	le := binary.LittleEndian
	if len(b) < 16 || string(b[:2]) != "II" {
		return nil, fmt.Errorf("not a little-endian tiff")
	}
	t := &tiffFile{data: b}
	switch le.Uint16(b[2:]) {
	case 42:
		t.first = int64(le.Uint32(b[4:]))
	case 43:
		t.big = true
		t.first = int64(le.Uint64(b[8:]))
	default:
		return nil, fmt.Errorf("bad tiff version %d", le.Uint16(b[2:]))
	}
	sizes := map[uint16]int64{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8, 17: 8, 18: 8}
	for off := t.first; off != 0; {
		if off < 0 || off >= int64(len(b)) || len(t.ifds) > 64 {
			return nil, fmt.Errorf("ifd offset %d out of range", off)
		}
		ifd := tiffIFD{offset: off, tags: map[uint16]tiffTag{}}
		var n, entry, inline int64
		var p int64
		if t.big {
			n, entry, inline, p = int64(le.Uint64(b[off:])), 20, 8, off+8
		} else {
			n, entry, inline, p = int64(le.Uint16(b[off:])), 12, 4, off+2
		}
		for i := int64(0); i < n; i++ {
			e := b[p+i*entry:]
			tag, typ := le.Uint16(e), le.Uint16(e[2:])
			var count uint64
			var val []byte
			if t.big {
				count, val = le.Uint64(e[4:]), e[12:20]
			} else {
				count, val = uint64(le.Uint32(e[4:])), e[8:12]
			}
			sz, ok := sizes[typ]
			if !ok {
				return nil, fmt.Errorf("tag %d: unknown type %d", tag, typ)
			}
			tt := tiffTag{typ: typ, count: count, at: -1, size: sz * int64(count)}
			if tt.size > inline {
				if t.big {
					tt.at = int64(le.Uint64(val))
				} else {
					tt.at = int64(le.Uint32(val))
				}
				if tt.at+tt.size > int64(len(b)) {
					return nil, fmt.Errorf("tag %d values beyond the file", tag)
				}
				val = b[tt.at : tt.at+tt.size]
			}
			for j := uint64(0); j < count; j++ {
				switch typ {
				case 1, 7:
					tt.ints = append(tt.ints, uint64(val[j]))
				case 2:
				case 3:
					tt.ints = append(tt.ints, uint64(le.Uint16(val[2*j:])))
				case 4:
					tt.ints = append(tt.ints, uint64(le.Uint32(val[4*j:])))
				case 16:
					tt.ints = append(tt.ints, le.Uint64(val[8*j:]))
				case 12:
					tt.floats = append(tt.floats, math.Float64frombits(le.Uint64(val[8*j:])))
				}
			}
			if typ == 2 {
				tt.text = string(val[:count])
			}
			ifd.tags[tag] = tt
		}
		q := p + n*entry
		if t.big {
			off = int64(le.Uint64(b[q:]))
			ifd.end = q + 8
		} else {
			off = int64(le.Uint32(b[q:]))
			ifd.end = q + 4
		}
		t.ifds = append(t.ifds, ifd)
	}
	return t, nil
}
