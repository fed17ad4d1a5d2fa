package interop

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/lulc/lulc/internal/npy"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
)

// npyArray is one array of an .npz: its NumPy dtype, shape and
// little-endian data.
type npyArray struct {
	name, descr string
	shape       []int
	data        any // a slice binary.Write encodes, or []byte already encoded
}

// NPZ writes the samples as a NumPy .npz archive (np.load reads it with
// allow_pickle=False): features (float32, N × F, row-major), labels (the
// class codes, int64), class_index (uint8, into class_codes), split
// (uint8: 0 training, 1 validation), weights (float32, all 1: lulc's draw
// is unweighted), pixel (uint64: source << 40 | row << 20 | col),
// feature_names (unicode), class_codes (int64) and sources (unicode). With
// a model, also lulc_label (int64 codes) and lulc_probability (float32,
// N × classes): lulc's own predictions of every row, for comparing other
// tools with it.
func NPZ(w io.Writer, set *sampleset.Set, model *forest.Model) error {
	n, nf := set.N(), len(set.Features)
	codes := make([]int64, len(set.Classes))
	for i, c := range set.Classes {
		codes[i] = int64(c)
	}
	labels := make([]int64, n)
	weights := make([]float32, n)
	for i, y := range set.Y {
		labels[i], weights[i] = codes[y], 1
	}
	arrays := []npyArray{
		{"features", "<f4", []int{n, nf}, set.X},
		{"labels", "<i8", []int{n}, labels},
		{"class_index", "|u1", []int{n}, set.Y},
		{"split", "|u1", []int{n}, set.Split},
		{"weights", "<f4", []int{n}, weights},
		{"pixel", "<u8", []int{n}, set.Pixel},
		unicodeArray("feature_names", set.Features),
		{"class_codes", "<i8", []int{len(codes)}, codes},
		unicodeArray("sources", set.Sources),
	}
	if model != nil {
		pred, err := predictions(set, model)
		if err != nil {
			return err
		}
		arrays = append(arrays, pred...)
	}
	z := zip.NewWriter(w)
	for _, a := range arrays {
		// A fixed modification time keeps the archive's bytes the same on
		// every run.
		f, err := z.CreateHeader(&zip.FileHeader{Name: a.name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if err := writeNpy(f, a); err != nil {
			return fmt.Errorf("npz %s: %w", a.name, err)
		}
	}
	return z.Close()
}

// predictions are lulc's classes and probabilities of every row, from the
// model's own binning and forest.
func predictions(set *sampleset.Set, model *forest.Model) ([]npyArray, error) {
	nf := len(set.Features)
	if nf != len(model.Features) {
		return nil, fmt.Errorf("npz: samples of %d features, a model of %d", nf, len(model.Features))
	}
	for i, f := range model.Features {
		if set.Features[i] != f {
			return nil, fmt.Errorf("npz: the samples' feature %d is %s, the model's %s", i, set.Features[i], f)
		}
	}
	xb, err := model.Bins.Bin(set.X, nf)
	if err != nil {
		return nil, err
	}
	k := model.Forest.Classes
	prob := make([]float32, set.N()*k)
	if err := model.Forest.Compile().Proba(xb, prob); err != nil {
		return nil, err
	}
	cls, _, err := model.Forest.Classify(xb)
	if err != nil {
		return nil, err
	}
	label := make([]int64, len(cls))
	for i, c := range cls {
		label[i] = int64(model.Classes[c].Code)
	}
	return []npyArray{
		{"lulc_label", "<i8", []int{len(cls)}, label},
		{"lulc_probability", "<f4", []int{len(cls), k}, prob},
	}, nil
}

// unicodeArray is a NumPy fixed-width unicode array ('<U' + width, UTF-32
// little-endian, zero-padded).
func unicodeArray(name string, v []string) npyArray {
	width := 1
	for _, s := range v {
		width = max(width, utf8.RuneCountInString(s))
	}
	var b bytes.Buffer
	for _, s := range v {
		n := 0
		for _, r := range s {
			binary.Write(&b, binary.LittleEndian, uint32(r))
			n++
		}
		b.Write(make([]byte, 4*(width-n)))
	}
	return npyArray{name, fmt.Sprintf("<U%d", width), []int{len(v)}, b.Bytes()}
}

// writeNpy writes one array in NumPy's .npy format 1.0: magic, header
// length, a Python-literal header padded to 64 bytes, then the data.
func writeNpy(w io.Writer, a npyArray) error {
	if _, err := w.Write(npy.Header(a.descr, a.shape)); err != nil {
		return err
	}
	if raw, ok := a.data.([]byte); ok {
		_, err := w.Write(raw)
		return err
	}
	return binary.Write(w, binary.LittleEndian, a.data)
}
