// Package sampleset holds labelled pixel samples and their file format, so
// that training can rerun without touching rasters.
//
// File layout (little-endian), extension .lulcs:
//
//	magic    "LULCSMP" + version byte (1)
//	uint32   header length, then a JSON header (Header)
//	uint64   N, the number of samples
//	float32  N × F feature values, row-major (NaN = missing)
//	uint8    N class indices (into Header.Classes)
//	uint8    N splits (0 training, 1 validation)
//	uint64   N pixel ids: source index << 40 | row << 20 | col
//	[32]byte SHA-256 of everything before
package sampleset

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lulc/lulc/pixel/features"
)

// Header describes the samples.
type Header struct {
	Features []string `json:"features"`
	Classes  []uint8  `json:"classes"` // class codes; Y holds indices into it
	Sources  []string `json:"sources"` // inputs, by index
	Seed     uint64   `json:"seed"`
	Config   string   `json:"config_sha256"`
	// Buffered counts the training candidates the split's buffer dropped
	// for lying near validation pixels (sampling.Config.Buffer).
	Buffered int64 `json:"buffered,omitempty"`
	// Draw is set on one shard's draw rather than a training set.
	Draw *Draw `json:"draw,omitempty"`
}

// Draw marks a samples file as one shard's draw (lulc run --phase
// sample): per class and split, the candidates with the smallest keys
// among its inputs (at most the cap each, not balanced), X holding their
// band reflectances with Features naming the bands. Training merges the
// shards' draws into the samples one process would have drawn.
type Draw struct {
	// Inputs are the job's index of each of Sources: pixel ids carry it.
	// Total is how many inputs the job has, over all its shards.
	Inputs []int `json:"inputs"`
	Total  int   `json:"total"`
	// Labelled counts the inputs' labelled pixels; Outside, by code, those
	// whose code is outside the scheme.
	Labelled int64           `json:"labelled"`
	Outside  map[uint8]int64 `json:"outside,omitempty"`
	// Scale, Offset and NoData say how the inputs' values became the
	// reflectances in X.
	Scale  float64  `json:"scale"`
	Offset float64  `json:"offset"`
	NoData *float64 `json:"nodata,omitempty"`
	// Layers are the inputs' layers among the bands, with their maps.
	Layers []features.Layer `json:"layers,omitempty"`
	// Dark is each input's dark levels by band (package radiometry), in
	// the order of Sources, when known: training records their median.
	Dark []map[string]float64 `json:"dark,omitempty"`
	// Keys are the candidates' sampling keys, in the order of Pixel, when
	// any differs from the unweighted key its pixel id gives (a draw from
	// inputs with pixel weights); absent, the keys are recomputed from the
	// ids.
	Keys []uint64 `json:"keys,omitempty"`
	// Ingest is the hash of the ingest config whose composites were
	// drawn, Tiles the hash of the job's tile list (its names in order),
	// Plan the job's plan digest (empty when it searched its source) and
	// Tasks the job's task count: the draws of one job agree on all, and
	// training merges no others.
	Ingest string `json:"ingest_config,omitempty"`
	Tiles  string `json:"tiles_sha256,omitempty"`
	Plan   string `json:"plan,omitempty"`
	Tasks  int    `json:"tasks,omitempty"`
}

// Set is a table of samples.
type Set struct {
	Header
	X     []float32 // N × F, row-major
	Y     []uint8
	Split []uint8  // 0 training, 1 validation
	Pixel []uint64 // source << 40 | row << 20 | col
}

// N is the number of samples.
func (s *Set) N() int { return len(s.Y) }

// Subset returns the rows of one split as a new matrix and labels. The
// rows are copied by every core, blocks of rows each: a full tile's split
// is some hundreds of megabytes of fresh memory.
func (s *Set) Subset(split uint8) ([]float32, []uint8) {
	nf, n := len(s.Features), len(s.Split)
	const block = 1 << 14
	nb := (n + block - 1) / block
	// start[b] is where block b's rows of the split go.
	start := make([]int, nb+1)
	for b := range nb {
		k := 0
		for _, sp := range s.Split[b*block : min(n, (b+1)*block)] {
			if sp == split {
				k++
			}
		}
		start[b+1] = start[b] + k
	}
	x, y := make([]float32, start[nb]*nf), make([]uint8, start[nb])
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(nb, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for b := int(next.Add(1) - 1); b < nb; b = int(next.Add(1) - 1) {
				k := start[b]
				for i := b * block; i < min(n, (b+1)*block); i++ {
					if s.Split[i] == split {
						copy(x[k*nf:(k+1)*nf], s.X[i*nf:(i+1)*nf])
						y[k] = s.Y[i]
						k++
					}
				}
			}
		})
	}
	wg.Wait()
	return x, y
}

var magic = []byte("LULCSMP\x01")

// Encode serialises the set.
func (s *Set) Encode() ([]byte, error) {
	n, nf := s.N(), len(s.Features)
	if len(s.X) != n*nf || len(s.Split) != n || len(s.Pixel) != n {
		return nil, fmt.Errorf("encode samples: inconsistent lengths (%d rows, %d values, %d features)", n, len(s.X), nf)
	}
	h, err := json.Marshal(s.Header)
	if err != nil {
		return nil, fmt.Errorf("encode samples: %w", err)
	}
	// Made at its final size: a full tile's samples are half a gigabyte,
	// which a growing buffer would copy over and over.
	b := make([]byte, 0, len(magic)+4+len(h)+8+n*(4*nf+1+1+8)+sha256.Size)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	b = append(b, h...)
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	b, _ = binary.Append(b, binary.LittleEndian, s.X)
	b = append(b, s.Y...)
	b = append(b, s.Split...)
	b, _ = binary.Append(b, binary.LittleEndian, s.Pixel)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// Decode parses a samples file, failing clearly on truncation or damage.
func Decode(data []byte) (*Set, error) {
	if len(data) < len(magic)+4+8+sha256.Size || !bytes.Equal(data[:len(magic)], magic) {
		return nil, errors.New("not a lulc samples file, or truncated")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("samples file is corrupt or truncated (checksum mismatch)")
	}
	p := body[len(magic):]
	hl := int(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if hl > len(p) {
		return nil, errors.New("samples file: header length beyond the file")
	}
	s := &Set{}
	if err := json.Unmarshal(p[:hl], &s.Header); err != nil {
		return nil, fmt.Errorf("samples header: %w", err)
	}
	p = p[hl:]
	if len(p) < 8 {
		return nil, errors.New("samples file is truncated")
	}
	n := binary.LittleEndian.Uint64(p)
	p = p[8:]
	nf := uint64(len(s.Features))
	// Only an empty shard's draw (no input) names no features.
	if nf == 0 && (n > 0 || s.Draw == nil) || n > uint64(len(p)) || uint64(len(p)) != n*(4*nf+2+8) {
		return nil, fmt.Errorf("samples file: %d bytes for %d rows × %d features", len(p), n, nf)
	}
	s.X = make([]float32, n*nf)
	for i := range s.X {
		s.X[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	p = p[4*n*nf:]
	s.Y, s.Split = bytes.Clone(p[:n]), bytes.Clone(p[n:2*n])
	p = p[2*n:]
	s.Pixel = make([]uint64, n)
	for i := range s.Pixel {
		s.Pixel[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	for i, y := range s.Y {
		if int(y) >= len(s.Classes) || s.Split[i] > 1 {
			return nil, fmt.Errorf("samples file: row %d has class index %d of %d, split %d", i, y, len(s.Classes), s.Split[i])
		}
	}
	return s, nil
}
