package interop

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/report/interop/onnxpb"
)

var update = flag.Bool("update", false, "rewrite testdata/tiny.onnx from the current encoder")

// tinyModel is a forest built by hand so that its export covers every
// case of the translation: the three thresholds (bin code 0: BRANCH_LT
// −Inf; a code within the edges: BRANCH_LEQ the edge; a code past them:
// BRANCH_LEQ +Inf), leaves whose probabilities include zeros (no class
// entry), and the model's metadata.
func tinyModel() *forest.Model {
	const leaf = -1
	f := &forest.Forest{Classes: 3, Features: 3, Trees: []forest.Tree{
		{ // f0 ≤ 0.5 ? (f1 is NaN ? leaf 0 : leaf 1) : leaf 2
			Feature: []int16{0, 1, leaf, leaf, leaf},
			Bin:     []uint8{2, 0, 0, 0, 0},
			Left:    []int32{1, 3, -1, -1, -1},
			Right:   []int32{2, 4, -1, -1, -1},
			Leaf:    []int32{-1, -1, 2, 0, 1},
			Probs:   []float32{1, 0, 0, 0.25, 0.75, 0, 0, 0.5, 0.5},
		},
		{ // f2 ≤ +Inf (everything but nothing else) ? leaf 0 : leaf 1
			Feature: []int16{2, leaf, leaf},
			Bin:     []uint8{2, 0, 0},
			Left:    []int32{1, -1, -1},
			Right:   []int32{2, -1, -1},
			Leaf:    []int32{-1, 0, 1},
			Probs:   []float32{0.2, 0.3, 0.5, 0, 0, 1},
		},
	}}
	return &forest.Model{
		Features: []string{"B04", "B08", "ndvi"}, Bands: []string{"B04", "B08"}, Scale: 1e-4, Offset: -0.1,
		Classes:    []forest.Class{{Code: 11, Name: "water"}, {Code: 22, Name: "crops"}, {Code: 33, Name: "forest"}},
		ConfigHash: "c0ffee",
		Bins:       &forest.Bins{Edges: [][]float32{{0.1, 0.5, 0.9}, {-1, 1}, {0.25}}},
		Forest:     f,
	}
}

// TestONNXGolden decodes the export of tinyModel and testdata/tiny.onnx
// into onnxpb.ModelProto and requires the same model (proto.Equal: every
// field, its presence and the order of repeated ones; not the bytes, whose
// field order and packing may differ). The committed file was written by
// lulc's first encoder, which put the model's fields on the wire one by
// one with protowire, so this checks that the export built from the
// generated bindings is that model. Run with -update to rewrite it after
// an intended change of the export.
func TestONNXGolden(t *testing.T) {
	body, err := ONNX(tinyModel(), "golden")
	if err != nil {
		t.Fatal(err)
	}
	again, err := ONNX(tinyModel(), "golden")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, again) {
		t.Error("two exports of the same model differ")
	}
	path := filepath.Join("testdata", "tiny.onnx")
	if *update {
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got, ref onnxpb.ModelProto
	if err := proto.Unmarshal(body, &got); err != nil {
		t.Fatalf("decoding the export: %v", err)
	}
	if err := proto.Unmarshal(want, &ref); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	if len(ref.ProtoReflect().GetUnknown()) != 0 || len(got.ProtoReflect().GetUnknown()) != 0 {
		t.Error("fields unknown to onnx-ml.proto")
	}
	if !proto.Equal(&got, &ref) {
		t.Errorf("the export is not the model of %s:\ngot  %v\nwant %v", path, &got, &ref)
	}
	// A few fields by name, so that a wrong golden file cannot pass.
	g := ref.GetGraph()
	if ref.GetIrVersion() != onnxIRVersion || len(g.GetNode()) != 1 || g.GetNode()[0].GetOpType() != "TreeEnsembleClassifier" {
		t.Fatalf("%s: IR %d, graph %v", path, ref.GetIrVersion(), g)
	}
	attrs := map[string]*onnxpb.AttributeProto{}
	for _, a := range g.GetNode()[0].GetAttribute() {
		attrs[a.GetName()] = a
	}
	if m := attrs["nodes_modes"].GetStrings(); len(m) != 8 || string(m[0]) != "BRANCH_LEQ" || string(m[1]) != "BRANCH_LT" || string(m[2]) != "LEAF" {
		t.Errorf("nodes_modes %q", m)
	}
	if w := attrs["class_weights"].GetFloats(); len(w) != 9 || w[0] != 0.25 {
		t.Errorf("class_weights %v", w)
	}
}
