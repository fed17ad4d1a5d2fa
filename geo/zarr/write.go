package zarr

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
)

// Options lay a store's grid arrays out: Chunk is the side of an inner
// chunk (the unit a reader decompresses; default 1024), Shard the side of
// a shard (the unit a file holds; default 4096, a multiple of Chunk).
// Chunks are compressed with klauspost's Zstandard encoder at its fastest
// speed, about zstd's level 1, the level the metadata records: on
// reflectance planes it compresses 2.2 times as fast as its default (level
// 3) for 13 % more bytes (measured on the demo's stack, one core), which
// keeps a full tile's store off lulc run's critical path.
type Options struct {
	Chunk, Shard int
	// Background, when above 0, is how many goroutines compress the
	// chunks the windows complete, so that Write only copies pixels (a
	// caller whose windows are its critical path: lulc run's composite);
	// at 0 Write compresses them itself (ingest's workers, in parallel).
	// Queue is how many complete chunks may wait for them (default 4 a
	// compressor): a Write that finds the queue full waits, so that Queue
	// bounds the raw pixels held.
	Background, Queue int
}

// Default chunking: 1024² inner chunks (2 MiB of UInt16 before
// compression: what a reader fetches and decompresses for a small window)
// in 4096² shards (16 chunks a file: a full 10980² tile's plane is 9
// files instead of 121 objects).
const (
	DefaultChunk = 1024
	DefaultShard = 4096
	zstdLevel    = 1
)

// File is a file the writer wrote: its path inside the store, its BLAKE3
// checksum (hex) and size, taken as it was written.
type File struct {
	Path   string
	BLAKE3 string
	Size   int64
}

// Writer writes a store. Create it, add its arrays (Grid, Whole), write
// the grid arrays' windows, then Close: the store is written into a
// staging directory beside its final path and renamed there once every
// array is complete, so that a store never exists half-written.
type Writer struct {
	final, dir string
	width      int
	height     int
	chunk      int
	shard      int
	enc        *zstd.Encoder
	attrs      map[string]any

	mu     sync.Mutex
	arrays map[string]*array
	order  []string
	files  []File
	err    error

	// queue takes complete chunks to the background compressors, if any.
	queue   chan chunkJob
	workers sync.WaitGroup
	stop    sync.Once
}

// chunkJob is a complete chunk for a background compressor.
type chunkJob struct {
	a *array
	d chunkDone
}

// array is one array being written.
type array struct {
	name string
	meta ArrayMeta
	grid bool // a grid array, written window by window
	elem int

	mu     sync.Mutex
	chunks map[[2]int]*pending  // inner chunks not yet complete, by (row, col)
	shards map[[2]int]*shardBuf // shards not yet written
	done   int                  // shards written
}

// pending is an inner chunk's raw bytes as windows fill it.
type pending struct {
	raw    []byte
	filled int
}

// shardBuf collects a shard's compressed chunks.
type shardBuf struct {
	chunks map[int][]byte // by index within the shard
	want   int            // chunks inside the array
}

// Create starts a store at path for grid arrays of width × height
// pixels, with the group's attributes. path must not exist.
func Create(path string, width, height int, attrs map[string]any, opt Options) (*Writer, error) {
	if width <= 0 || height <= 0 {
		return nil, fmt.Errorf("zarr %s: grid %d×%d", path, width, height)
	}
	chunk, shard := opt.Chunk, opt.Shard
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	if shard <= 0 {
		shard = DefaultShard
	}
	if shard%chunk != 0 {
		return nil, fmt.Errorf("zarr %s: shard side %d is not a multiple of the chunk side %d", path, shard, chunk)
	}
	// A grid smaller than a chunk gets one chunk its size, and shards no
	// larger than the grid's chunks need.
	side := max(width, height)
	chunk = min(chunk, side)
	shard = min(shard, (side+chunk-1)/chunk*chunk)
	shard -= shard % chunk
	if atomicfs.Exists(path) {
		return nil, fmt.Errorf("zarr %s: already exists", path)
	}
	dir := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("zarr %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("zarr %s: %w", path, err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, fmt.Errorf("zarr %s: %w", path, err)
	}
	w := &Writer{final: path, dir: dir, width: width, height: height, chunk: chunk, shard: shard, enc: enc,
		attrs: attrs, arrays: map[string]*array{}}
	if opt.Background > 0 {
		w.queue = make(chan chunkJob, max(opt.Queue, 4*opt.Background))
		for range opt.Background {
			w.workers.Go(func() {
				for j := range w.queue {
					if err := w.finishChunk(j.a, j.d); err != nil {
						w.fail(err)
					}
				}
			})
		}
	}
	return w, nil
}

// drain stops the background compressors once they have done every
// chunk queued.
func (w *Writer) drain() {
	w.stop.Do(func() {
		if w.queue != nil {
			close(w.queue)
			w.workers.Wait()
		}
	})
}

// checkName refuses names that are not a single portable Zarr node name.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, "__") || name == "zarr.json" {
		return fmt.Errorf("array name %q is not allowed", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("array name %q: only letters, digits, _, - and . are portable", name)
		}
	}
	return nil
}

func (w *Writer) add(a *array) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := checkName(a.name); err != nil {
		return fmt.Errorf("zarr %s: %w", w.final, err)
	}
	if _, ok := w.arrays[a.name]; ok {
		return fmt.Errorf("zarr %s: array %s added twice", w.final, a.name)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, a.name), 0o755); err != nil {
		return fmt.Errorf("zarr %s: %w", w.final, err)
	}
	w.arrays[a.name] = a
	w.order = append(w.order, a.name)
	return nil
}

// Grid adds a grid array (dimensions y, x), sharded and compressed, to be
// written window by window.
func (w *Writer) Grid(name, dtype string, fill float64, attrs map[string]any) error {
	if dtype != Uint8 && dtype != Uint16 {
		return fmt.Errorf("zarr %s: grid array %s: data type %s (uint8 or uint16)", w.final, name, dtype)
	}
	sh := shardingConfig{ChunkShape: []int{w.chunk, w.chunk}, Codecs: []codec{bytesCodec(), zstdCodec(zstdLevel)},
		IndexCodecs: []codec{bytesCodec(), {Name: "crc32c"}}, IndexLocation: "end"}
	conf, _ := json.Marshal(sh)
	meta := newMeta(dtype, []int{w.height, w.width}, []int{w.shard, w.shard}, fill,
		[]codec{{Name: "sharding_indexed", Configuration: conf}}, []string{"y", "x"}, attrs)
	return w.add(&array{name: name, meta: meta, grid: true, elem: size(dtype), chunks: map[[2]int]*pending{}, shards: map[[2]int]*shardBuf{}})
}

// Whole writes a small array at once, one compressed chunk: values is a
// []float64 or []int32 of shape's size; a scalar (no shape) holds no chunk
// and reads as its fill value.
func (w *Writer) Whole(name string, shape []int, dims []string, values any, fill float64, attrs map[string]any) error {
	var dtype string
	var raw []byte
	switch v := values.(type) {
	case []float64:
		dtype, raw = Float64, make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(x))
		}
	case []int32:
		dtype, raw = Int32, make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
		}
	default:
		return fmt.Errorf("zarr %s: array %s: values of type %T", w.final, name, values)
	}
	n := 1
	for _, s := range shape {
		n *= s
	}
	if shape == nil {
		shape = []int{}
	}
	if len(shape) > 0 && len(raw) != n*size(dtype) {
		return fmt.Errorf("zarr %s: array %s: %d values for shape %v", w.final, name, len(raw)/size(dtype), shape)
	}
	meta := newMeta(dtype, shape, slices.Clone(shape), fill, []codec{bytesCodec(), zstdCodec(zstdLevel)}, dims, attrs)
	a := &array{name: name, meta: meta, elem: size(dtype)}
	if err := w.add(a); err != nil {
		return err
	}
	if len(shape) == 0 {
		return nil
	}
	key := "c" + strings.Repeat("/0", len(shape))
	return w.writeFile(filepath.Join(name, filepath.FromSlash(key)), w.enc.EncodeAll(raw, nil))
}

// writeFile writes a file of the store, hashing it.
func (w *Writer) writeFile(rel string, body []byte) error {
	p := filepath.Join(w.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		return fmt.Errorf("zarr %s: %w", w.final, err)
	}
	w.mu.Lock()
	w.files = append(w.files, File{Path: filepath.ToSlash(rel), BLAKE3: digest.Bytes(body), Size: int64(len(body))})
	w.mu.Unlock()
	return nil
}

// Write stores a window of a grid array: buf is its w × h pixels
// ([]uint8 or []uint16, the array's type), at (x, y). Windows must not
// overlap; they may come from several goroutines.
func (w *Writer) Write(name string, x, y, width, height int, buf any) error {
	w.mu.Lock()
	a := w.arrays[name]
	failed := w.err
	w.mu.Unlock()
	if failed != nil {
		return failed
	}
	if a == nil || !a.grid {
		return fmt.Errorf("zarr %s: no grid array %s", w.final, name)
	}
	if x < 0 || y < 0 || width <= 0 || height <= 0 || x+width > w.width || y+height > w.height {
		return fmt.Errorf("zarr %s: array %s: window %d×%d at (%d, %d) outside %d×%d", w.final, name, width, height, x, y, w.width, w.height)
	}
	var src []byte
	switch b := buf.(type) {
	case []uint8:
		if a.elem != 1 {
			return fmt.Errorf("zarr %s: array %s is %s, given uint8", w.final, name, a.meta.DataType)
		}
		src = b
	case []uint16:
		if a.elem != 2 {
			return fmt.Errorf("zarr %s: array %s is %s, given uint16", w.final, name, a.meta.DataType)
		}
		src = make([]byte, 2*len(b))
		for i, v := range b {
			binary.LittleEndian.PutUint16(src[2*i:], v)
		}
	default:
		return fmt.Errorf("zarr %s: array %s: window of type %T", w.final, name, buf)
	}
	if len(src) != width*height*a.elem {
		return fmt.Errorf("zarr %s: array %s: %d bytes for a %d×%d window", w.final, name, len(src), width, height)
	}
	c := w.chunk
	var complete []chunkDone
	a.mu.Lock()
	for cy := y / c; cy*c < y+height; cy++ {
		for cx := x / c; cx*c < x+width; cx++ {
			p := a.chunks[[2]int{cy, cx}]
			if p == nil {
				p = &pending{raw: make([]byte, c*c*a.elem)}
				a.chunks[[2]int{cy, cx}] = p
			}
			x0, x1 := max(x, cx*c), min(x+width, cx*c+c)
			y0, y1 := max(y, cy*c), min(y+height, cy*c+c)
			rowBytes := (x1 - x0) * a.elem
			for yy := y0; yy < y1; yy++ {
				from := ((yy-y)*width + (x0 - x)) * a.elem
				to := ((yy-cy*c)*c + (x0 - cx*c)) * a.elem
				copy(p.raw[to:to+rowBytes], src[from:from+rowBytes])
			}
			p.filled += (x1 - x0) * (y1 - y0)
			// Pixels beyond the grid's edge are never written: a chunk is
			// complete when its part inside the grid is.
			inside := (min(w.width, cx*c+c) - cx*c) * (min(w.height, cy*c+c) - cy*c)
			if p.filled > inside {
				a.mu.Unlock()
				return fmt.Errorf("zarr %s: array %s: windows overlap in chunk (%d, %d)", w.final, name, cy, cx)
			}
			if p.filled == inside {
				delete(a.chunks, [2]int{cy, cx})
				complete = append(complete, chunkDone{cy, cx, p.raw})
			}
		}
	}
	a.mu.Unlock()
	for _, d := range complete {
		if w.queue != nil {
			w.queue <- chunkJob{a, d}
			continue
		}
		if err := w.finishChunk(a, d); err != nil {
			w.fail(err)
			return err
		}
	}
	return nil
}

type chunkDone struct {
	cy, cx int
	raw    []byte
}

func (w *Writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// finishChunk compresses a complete chunk and, when it completes its
// shard, writes the shard.
func (w *Writer) finishChunk(a *array, d chunkDone) error {
	comp := w.enc.EncodeAll(d.raw, make([]byte, 0, len(d.raw)/4))
	per := w.shard / w.chunk
	key := [2]int{d.cy / per, d.cx / per}
	a.mu.Lock()
	s := a.shards[key]
	if s == nil {
		s = &shardBuf{chunks: map[int][]byte{}, want: w.chunksInside(key)}
		a.shards[key] = s
	}
	s.chunks[(d.cy%per)*per+d.cx%per] = comp
	full := len(s.chunks) == s.want
	if full {
		delete(a.shards, key)
	}
	a.mu.Unlock()
	if !full {
		return nil
	}
	if err := w.writeFile(filepath.Join(a.name, "c", fmt.Sprint(key[0]), fmt.Sprint(key[1])), w.encodeShard(s)); err != nil {
		return err
	}
	a.mu.Lock()
	a.done++
	a.mu.Unlock()
	return nil
}

// chunksInside counts a shard's chunks that hold pixels of the grid.
func (w *Writer) chunksInside(key [2]int) int {
	per, c := w.shard/w.chunk, w.chunk
	rows := min(per, (w.height-key[0]*w.shard+c-1)/c)
	cols := min(per, (w.width-key[1]*w.shard+c-1)/c)
	return rows * cols
}

// encodeShard lays a shard out: its chunks in index order, then the index
// (offset and size of each chunk, little-endian uint64, all ones for a
// chunk outside the grid) and the index's CRC-32C.
func (w *Writer) encodeShard(s *shardBuf) []byte {
	per := w.shard / w.chunk
	n := per * per
	total := 16*n + 4
	for _, b := range s.chunks {
		total += len(b)
	}
	out := make([]byte, 0, total)
	index := make([]byte, 16*n)
	for i := range n {
		b, ok := s.chunks[i]
		if !ok {
			binary.LittleEndian.PutUint64(index[16*i:], emptyChunk)
			binary.LittleEndian.PutUint64(index[16*i+8:], emptyChunk)
			continue
		}
		binary.LittleEndian.PutUint64(index[16*i:], uint64(len(out)))
		binary.LittleEndian.PutUint64(index[16*i+8:], uint64(len(b)))
		out = append(out, b...)
	}
	out = append(out, index...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(index, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SetAttributes replaces an array's attributes before Close (those known
// only once its pixels are, such as a layer's map).
func (w *Writer) SetAttributes(name string, attrs map[string]any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.arrays[name]
	if a == nil {
		return fmt.Errorf("zarr %s: no array %s", w.final, name)
	}
	a.meta.Attributes = attrs
	return nil
}

// Close checks that every grid array is complete, writes the arrays' and
// the group's metadata and renames the store into place. It returns the
// store's files (paths inside it, sorted) with their checksums. On error
// the staged store is removed.
func (w *Writer) Close() ([]File, error) {
	w.drain()
	defer w.enc.Close()
	files, err := w.close()
	if err != nil {
		os.RemoveAll(w.dir)
		return nil, err
	}
	return files, nil
}

func (w *Writer) close() ([]File, error) {
	if w.err != nil {
		return nil, w.err
	}
	per := w.shard / w.chunk
	want := ((w.height + w.shard - 1) / w.shard) * ((w.width + w.shard - 1) / w.shard)
	var errs []error
	metas := map[string]ArrayMeta{}
	for _, name := range w.order {
		a := w.arrays[name]
		if a.grid && a.done != want {
			errs = append(errs, fmt.Errorf("array %s incomplete: %d of %d shards written (%d chunks of %d a shard pending)", name, a.done, want, len(a.chunks), per*per))
			continue
		}
		body, err := json.MarshalIndent(a.meta, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := w.writeFile(filepath.Join(name, "zarr.json"), append(body, '\n')); err != nil {
			return nil, err
		}
		metas[name] = a.meta
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("zarr %s: %w", w.final, err)
	}
	group := GroupMeta{ZarrFormat: 3, NodeType: "group", Attributes: w.attrs,
		Consolidated: &consolidated{Kind: "inline", Metadata: metas}}
	body, err := json.MarshalIndent(group, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := w.writeFile("zarr.json", append(body, '\n')); err != nil {
		return nil, err
	}
	if err := os.Rename(w.dir, w.final); err != nil {
		return nil, fmt.Errorf("zarr %s: %w", w.final, err)
	}
	files := slices.Clone(w.files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// Abort removes the staged store.
func (w *Writer) Abort() {
	w.drain()
	w.enc.Close()
	os.RemoveAll(w.dir)
}
