// Package cog is lulc's Cloud-Optimized GeoTIFF encoder, in Go and
// without cgo: it writes the files GDAL's COG driver writes, laid out as
// GDAL lays them out, so GDAL reports them with LAYOUT=COG:
//
//	header (TIFF or BigTIFF), pointing at the first IFD
//	"ghost" structural metadata: GDAL_STRUCTURAL_METADATA_SIZE=… bytes,
//	    then LAYOUT=IFDS_BEFORE_DATA, BLOCK_ORDER=ROW_MAJOR,
//	    BLOCK_LEADER=SIZE_AS_UINT4, BLOCK_TRAILER=LAST_4_BYTES_REPEATED,
//	    KNOWN_INCOMPATIBLE_EDITION=NO
//	IFD of full resolution, then its tag values (not the tile arrays)
//	IFD of each overview, largest first, each followed by its tag values
//	TileOffsets and TileByteCounts of every IFD, in IFD order
//	tiles of the smallest overview, …, of the largest, of full resolution,
//	    each level in row-major order, each tile as a 4-byte little-endian
//	    size, the data, and the data's last 4 bytes again
//
// Pixels are Byte, UInt16 or Float32 (NaN its nodata). Bands are
// interleaved by pixel (PlanarConfiguration 1), as GDAL's COG driver
// writes them. Edge tiles are padded with zeros to whole blocks, as
// GDAL pads them. Overviews follow the rules of Options. Tiles are
// compressed on several goroutines but written in a fixed order, so a file
// does not depend on GOMAXPROCS.
//
// NewPlan lays a COG out, or says why the encoder cannot write it (its
// caller, geo/raster, then has GDAL's driver write it); Write encodes
// bands held in memory, and Writer a raster written window by window. The
// CRS comes in as the GeoKeys GDAL would write for it (GeoKeys), which
// geo/raster asks GDAL for: this package knows no CRS.
package cog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/atomicfs"
)

// TIFF tags the encoder writes.
const (
	tagNewSubfileType  = 254
	tagImageWidth      = 256
	tagImageLength     = 257
	tagBitsPerSample   = 258
	tagCompression     = 259
	tagPhotometric     = 262
	tagSamplesPerPixel = 277
	tagPlanarConfig    = 284
	tagPredictor       = 317
	tagColorMap        = 320
	tagTileWidth       = 322
	tagTileLength      = 323
	tagTileOffsets     = 324
	tagTileByteCounts  = 325
	tagExtraSamples    = 338
	tagSampleFormat    = 339
	tagModelPixelScale = 33550
	tagModelTiepoint   = 33922
	tagGeoKeyDirectory = 34735
	tagGeoDoubleParams = 34736
	tagGeoASCIIParams  = 34737
	tagGDALMetadata    = 42112
	tagGDALNoData      = 42113
)

// TIFF field types.
const (
	typeASCII  = 2
	typeShort  = 3
	typeLong   = 4
	typeDouble = 12
	typeLong8  = 16
)

// TIFF compression codes.
const (
	compressNone    = 1
	compressDeflate = 8
	compressZSTD    = 50000
)

// Compression levels. GDAL's defaults (DEFLATE 6, ZSTD 9) cost several
// times more CPU. klauspost/compress's DEFLATE level 1 makes stacks about
// 6 % larger than GDAL's (class maps, a few hundredths of their raw size,
// up to twice as large) and still finds the long runs of class maps. Its
// default ZSTD level (about zstd's level 3) keeps ZSTD what it is chosen
// for, files smaller than DEFLATE's (stacks about 9 % larger than GDAL's
// level 9, at a third of the CPU); its fastest level would match DEFLATE
// level 1 in size and speed.
const (
	deflateLevel = 1
	zstdLevel    = zstd.SpeedDefault
)

// ghostMetadata is the structural metadata GDAL's COG driver writes after
// the TIFF header. The trailing space leaves room for GDAL to turn NO into
// YES when a file is edited in place.
const ghostMetadata = "LAYOUT=IFDS_BEFORE_DATA\n" +
	"BLOCK_ORDER=ROW_MAJOR\n" +
	"BLOCK_LEADER=SIZE_AS_UINT4\n" +
	"BLOCK_TRAILER=LAST_4_BYTES_REPEATED\n" +
	"KNOWN_INCOMPATIBLE_EDITION=NO\n "

// bigTIFFThreshold is the padded full-resolution size in bytes above which
// GDAL's BIGTIFF=IF_SAFER (the option lulc passes) makes a BigTIFF.
const bigTIFFThreshold = 2e9

// Pixels is the element type of the rasters the encoder writes: Byte,
// UInt16 or Float32.
type Pixels interface{ ~uint8 | ~uint16 | ~float32 }

// Options says how a COG is laid out.
//
// Overviews follow this rule: each level is half the size of the one above
// it, rounded down, and its pixel (x, y) is computed from the 2×2 window at
// (2x, 2y) of the level above, leaving out nodata pixels (a window of
// nodata only gives nodata). NEAREST takes the first pixel of the window in
// the order top-left, top-right, bottom-left, bottom-right; AVERAGE the
// mean rounded half up, (sum + n/2) / n (Float32: the sum in float64, in
// that order, divided by n and rounded once to float32); MODE the most
// frequent value, the smallest one among equally frequent values. Float32
// pixels that are NaN are nodata, and a Float32 raster's nodata, if any,
// is NaN. GDAL's driver makes the same
// files but for the compressed bytes (the encoder's compression levels are
// lower) and the overview pixels.
type Options struct {
	BlockSize          int      // internal tile size, a multiple of 16 up to 4096; 0 is 512
	Compress           string   // DEFLATE (also ""), ZSTD or NONE
	Predictor          bool     // horizontal differencing before compression
	OverviewResampling string   // NEAREST, AVERAGE (also "") or MODE
	OverviewCount      int      // 0: GDAL's default (down to one block)
	Threads            int      // compression threads; 0 uses GOMAXPROCS
	NoData             *float64 // a pixel value, or nil for none
	// Metadata are the dataset's metadata items, written in the
	// GDAL_METADATA tag in the order of their keys.
	Metadata map[string]string
	// Palette is the colour of each pixel value of a single Byte band
	// (at most 256; TIFF stores no alpha, so A is left out), nil for none.
	Palette []color.RGBA
	// EncodeEarly has a Writer compress the tiles of each row of
	// full-resolution tiles as soon as every band of it has been written,
	// and make each overview row (downsampled, then its tiles compressed)
	// as soon as the rows it reduces are there, while later windows are
	// still being made; it holds the compressed tiles in memory until
	// Close, which then writes the file in one pass and takes its checksum
	// (package digest) on the way (Writer.Sum). It assumes windows are
	// written once each (a row written again is compressed again at Close,
	// with every overview). The file's bytes are the same either way.
	// Write ignores it.
	EncodeEarly bool
	// EarlyThreads is how many threads compress while the windows are
	// written (EncodeEarly), fewer than Threads when the windows' own
	// work needs the cores; 0 is Threads. Close compresses what is still
	// queued on Threads.
	EarlyThreads int
}

// Band describes one band of a COG.
type Band struct {
	Description string
	Scale       float64 // 0: none
	Offset      float64
}

// Plan is everything about a COG that does not depend on pixel values.
type Plan struct {
	grid         geo.Grid
	bands        int
	bytesPer     int // 1 (uint8), 2 (uint16) or 4 (float32)
	block        int
	compression  uint16
	predictor    bool
	rule         resampling
	nodata       *float64
	threads      int
	early        bool
	earlyThreads int // compressors while the windows are written
	big          bool
	levels       []levelSize // [0] is full resolution, then overviews
	geo          GeoKeys
	metadata     string   // GDAL_METADATA, "" for none
	colorMap     []uint16 // nil for no palette
}

// levelSize is the size of one level and its tile grid.
type levelSize struct{ width, height, tilesX, tilesY int }

func (l levelSize) tiles() int { return l.tilesX * l.tilesY }

// NewPlan lays out a COG of len(bands) bands of bytesPer-byte pixels (1
// for uint8, 2 for uint16, 4 for float32) on g, its CRS given by keys (g.EPSG is not
// read), with opt. When the encoder cannot write it, it returns an error
// saying why, and the caller has GDAL write it: compressions other than
// DEFLATE, ZSTD and NONE, resamplings other than NEAREST, AVERAGE and
// MODE, rotated or south-up grids, block sizes GDAL refuses, three or four
// Byte bands (GDAL makes them RGB), several uncompressed bands (GDAL
// interleaves them by band), palettes on anything but one Byte band,
// nodata that is not a pixel value (for Float32, other than NaN), the
// predictor on Float32 (GDAL's is another for floats), and metadata GDAL
// stores elsewhere than in plain items.
func NewPlan(g geo.Grid, keys GeoKeys, bytesPer int, bands []Band, opt Options) (*Plan, error) {
	if why := refuse(g, keys, bytesPer, bands, opt); why != "" {
		return nil, fmt.Errorf("cog: cannot encode: %s", why)
	}
	p := &Plan{grid: g, bands: len(bands), bytesPer: bytesPer, block: opt.BlockSize, predictor: opt.Predictor, nodata: opt.NoData,
		threads: opt.Threads, early: opt.EncodeEarly, geo: keys}
	if p.threads <= 0 {
		p.threads = runtime.GOMAXPROCS(0)
	}
	p.earlyThreads = opt.EarlyThreads
	if p.earlyThreads <= 0 {
		p.earlyThreads = p.threads
	}
	switch strings.ToUpper(opt.Compress) {
	case "", "DEFLATE":
		p.compression = compressDeflate
	case "ZSTD":
		p.compression = compressZSTD
	case "NONE":
		p.compression = compressNone
		p.predictor = false // GDAL ignores it without compression
	}
	p.rule, _ = parseResampling(opt.OverviewResampling)
	if p.block == 0 {
		p.block = 512
	}
	p.metadata = gdalMetadataXML(slices.Sorted(maps.Keys(opt.Metadata)), opt.Metadata, bands)
	if opt.Palette != nil {
		p.colorMap = tiffColorMap(opt.Palette)
	}
	sizes := append([][2]int{{g.Width, g.Height}}, overviewSizes(g.Width, g.Height, p.block, opt.OverviewCount)...)
	for _, s := range sizes {
		p.levels = append(p.levels, levelSize{s[0], s[1], (s[0] + p.block - 1) / p.block, (s[1] + p.block - 1) / p.block})
	}
	l0 := p.levels[0]
	p.big = float64(l0.tilesX*p.block)*float64(l0.tilesY*p.block)*float64(p.bands*p.bytesPer) > bigTIFFThreshold
	return p, nil
}

// refuse says why NewPlan cannot plan a COG, or "" when it can.
func refuse(g geo.Grid, keys GeoKeys, bytesPer int, bands []Band, opt Options) string {
	switch strings.ToUpper(opt.Compress) {
	case "", "DEFLATE", "ZSTD", "NONE":
	default:
		return "compression " + opt.Compress
	}
	if _, ok := parseResampling(opt.OverviewResampling); !ok {
		return "overview resampling " + opt.OverviewResampling
	}
	block := opt.BlockSize
	if block == 0 {
		block = 512
	}
	uncompressed := strings.ToUpper(opt.Compress) == "NONE"
	switch {
	case bytesPer != 1 && bytesPer != 2 && bytesPer != 4:
		return fmt.Sprintf("%d-byte pixels", bytesPer)
	case bytesPer == 4 && opt.Predictor && !uncompressed:
		return "predictor on float pixels"
	case block%16 != 0 || block < 16 || block > 4096:
		return fmt.Sprintf("block size %d", block)
	case g.Width <= 0 || g.Height <= 0 || len(bands) == 0 || len(bands) > 65535:
		return "empty raster"
	case !(g.Transform[1] > 0) || !(g.Transform[5] < 0) || g.Transform[2] != 0 || g.Transform[4] != 0:
		return "not a north-up grid"
	case bytesPer == 1 && (len(bands) == 3 || len(bands) == 4):
		return "three or four byte bands"
	case uncompressed && len(bands) > 1:
		return "uncompressed bands (GDAL interleaves them by band)"
	case opt.Palette != nil && (bytesPer != 1 || len(bands) != 1):
		return "palette on other than one byte band"
	case len(opt.Palette) > 256:
		return fmt.Sprintf("palette of %d colours", len(opt.Palette))
	case opt.OverviewCount < 0:
		return "negative overview count"
	case len(keys.Directory) < 4:
		return "no geokey directory"
	}
	for _, v := range g.Transform {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return "not a finite geotransform"
		}
	}
	if nd := opt.NoData; bytesPer == 4 && nd != nil && !math.IsNaN(*nd) {
		return "float nodata other than NaN"
	} else if bytesPer != 4 && nd != nil && (*nd != math.Trunc(*nd) || *nd < 0 || *nd >= float64(int(1)<<(8*bytesPer))) {
		return "nodata is not a pixel value"
	}
	for k, v := range opt.Metadata {
		if !plainMetadataKey(k) || !plainMetadataValue(v) {
			return "metadata item " + k
		}
	}
	for _, b := range bands {
		if !plainMetadataValue(b.Description) || math.IsNaN(b.Scale) || math.IsInf(b.Scale, 0) || math.IsNaN(b.Offset) || math.IsInf(b.Offset, 0) {
			return "band description, scale or offset"
		}
	}
	return ""
}

// tiffEntry is one IFD entry with its values in little-endian bytes.
// Tile offsets and byte counts go with the other IFDs' arrays after the
// last IFD; other values longer than the inline field follow their IFD.
type tiffEntry struct {
	tag, typ uint16
	count    int
	val      []byte
	array    bool
}

func shortEntry(tag uint16, v ...uint16) tiffEntry {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return tiffEntry{tag: tag, typ: typeShort, count: len(v), val: b}
}

func longEntry(tag uint16, v uint32) tiffEntry {
	return tiffEntry{tag: tag, typ: typeLong, count: 1, val: binary.LittleEndian.AppendUint32(nil, v)}
}

// sizeEntry is ImageWidth or ImageLength: SHORT when it fits, as libtiff.
func sizeEntry(tag uint16, v int) tiffEntry {
	if v < 1<<16 {
		return shortEntry(tag, uint16(v))
	}
	return longEntry(tag, uint32(v))
}

func doubleEntry(tag uint16, v ...float64) tiffEntry {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return tiffEntry{tag: tag, typ: typeDouble, count: len(v), val: b}
}

func asciiEntry(tag uint16, s string) tiffEntry {
	if !strings.HasSuffix(s, "\x00") {
		s += "\x00"
	}
	return tiffEntry{tag: tag, typ: typeASCII, count: len(s), val: []byte(s)}
}

// ifd returns the entries of level's IFD, in tag order, with the given tile
// offsets and byte counts.
func (p *Plan) ifd(level int, offsets, counts []uint64) []tiffEntry {
	lv := p.levels[level]
	var e []tiffEntry
	if level > 0 {
		e = append(e, longEntry(tagNewSubfileType, 1)) // reduced resolution
	}
	bits := make([]uint16, p.bands)
	formats := make([]uint16, p.bands)
	format := uint16(1) // unsigned integers
	if p.bytesPer == 4 {
		format = 3 // IEEE floating point
	}
	for i := range bits {
		bits[i], formats[i] = uint16(8*p.bytesPer), format
	}
	photometric := uint16(1) // min-is-black
	if p.colorMap != nil {
		photometric = 3 // palette
	}
	e = append(e,
		sizeEntry(tagImageWidth, lv.width),
		sizeEntry(tagImageLength, lv.height),
		shortEntry(tagBitsPerSample, bits...),
		shortEntry(tagCompression, p.compression),
		shortEntry(tagPhotometric, photometric),
		shortEntry(tagSamplesPerPixel, uint16(p.bands)),
		shortEntry(tagPlanarConfig, 1),
	)
	if p.compression != compressNone {
		pred := uint16(1)
		if p.predictor {
			pred = 2
		}
		e = append(e, shortEntry(tagPredictor, pred))
	}
	if p.colorMap != nil {
		e = append(e, shortEntry(tagColorMap, p.colorMap...))
	}
	e = append(e, shortEntry(tagTileWidth, uint16(p.block)), shortEntry(tagTileLength, uint16(p.block)))
	offs := tiffEntry{tag: tagTileOffsets, typ: typeLong, count: len(offsets), array: true}
	cnts := tiffEntry{tag: tagTileByteCounts, typ: typeLong, count: len(counts), array: true}
	if p.big {
		offs.typ = typeLong8
		for _, o := range offsets {
			offs.val = binary.LittleEndian.AppendUint64(offs.val, o)
		}
	} else {
		for _, o := range offsets {
			offs.val = binary.LittleEndian.AppendUint32(offs.val, uint32(o))
		}
	}
	for _, c := range counts {
		cnts.val = binary.LittleEndian.AppendUint32(cnts.val, uint32(c))
	}
	e = append(e, offs, cnts)
	if p.bands > 1 {
		e = append(e, shortEntry(tagExtraSamples, make([]uint16, p.bands-1)...)) // unspecified
	}
	e = append(e, shortEntry(tagSampleFormat, formats...))
	if level == 0 {
		t := p.grid.Transform
		e = append(e,
			doubleEntry(tagModelPixelScale, t[1], -t[5], 0),
			doubleEntry(tagModelTiepoint, 0, 0, 0, t[0], t[3], 0),
			shortEntry(tagGeoKeyDirectory, p.geo.Directory...),
		)
		if len(p.geo.Doubles) > 0 {
			e = append(e, doubleEntry(tagGeoDoubleParams, p.geo.Doubles...))
		}
		if p.geo.ASCII != "" {
			e = append(e, asciiEntry(tagGeoASCIIParams, p.geo.ASCII))
		}
		if p.metadata != "" {
			e = append(e, asciiEntry(tagGDALMetadata, p.metadata))
		}
	}
	if p.nodata != nil {
		e = append(e, asciiEntry(tagGDALNoData, gdalNoData(*p.nodata)))
	}
	return e
}

// header lays out and encodes everything before the tile data: the TIFF
// header, the ghost metadata, the IFDs and their values, and the tile
// arrays. Its length does not depend on the offsets and counts, so it can
// be planned with zeros and written last.
func (p *Plan) header(offsets, counts [][]uint64) []byte {
	le := binary.LittleEndian
	entrySize, countSize, inline := 12, 2, 4
	headSize := 8
	if p.big {
		entrySize, countSize, inline, headSize = 20, 8, 8, 16
	}
	ifds := make([][]tiffEntry, len(p.levels))
	for i := range ifds {
		ifds[i] = p.ifd(i, offsets[i], counts[i])
	}
	even := func(n int) int { return n + n&1 }

	// Lay out: IFD and its values in turn, then all the tile arrays.
	ghost := fmt.Sprintf("GDAL_STRUCTURAL_METADATA_SIZE=%06d bytes\n", len(ghostMetadata)) + ghostMetadata
	pos := even(headSize + len(ghost))
	ifdAt := make([]int, len(ifds))
	valAt := make([][]int, len(ifds))
	for i, entries := range ifds {
		ifdAt[i] = pos
		pos += countSize + entrySize*len(entries) + inline
		valAt[i] = make([]int, len(entries))
		for j, e := range entries {
			if len(e.val) > inline && !e.array {
				valAt[i][j] = pos
				pos = even(pos + len(e.val))
			}
		}
	}
	for i, entries := range ifds {
		for j, e := range entries {
			if len(e.val) > inline && e.array {
				valAt[i][j] = pos
				pos = even(pos + len(e.val))
			}
		}
	}

	b := make([]byte, pos)
	copy(b, "II")
	if p.big {
		le.PutUint16(b[2:], 43)
		le.PutUint16(b[4:], 8)
		le.PutUint64(b[8:], uint64(ifdAt[0]))
	} else {
		le.PutUint16(b[2:], 42)
		le.PutUint32(b[4:], uint32(ifdAt[0]))
	}
	copy(b[headSize:], ghost)
	for i, entries := range ifds {
		q := ifdAt[i]
		if p.big {
			le.PutUint64(b[q:], uint64(len(entries)))
		} else {
			le.PutUint16(b[q:], uint16(len(entries)))
		}
		q += countSize
		for j, e := range entries {
			le.PutUint16(b[q:], e.tag)
			le.PutUint16(b[q+2:], e.typ)
			field := b[q+8 : q+12]
			if p.big {
				le.PutUint64(b[q+4:], uint64(e.count))
				field = b[q+12 : q+20]
			} else {
				le.PutUint32(b[q+4:], uint32(e.count))
			}
			if len(e.val) > inline {
				copy(b[valAt[i][j]:], e.val)
				if p.big {
					le.PutUint64(field, uint64(valAt[i][j]))
				} else {
					le.PutUint32(field, uint32(valAt[i][j]))
				}
			} else {
				copy(field, e.val)
			}
			q += entrySize
		}
		next := 0
		if i+1 < len(ifds) {
			next = ifdAt[i+1]
		}
		if p.big {
			le.PutUint64(b[q:], uint64(next))
		} else {
			le.PutUint32(b[q:], uint32(next))
		}
	}
	return b
}

// tileJob is one tile of one level.
type tileJob struct{ level, tx, ty int }

// order lists the tiles in file order: smallest overview first, full
// resolution last, each level row by row.
func (p *Plan) order() []tileJob {
	var jobs []tileJob
	for l := len(p.levels) - 1; l >= 0; l-- {
		lv := p.levels[l]
		for ty := range lv.tilesY {
			for tx := range lv.tilesX {
				jobs = append(jobs, tileJob{l, tx, ty})
			}
		}
	}
	return jobs
}

// Write writes the COG p plans at path from its bands' pixels, each a
// row-major plane of the grid's size, computing the overviews in memory.
// It writes to a hidden temporary file beside path and renames it when
// complete, so path either does not exist or holds a whole file.
func Write[T Pixels](path string, p *Plan, bands ...[]T) error {
	var zero T
	if int(unsafe.Sizeof(zero)) != p.bytesPer {
		return fmt.Errorf("write %s: %T pixels for a plan of %d-byte pixels", path, zero, p.bytesPer)
	}
	if len(bands) != p.bands {
		return fmt.Errorf("write %s: %d bands for a plan of %d", path, len(bands), p.bands)
	}
	l0 := p.levels[0]
	for _, b := range bands {
		if len(b) != l0.width*l0.height {
			return fmt.Errorf("write %s: %d pixels for a %d×%d grid", path, len(b), l0.width, l0.height)
		}
	}
	levels := make([][][]T, len(p.levels))
	levels[0] = bands
	for l := 1; l < len(levels); l++ {
		levels[l] = make([][]T, p.bands)
		for b := range levels[l] {
			levels[l][b] = make([]T, p.levels[l].width*p.levels[l].height)
		}
	}
	return encode(path, p, levels)
}

// encode writes the planned COG at path from levels (level → band →
// plane, row-major). levels[0] holds the pixels; the overview levels are
// computed into levels[1:], which must have their planes allocated. The
// file goes to a hidden temporary name beside path, renamed when complete.
func encode[T Pixels](path string, p *Plan, levels [][][]T) error {
	var nodata *T
	if p.nodata != nil {
		nd := T(*p.nodata)
		nodata = &nd
	}
	for l := 1; l < len(p.levels); l++ {
		up, lv := p.levels[l-1], p.levels[l]
		for b := range p.bands {
			downsample(level[T]{levels[l][b], lv.width, lv.height}, level[T]{levels[l-1][b], up.width, up.height}, p.rule, nodata, p.threads)
		}
	}

	tmp := atomicfs.TempName(path)
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	offsets, counts, err := writeTiles(f, p, levels)
	if err == nil {
		_, err = f.WriteAt(p.header(offsets, counts), 0)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// tileResult is a compressed tile or why it could not be made.
type tileResult struct {
	data []byte
	err  error
}

// writeTiles compresses the tiles on p.threads goroutines and writes them
// in file order after the header's space, each with its leader and
// trailer. At most a few tiles per goroutine are held at once, whatever the
// raster's size. It returns every level's tile offsets and byte counts.
func writeTiles[T Pixels](f *os.File, p *Plan, levels [][][]T) (offsets, counts [][]uint64, err error) {
	offsets = make([][]uint64, len(p.levels))
	counts = make([][]uint64, len(p.levels))
	for l, lv := range p.levels {
		offsets[l] = make([]uint64, lv.tiles())
		counts[l] = make([]uint64, lv.tiles())
	}
	pos := int64(len(p.header(offsets, counts)))
	if _, err := f.Seek(pos, 0); err != nil {
		return nil, nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)

	jobs := p.order()
	window := 4 * p.threads
	results := make([]chan tileResult, len(jobs))
	for i := range results {
		results[i] = make(chan tileResult, 1)
	}
	slots := make(chan struct{}, window)
	next := make(chan int)
	done := make(chan struct{})
	free := make(chan []byte, window+p.threads)
	go func() {
		defer close(next)
		for i := range jobs {
			select {
			case slots <- struct{}{}:
			case <-done:
				return
			}
			select {
			case next <- i:
			case <-done:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range p.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc, err := newTileEncoder[T](p)
			if err == nil {
				defer enc.close()
			}
			for i := range next {
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				if err != nil {
					results[i] <- tileResult{err: err}
					continue
				}
				data, cerr := enc.encode(levels, jobs[i], buf)
				results[i] <- tileResult{data, cerr}
			}
		}()
	}
	defer wg.Wait()
	defer close(done)

	var lead [4]byte
	for i, job := range jobs {
		r := <-results[i]
		if r.err != nil {
			return nil, nil, fmt.Errorf("compress tile %d,%d of level %d: %w", job.tx, job.ty, job.level, r.err)
		}
		n := len(r.data)
		if uint64(n) > math.MaxUint32 {
			return nil, nil, fmt.Errorf("tile %d,%d of level %d is %d bytes", job.tx, job.ty, job.level, n)
		}
		binary.LittleEndian.PutUint32(lead[:], uint32(n))
		bw.Write(lead[:])
		k := job.ty*p.levels[job.level].tilesX + job.tx
		offsets[job.level][k], counts[job.level][k] = uint64(pos+4), uint64(n)
		bw.Write(r.data)
		var trail [4]byte
		copy(trail[4-min(4, n):], r.data[n-min(4, n):])
		if _, err := bw.Write(trail[:]); err != nil {
			return nil, nil, err
		}
		pos += int64(n) + 8
		if !p.big && pos > math.MaxUint32 {
			return nil, nil, errors.New("file too large for a classic tiff")
		}
		<-slots
		select {
		case free <- r.data:
		default:
		}
	}
	return offsets, counts, bw.Flush()
}

// tileEncoder turns tiles into compressed bytes; one per goroutine.
type tileEncoder[T Pixels] struct {
	p       *Plan
	samples []T
	raw     []byte // samples as little-endian bytes on big-endian hosts
	zw      *zlib.Writer
	zs      *zstd.Encoder
}

func newTileEncoder[T Pixels](p *Plan) (*tileEncoder[T], error) {
	e := &tileEncoder[T]{p: p, samples: make([]T, p.block*p.block*p.bands)}
	var err error
	switch p.compression {
	case compressDeflate:
		e.zw, err = zlib.NewWriterLevel(nil, deflateLevel)
	case compressZSTD:
		e.zs, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstdLevel), zstd.WithEncoderCRC(false))
	}
	return e, err
}

func (e *tileEncoder[T]) close() {
	if e.zs != nil {
		e.zs.Close()
	}
}

var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// encode builds tile job from levels, pixel-interleaved and zero-padded,
// applies the predictor and compresses it, appending to dst[:0].
func (e *tileEncoder[T]) encode(levels [][][]T, job tileJob, dst []byte) ([]byte, error) {
	p, bs, nb := e.p, e.p.block, e.p.bands
	lv := p.levels[job.level]
	x0, y0 := job.tx*bs, job.ty*bs
	cols, rows := min(bs, lv.width-x0), min(bs, lv.height-y0)
	s := e.samples
	if cols < bs || rows < bs {
		clear(s)
	}
	for r := range rows {
		out := s[r*bs*nb:]
		for b := range nb {
			src := levels[job.level][b][(y0+r)*lv.width+x0:][:cols]
			if nb == 1 {
				copy(out, src)
				continue
			}
			for c, v := range src {
				out[c*nb+b] = v
			}
		}
	}
	if p.predictor {
		// Horizontal differencing over whole rows, padding included, as a
		// TIFF reader undoes it.
		for r := range rows {
			row := s[r*bs*nb : (r+1)*bs*nb]
			for i := len(row) - 1; i >= nb; i-- {
				row[i] -= row[i-nb]
			}
		}
	}
	var raw []byte
	if littleEndianHost || p.bytesPer == 1 {
		raw = unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*p.bytesPer)
	} else {
		if e.raw == nil {
			e.raw = make([]byte, len(s)*p.bytesPer)
		}
		for i, v := range s {
			if p.bytesPer == 4 {
				binary.LittleEndian.PutUint32(e.raw[4*i:], math.Float32bits(float32(v)))
			} else {
				binary.LittleEndian.PutUint16(e.raw[2*i:], uint16(v))
			}
		}
		raw = e.raw
	}
	switch p.compression {
	case compressDeflate:
		buf := bytes.NewBuffer(dst[:0])
		e.zw.Reset(buf)
		if _, err := e.zw.Write(raw); err != nil {
			return nil, err
		}
		if err := e.zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case compressZSTD:
		return e.zs.EncodeAll(raw, dst[:0]), nil
	}
	return append(dst[:0], raw...), nil
}
