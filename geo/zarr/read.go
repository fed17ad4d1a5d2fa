package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Store is a store opened for reading: its group's metadata and its
// arrays'.
type Store struct {
	Path   string
	Group  GroupMeta
	Arrays map[string]ArrayMeta
	dec    *zstd.Decoder
}

// Open reads a store's group metadata and that of each array it holds
// (from the arrays' own zarr.json files, which the consolidated copy must
// match).
func Open(path string) (*Store, error) {
	body, err := os.ReadFile(filepath.Join(path, "zarr.json"))
	if err != nil {
		return nil, fmt.Errorf("zarr store %s: %w", path, err)
	}
	s := &Store{Path: path, Arrays: map[string]ArrayMeta{}}
	if err := json.Unmarshal(body, &s.Group); err != nil {
		return nil, fmt.Errorf("zarr store %s: zarr.json: %w", path, err)
	}
	if s.Group.ZarrFormat != 3 || s.Group.NodeType != "group" {
		return nil, fmt.Errorf("zarr store %s: not a Zarr v3 group (zarr_format %d, node_type %q)", path, s.Group.ZarrFormat, s.Group.NodeType)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("zarr store %s: %w", path, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		body, err := os.ReadFile(filepath.Join(path, e.Name(), "zarr.json"))
		if err != nil {
			return nil, fmt.Errorf("zarr store %s: %w", path, err)
		}
		var m ArrayMeta
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("zarr store %s: %s/zarr.json: %w", path, e.Name(), err)
		}
		if m.ZarrFormat != 3 || m.NodeType != "array" {
			return nil, fmt.Errorf("zarr store %s: %s is not a Zarr v3 array", path, e.Name())
		}
		s.Arrays[e.Name()] = m
	}
	if c := s.Group.Consolidated; c != nil {
		for name, m := range c.Metadata {
			own, ok := s.Arrays[name]
			a, _ := json.Marshal(own)
			b, _ := json.Marshal(m)
			if !ok || string(a) != string(b) {
				return nil, fmt.Errorf("zarr store %s: the consolidated metadata of %s differs from its zarr.json", path, name)
			}
		}
		if len(c.Metadata) != len(s.Arrays) {
			return nil, fmt.Errorf("zarr store %s: consolidated metadata lists %d arrays, the store holds %d", path, len(c.Metadata), len(s.Arrays))
		}
	}
	if s.dec, err = zstd.NewReader(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases the decoder.
func (s *Store) Close() { s.dec.Close() }

// Names are the store's arrays, sorted.
func (s *Store) Names() []string {
	var out []string
	for n := range s.Arrays {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Read reads a whole array as float64 values in C order (exact for every
// data type the package writes).
func (s *Store) Read(name string) ([]float64, error) {
	m, ok := s.Arrays[name]
	if !ok {
		return nil, fmt.Errorf("zarr store %s: no array %s", s.Path, name)
	}
	if len(m.Shape) == 0 {
		return s.readScalar(name, m)
	}
	if len(m.Shape) == 1 {
		return s.read1D(name, m)
	}
	if len(m.Shape) != 2 {
		return nil, fmt.Errorf("zarr store %s: array %s has %d dimensions", s.Path, name, len(m.Shape))
	}
	return s.ReadWindow(name, 0, 0, m.Shape[1], m.Shape[0])
}

func (s *Store) readScalar(name string, m ArrayMeta) ([]float64, error) {
	raw, err := os.ReadFile(filepath.Join(s.Path, name, "c"))
	if os.IsNotExist(err) {
		return []float64{m.FillValue}, nil
	}
	if err != nil {
		return nil, err
	}
	out, err := s.decodeChunk(m.DataType, m.Codecs, raw, 1)
	if err != nil {
		return nil, fmt.Errorf("zarr store %s: %s: %w", s.Path, name, err)
	}
	return out, nil
}

func (s *Store) read1D(name string, m ArrayMeta) ([]float64, error) {
	n, c := m.Shape[0], m.ChunkGrid.Configuration.ChunkShape[0]
	out := make([]float64, 0, n)
	for k := 0; k*c < n; k++ {
		raw, err := os.ReadFile(filepath.Join(s.Path, name, "c", fmt.Sprint(k)))
		var vals []float64
		if os.IsNotExist(err) {
			vals = slices.Repeat([]float64{m.FillValue}, c)
		} else if err != nil {
			return nil, err
		} else if vals, err = s.decodeChunk(m.DataType, m.Codecs, raw, c); err != nil {
			return nil, fmt.Errorf("zarr store %s: %s chunk %d: %w", s.Path, name, k, err)
		}
		out = append(out, vals[:min(c, n-k*c)]...)
	}
	return out, nil
}

// ReadWindow reads a w × h window at (x, y) of a 2-D array (sharded or
// not) as float64 values, row-major; chunks absent read as the fill value.
func (s *Store) ReadWindow(name string, x, y, w, h int) ([]float64, error) {
	m, ok := s.Arrays[name]
	if !ok {
		return nil, fmt.Errorf("zarr store %s: no array %s", s.Path, name)
	}
	if len(m.Shape) != 2 || x < 0 || y < 0 || w <= 0 || h <= 0 || x+w > m.Shape[1] || y+h > m.Shape[0] {
		return nil, fmt.Errorf("zarr store %s: %s: window %d×%d at (%d, %d) outside shape %v", s.Path, name, w, h, x, y, m.Shape)
	}
	outer := m.ChunkGrid.Configuration.ChunkShape
	inner, codecs, index, err := innerLayout(m)
	if err != nil {
		return nil, fmt.Errorf("zarr store %s: %s: %w", s.Path, name, err)
	}
	out := make([]float64, w*h)
	for oy := y / outer[0]; oy*outer[0] < y+h; oy++ {
		for ox := x / outer[1]; ox*outer[1] < x+w; ox++ {
			raw, err := os.ReadFile(filepath.Join(s.Path, name, "c", fmt.Sprint(oy), fmt.Sprint(ox)))
			missing := os.IsNotExist(err)
			if err != nil && !missing {
				return nil, err
			}
			per := [2]int{outer[0] / inner[0], outer[1] / inner[1]}
			var offsets []uint64
			if !missing && index {
				if offsets, err = shardIndex(raw, per[0]*per[1]); err != nil {
					return nil, fmt.Errorf("zarr store %s: %s shard (%d, %d): %w", s.Path, name, oy, ox, err)
				}
			}
			for iy := range per[0] {
				for ix := range per[1] {
					cy, cx := oy*outer[0]+iy*inner[0], ox*outer[1]+ix*inner[1]
					if cy >= y+h || cx >= x+w || cy+inner[0] <= y || cx+inner[1] <= x {
						continue
					}
					var vals []float64
					var body []byte
					switch {
					case missing:
					case !index:
						body = raw
					default:
						k := iy*per[1] + ix
						off, n := offsets[2*k], offsets[2*k+1]
						if off != emptyChunk {
							if off+n > uint64(len(raw)) {
								return nil, fmt.Errorf("zarr store %s: %s shard (%d, %d): chunk %d beyond the file", s.Path, name, oy, ox, k)
							}
							body = raw[off : off+n]
						}
					}
					if body == nil {
						vals = slices.Repeat([]float64{m.FillValue}, inner[0]*inner[1])
					} else if vals, err = s.decodeChunk(m.DataType, codecs, body, inner[0]*inner[1]); err != nil {
						return nil, fmt.Errorf("zarr store %s: %s chunk at (%d, %d): %w", s.Path, name, cx, cy, err)
					}
					for yy := max(y, cy); yy < min(y+h, cy+inner[0]); yy++ {
						for xx := max(x, cx); xx < min(x+w, cx+inner[1]); xx++ {
							out[(yy-y)*w+xx-x] = vals[(yy-cy)*inner[1]+xx-cx]
						}
					}
				}
			}
		}
	}
	return out, nil
}

// innerLayout is a 2-D array's read unit: the inner chunks of its
// sharding codec, or its chunks when it has none.
func innerLayout(m ArrayMeta) (chunk []int, codecs []codec, sharded bool, err error) {
	if len(m.Codecs) == 1 && m.Codecs[0].Name == "sharding_indexed" {
		var c shardingConfig
		if err := json.Unmarshal(m.Codecs[0].Configuration, &c); err != nil {
			return nil, nil, false, err
		}
		if c.IndexLocation != "end" || len(c.IndexCodecs) != 2 || c.IndexCodecs[0].Name != "bytes" || c.IndexCodecs[1].Name != "crc32c" {
			return nil, nil, false, fmt.Errorf("shard index layout %s %v not supported", c.IndexLocation, c.IndexCodecs)
		}
		return c.ChunkShape, c.Codecs, true, nil
	}
	return m.ChunkGrid.Configuration.ChunkShape, m.Codecs, false, nil
}

// shardIndex checks a shard's index against its CRC-32C and returns its
// words: offset and size of each chunk.
func shardIndex(raw []byte, n int) ([]uint64, error) {
	size := 16*n + 4
	if len(raw) < size {
		return nil, fmt.Errorf("%d bytes, shorter than its index", len(raw))
	}
	idx := raw[len(raw)-size : len(raw)-4]
	if got, want := crc32.Checksum(idx, castagnoli), binary.LittleEndian.Uint32(raw[len(raw)-4:]); got != want {
		return nil, fmt.Errorf("index checksum %08x, recorded %08x", got, want)
	}
	words := make([]uint64, 2*n)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(idx[8*i:])
	}
	return words, nil
}

// decodeChunk undoes a chunk's codecs (bytes, then optionally zstd) and
// returns its n elements.
func (s *Store) decodeChunk(dtype string, codecs []codec, body []byte, n int) ([]float64, error) {
	var names []string
	for _, c := range codecs {
		names = append(names, c.Name)
	}
	switch strings.Join(names, ",") {
	case "bytes":
	case "bytes,zstd":
		var err error
		if body, err = s.dec.DecodeAll(body, nil); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("codecs %v not supported", names)
	}
	e := size(dtype)
	if e == 0 {
		return nil, fmt.Errorf("data type %s not supported", dtype)
	}
	if len(body) != n*e {
		return nil, fmt.Errorf("%d bytes decoded, %d expected", len(body), n*e)
	}
	out := make([]float64, n)
	for i := range out {
		switch dtype {
		case Uint8:
			out[i] = float64(body[i])
		case Uint16:
			out[i] = float64(binary.LittleEndian.Uint16(body[2*i:]))
		case Int32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(body[4*i:])))
		case Float64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[8*i:]))
		}
	}
	return out, nil
}
