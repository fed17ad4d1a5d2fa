package forest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lulc/lulc/learn/aoa"
)

// FormatVersion is the model file version this build writes and reads.
const FormatVersion = 1

var magic = []byte("LULCRF\x00\x01")

// Class is a class of the model's scheme: index i of the forest's outputs
// stands for Classes[i].
type Class struct {
	Code  uint8  `json:"code"`
	Name  string `json:"name"`
	Color string `json:"color"` // #rrggbb
}

// Model is a forest with everything needed to apply it to a stack: which
// features from which bands at which scaling, the class scheme, the bin
// edges and the training parameters.
type Model struct {
	Features   []string  `json:"features"`
	Bands      []string  `json:"bands"`
	Scale      float64   `json:"scale"`  // stack DN → reflectance
	Offset     float64   `json:"offset"` //
	Classes    []Class   `json:"classes"`
	Params     Params    `json:"params"`
	ConfigHash string    `json:"config_sha256"`
	Samples    int       `json:"training_samples"`
	Importance []float64 `json:"importance"`
	// Dark is the training data's dark level per band (package
	// radiometry: the median over the training tiles of each band's 1st
	// percentile reflectance), for checking that the images a model
	// maps share its radiometric convention; empty when unknown.
	Dark map[string]float64 `json:"dark_reflectance_p1,omitempty"`
	// Remap maps label codes (Classes' own too) onto class codes, as the
	// training config's classes.remap did: a map made with the model is
	// evaluated against labels the same way.
	Remap map[uint8]uint8 `json:"label_remap,omitempty"`
	// AOA is what the area of applicability needs of the training data
	// (package aoa); nil for models trained without it, or before lulc
	// computed it. Its points follow the trees in the file.
	AOA    *aoa.Reference `json:"aoa,omitempty"`
	Bins   *Bins          `json:"-"`
	Forest *Forest        `json:"-"`
}

type header struct {
	FormatVersion int `json:"format_version"`
	Model
	Trees int `json:"trees"`
}

// Encode serialises the model: magic, a JSON header, the bin edges and the
// trees as little-endian arrays, the area of applicability's points
// (float64, N × F) when the model has them, and a SHA-256 of everything
// before it. The same model always gives the same bytes; a model without
// an area of applicability gives the bytes it gave before lulc had one.
func (m *Model) Encode() ([]byte, error) {
	f := m.Forest
	if f == nil || m.Bins == nil {
		return nil, errors.New("encode model: no forest")
	}
	if len(m.Features) != f.Features || len(m.Bins.Edges) != f.Features || len(m.Classes) != f.Classes {
		return nil, fmt.Errorf("encode model: %d features, %d binned, forest has %d; %d classes, forest has %d",
			len(m.Features), len(m.Bins.Edges), f.Features, len(m.Classes), f.Classes)
	}
	m.Importance = f.Importance
	h, err := json.Marshal(header{FormatVersion: FormatVersion, Model: *m, Trees: len(f.Trees)})
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	var b bytes.Buffer
	b.Write(magic)
	le := binary.LittleEndian
	w := func(v any) { binary.Write(&b, le, v) }
	w(uint32(len(h)))
	b.Write(h)
	for _, e := range m.Bins.Edges {
		w(uint16(len(e)))
		w(e)
	}
	for _, t := range f.Trees {
		w(uint32(len(t.Feature)))
		w(uint32(len(t.Probs) / f.Classes))
		w(t.Feature)
		w(t.Bin)
		w(t.Left)
		w(t.Right)
		w(t.Leaf)
		w(t.Probs)
	}
	if m.AOA != nil {
		if err := m.AOA.Check(f.Features); err != nil {
			return nil, fmt.Errorf("encode model: %w", err)
		}
		w(m.AOA.Points)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// Decode parses and checks a model file. A truncated or corrupted file is
// an error that says so, never a panic.
func Decode(data []byte) (*Model, error) {
	if len(data) < len(magic)+4+sha256.Size {
		return nil, fmt.Errorf("model file is truncated (%d bytes)", len(data))
	}
	if !bytes.Equal(data[:len(magic)-1], magic[:len(magic)-1]) {
		return nil, errors.New("not a lulc model file (bad magic)")
	}
	if v := data[len(magic)-1]; v != FormatVersion {
		return nil, fmt.Errorf("model format version %d; this lulc reads version %d", v, FormatVersion)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("model file is corrupt or truncated (checksum mismatch)")
	}
	r := &reader{b: body[len(magic):]}
	hl := int(r.u32())
	hb := r.bytes(hl)
	if r.err != nil {
		return nil, r.err
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("model header: %w", err)
	}
	m := h.Model
	nf, nc := len(m.Features), len(m.Classes)
	switch {
	case h.FormatVersion != FormatVersion:
		return nil, fmt.Errorf("model header: format version %d", h.FormatVersion)
	case nf == 0 || nf > math.MaxInt16:
		return nil, fmt.Errorf("model header: %d features", nf)
	case nc == 0 || nc > 255:
		return nil, fmt.Errorf("model header: %d classes", nc)
	case h.Trees < 1 || h.Trees > 100000:
		return nil, fmt.Errorf("model header: %d trees", h.Trees)
	}
	m.Bins = &Bins{Edges: make([][]float32, nf)}
	for f := range nf {
		n := int(r.u16())
		if n > MaxBins-1 {
			return nil, fmt.Errorf("model: feature %d has %d bin edges", f, n)
		}
		m.Bins.Edges[f] = r.f32s(n)
		// Binning searches the edges: they must be numbers, increasing.
		for i, e := range m.Bins.Edges[f] {
			if e != e || (i > 0 && e <= m.Bins.Edges[f][i-1]) {
				return nil, fmt.Errorf("model: feature %d's bin edges are not increasing numbers (edge %d is %v)", f, i, e)
			}
		}
	}
	fo := &Forest{Classes: nc, Features: nf, Trees: make([]Tree, h.Trees), Importance: m.Importance}
	for ti := range fo.Trees {
		n, leaves := int(r.u32()), int(r.u32())
		if r.err != nil {
			return nil, r.err
		}
		if n < 1 || n > r.left()/12 || leaves < 1 || leaves > n {
			return nil, fmt.Errorf("model: tree %d has %d nodes and %d leaves", ti, n, leaves)
		}
		t := Tree{Feature: r.i16s(n), Bin: r.bytes(n), Left: r.i32s(n), Right: r.i32s(n), Leaf: r.i32s(n), Probs: r.f32s(leaves * nc)}
		if r.err != nil {
			return nil, r.err
		}
		if err := t.check(nf, leaves); err != nil {
			return nil, fmt.Errorf("model: tree %d: %w", ti, err)
		}
		fo.Trees[ti] = t
	}
	if r.err != nil {
		return nil, r.err
	}
	if a := m.AOA; a != nil {
		// The header says how many points follow the trees; Check refuses
		// a count that does not match the bytes.
		if a.N < 0 || a.N > r.left()/8/nf {
			return nil, fmt.Errorf("model: area of applicability of %d points, %d bytes left", a.N, r.left())
		}
		a.Points = r.f64s(a.N * nf)
		if err := a.Check(nf); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("model: %d unexpected bytes after the trees", len(r.b))
	}
	m.Forest = fo
	return &m, nil
}

// check verifies a decoded tree is well formed: children come after their
// parent (so traversal ends), indices are in range, leaves are leaves.
func (t *Tree) check(features, leaves int) error {
	n := int32(len(t.Feature))
	for i := range n {
		if f := t.Feature[i]; f >= 0 {
			if int(f) >= features {
				return fmt.Errorf("node %d splits on feature %d of %d", i, f, features)
			}
			// Children follow their parent and sit side by side, as Train
			// lays them out and prediction assumes.
			if t.Left[i] <= i || t.Right[i] != t.Left[i]+1 || t.Right[i] >= n {
				return fmt.Errorf("node %d has children %d, %d", i, t.Left[i], t.Right[i])
			}
		} else if t.Leaf[i] < 0 || int(t.Leaf[i]) >= leaves {
			return fmt.Errorf("leaf %d points at probabilities %d of %d", i, t.Leaf[i], leaves)
		}
	}
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) left() int { return len(r.b) }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errors.New("model file is truncated")
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) f32s(n int) []float32 {
	b := r.bytes(4 * n)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func (r *reader) f64s(n int) []float64 {
	b := r.bytes(8 * n)
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func (r *reader) i16s(n int) []int16 {
	b := r.bytes(2 * n)
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

func (r *reader) i32s(n int) []int32 {
	b := r.bytes(4 * n)
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Check says how the model's inputs differ from a stack's bands and the
// features asked for, or nil when they match.
func (m *Model) Check(features, bands []string) error {
	var diffs []string
	if !slices.Equal(m.Features, features) {
		diffs = append(diffs, fmt.Sprintf("features: model [%s], input [%s]", strings.Join(m.Features, ", "), strings.Join(features, ", ")))
	}
	if !slices.Equal(m.Bands, bands) {
		diffs = append(diffs, fmt.Sprintf("bands: model [%s], input [%s]", strings.Join(m.Bands, ", "), strings.Join(bands, ", ")))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("model does not match its input: %s", strings.Join(diffs, "; "))
	}
	return nil
}
