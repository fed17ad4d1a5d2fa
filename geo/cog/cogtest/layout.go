package cogtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// TIFF tags the checker reads.
const (
	tagNewSubfileType = 254
	tagImageWidth     = 256
	tagImageLength    = 257
	tagTileWidth      = 322
	tagTileLength     = 323
	tagTileOffsets    = 324
	tagTileByteCounts = 325
)

// CheckLayout checks the rules of GDAL's COG layout on the file at path,
// with Parse: the ghost metadata first, then every IFD and its values, the
// tile arrays, and the tiles of the smallest overview first and of full
// resolution last, row-major, each with a leader holding its size and a
// trailer repeating its last 4 bytes, nothing in between. It holds for
// GDAL's own COGs too.
func CheckLayout(t testing.TB, path string) *File {
	t.Helper()
	tf, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	head := 8
	if tf.Big {
		head = 16
	}
	ghost := string(tf.Data[head:])
	const prefix = "GDAL_STRUCTURAL_METADATA_SIZE="
	if !strings.HasPrefix(ghost, prefix) {
		t.Fatalf("no ghost metadata after the header: %q", ghost[:40])
	}
	var size int
	if _, err := fmt.Sscanf(ghost[len(prefix):], "%06d bytes\n", &size); err != nil {
		t.Fatal(err)
	}
	body := ghost[43 : 43+size]
	for _, item := range []string{"LAYOUT=IFDS_BEFORE_DATA\n", "BLOCK_ORDER=ROW_MAJOR\n", "BLOCK_LEADER=SIZE_AS_UINT4\n", "BLOCK_TRAILER=LAST_4_BYTES_REPEATED\n", "KNOWN_INCOMPATIBLE_EDITION=NO\n"} {
		if !strings.Contains(body, item) {
			t.Errorf("ghost metadata lacks %q", item)
		}
	}
	if end := int64(head + 43 + size); tf.First != end+end%2 {
		t.Errorf("first IFD at %d, not right after the ghost metadata (%d)", tf.First, end)
	}
	// Everything that is not tile data ends before the first tile.
	var metaEnd int64
	for i, ifd := range tf.IFDs {
		if i > 0 && ifd.Offset < tf.IFDs[i-1].End {
			t.Errorf("IFD %d overlaps the previous one", i)
		}
		metaEnd = max(metaEnd, ifd.End)
		for _, tag := range ifd.Tags {
			if tag.At >= 0 {
				metaEnd = max(metaEnd, tag.At+tag.Size)
			}
		}
		if i > 0 && ifd.Tags[tagNewSubfileType].Ints[0] != 1 {
			t.Errorf("IFD %d is not marked as an overview", i)
		}
	}
	pos := metaEnd + metaEnd%2
	le := binary.LittleEndian
	for i := len(tf.IFDs) - 1; i >= 0; i-- {
		ifd := tf.IFDs[i]
		offs, counts := ifd.Tags[tagTileOffsets].Ints, ifd.Tags[tagTileByteCounts].Ints
		w, h := int(ifd.Tags[tagImageWidth].Ints[0]), int(ifd.Tags[tagImageLength].Ints[0])
		bw, bh := int(ifd.Tags[tagTileWidth].Ints[0]), int(ifd.Tags[tagTileLength].Ints[0])
		if n := ((w + bw - 1) / bw) * ((h + bh - 1) / bh); len(offs) != n || len(counts) != n {
			t.Fatalf("IFD %d: %d offsets and %d counts for %d tiles", i, len(offs), len(counts), n)
		}
		for k := range offs {
			o, n := int64(offs[k]), int64(counts[k])
			if o != pos+4 {
				t.Fatalf("IFD %d tile %d at %d, expected %d (after the previous tile and a leader)", i, k, o, pos+4)
			}
			if got := int64(le.Uint32(tf.Data[o-4:])); got != n {
				t.Fatalf("IFD %d tile %d: leader says %d bytes, TileByteCounts %d", i, k, got, n)
			}
			if !bytes.Equal(tf.Data[o+n:o+n+4], tf.Data[o+n-4:o+n]) {
				t.Fatalf("IFD %d tile %d: trailer does not repeat the last 4 bytes", i, k)
			}
			pos = o + n + 4
		}
	}
	if pos != int64(len(tf.Data)) {
		t.Errorf("file has %d bytes after the last tile", int64(len(tf.Data))-pos)
	}
	return tf
}
