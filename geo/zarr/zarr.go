// Package zarr writes and reads the Zarr v3 stores lulc writes: a group of
// two-dimensional arrays on one grid (a tile's stack planes, labels and
// counts), sharded (codec sharding_indexed, the shard index at the end
// with its CRC-32C) and compressed with Zstandard, and small whole arrays
// beside them (coordinates, a scalar grid mapping). The writer takes
// windows in any order from several goroutines, compresses each inner
// chunk as soon as its pixels are complete and writes each shard file as
// soon as its chunks are, so that a tile's store is written while the
// tile is composited, with a few chunks' worth of raw pixels in memory.
//
// The format is the Zarr v3 specification
// (https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html) and
// its sharding codec; the reader reads what the writer writes (and plain,
// unsharded arrays of the same codecs), which the tests and lulc's own
// checks need; it is not a general Zarr reader. No cgo.
package zarr

import (
	"encoding/json"
	"fmt"
	"math"
)

// Data types the package writes and reads, by Zarr's names.
const (
	Uint8   = "uint8"
	Uint16  = "uint16"
	Int32   = "int32"
	Float64 = "float64"
)

// size is the bytes of one element of a data type, 0 if unknown.
func size(dtype string) int {
	switch dtype {
	case Uint8:
		return 1
	case Uint16:
		return 2
	case Int32:
		return 4
	case Float64:
		return 8
	}
	return 0
}

// emptyChunk marks a chunk a shard does not hold, in both index words.
const emptyChunk = math.MaxUint64

// codec is one entry of an array's codec chain.
type codec struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
}

// shardingConfig is sharding_indexed's configuration.
type shardingConfig struct {
	ChunkShape    []int   `json:"chunk_shape"`
	Codecs        []codec `json:"codecs"`
	IndexCodecs   []codec `json:"index_codecs"`
	IndexLocation string  `json:"index_location"`
}

// ArrayMeta is an array's zarr.json.
type ArrayMeta struct {
	ZarrFormat int    `json:"zarr_format"`
	NodeType   string `json:"node_type"`
	Shape      []int  `json:"shape"`
	DataType   string `json:"data_type"`
	ChunkGrid  struct {
		Name          string `json:"name"`
		Configuration struct {
			ChunkShape []int `json:"chunk_shape"`
		} `json:"configuration"`
	} `json:"chunk_grid"`
	ChunkKeyEncoding struct {
		Name          string `json:"name"`
		Configuration struct {
			Separator string `json:"separator"`
		} `json:"configuration"`
	} `json:"chunk_key_encoding"`
	FillValue      float64        `json:"fill_value"`
	Codecs         []codec        `json:"codecs"`
	Attributes     map[string]any `json:"attributes,omitempty"`
	DimensionNames []string       `json:"dimension_names,omitempty"`
}

// GroupMeta is a group's zarr.json, with its arrays' metadata inline
// (consolidated_metadata, which zarr-python and xarray read in one request).
type GroupMeta struct {
	ZarrFormat   int            `json:"zarr_format"`
	NodeType     string         `json:"node_type"`
	Attributes   map[string]any `json:"attributes,omitempty"`
	Consolidated *consolidated  `json:"consolidated_metadata,omitempty"`
}

type consolidated struct {
	Kind           string               `json:"kind"`
	MustUnderstand bool                 `json:"must_understand"`
	Metadata       map[string]ArrayMeta `json:"metadata"`
}

func bytesCodec() codec {
	return codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
}

func zstdCodec(level int) codec {
	return codec{Name: "zstd", Configuration: json.RawMessage(fmt.Sprintf(`{"level":%d,"checksum":false}`, level))}
}

// newMeta is the metadata of an array with a regular chunk grid and the
// default chunk keys ("c/0/1").
func newMeta(dtype string, shape, chunk []int, fill float64, codecs []codec, dims []string, attrs map[string]any) ArrayMeta {
	m := ArrayMeta{ZarrFormat: 3, NodeType: "array", Shape: shape, DataType: dtype, FillValue: fill, Codecs: codecs, Attributes: attrs, DimensionNames: dims}
	m.ChunkGrid.Name = "regular"
	m.ChunkGrid.Configuration.ChunkShape = chunk
	m.ChunkKeyEncoding.Name = "default"
	m.ChunkKeyEncoding.Configuration.Separator = "/"
	return m
}
