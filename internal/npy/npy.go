// Package npy writes and reads NumPy's .npy format (version 1.0), the
// arrays that lulc hands to Python: a header naming the dtype and the
// shape, then the data, little-endian, in C order.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Header is the .npy header of an array of dtype descr ('<f4', '|u1', …)
// and shape, padded so that the data starts on a 64-byte boundary.
func Header(descr string, shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	h += strings.Repeat(" ", (64-(10+len(h)+1)%64)%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	b.WriteString(h)
	return b.Bytes()
}

var headerRE = regexp.MustCompile(`'descr':\s*'([^']+)',\s*'fortran_order':\s*(True|False),\s*'shape':\s*\(([^)]*)\)`)

// ReadUint8 reads a 2-D uint8 array (descr '|u1', C order) and its shape.
func ReadUint8(path string) (data []uint8, rows, cols int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	var pre [10]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil || string(pre[:6]) != "\x93NUMPY" {
		return nil, 0, 0, fmt.Errorf("%s: not a .npy file", path)
	}
	n := int(binary.LittleEndian.Uint16(pre[8:]))
	if pre[6] != 1 {
		// Versions 2 and 3 have a 4-byte header length: lulc's readers
		// take what numpy.save writes for arrays this size, version 1.
		return nil, 0, 0, fmt.Errorf("%s: .npy version %d.%d, want 1.0 (numpy.save writes it)", path, pre[6], pre[7])
	}
	h := make([]byte, n)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, 0, 0, fmt.Errorf("%s: header: %w", path, err)
	}
	m := headerRE.FindStringSubmatch(string(h))
	if m == nil {
		return nil, 0, 0, fmt.Errorf("%s: unreadable header %q", path, strings.TrimSpace(string(h)))
	}
	if m[1] != "|u1" && m[1] != "<u1" && m[1] != "u1" {
		return nil, 0, 0, fmt.Errorf("%s: dtype %s, want uint8 (|u1)", path, m[1])
	}
	if m[2] == "True" {
		return nil, 0, 0, fmt.Errorf("%s: Fortran order: save it in C order (numpy.ascontiguousarray)", path)
	}
	var dims []int
	for _, d := range strings.Split(m[3], ",") {
		if d = strings.TrimSpace(d); d != "" {
			v, err := strconv.Atoi(d)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s: shape (%s)", path, m[3])
			}
			dims = append(dims, v)
		}
	}
	if len(dims) != 2 {
		return nil, 0, 0, fmt.Errorf("%s: shape (%s), want 2-D (rows, cols)", path, m[3])
	}
	data = make([]uint8, dims[0]*dims[1])
	if _, err := io.ReadFull(f, data); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, 0, 0, fmt.Errorf("%s: %d×%d array, file too short", path, dims[0], dims[1])
		}
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return data, dims[0], dims[1], nil
}
