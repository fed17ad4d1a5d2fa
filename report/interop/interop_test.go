package interop

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
)

// testModel fits a small forest on random rows over a few classes, with
// NaNs, and returns it with rows to predict: random values, NaN, ±Inf and
// every bin edge exactly.
func testModel(t *testing.T) (*forest.Model, []float32, int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	const n, nf, k = 3000, 5, 4
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		y[i] = uint8(r.IntN(k))
		for f := range nf {
			x[i*nf+f] = float32(r.NormFloat64()) + float32(y[i])*float32(f%3)*0.7
			if r.IntN(50) == 0 {
				x[i*nf+f] = float32(math.NaN())
			}
		}
	}
	p := forest.Params{Trees: 12, MaxDepth: 8, MinSamplesLeaf: 1, Bins: 16, Bootstrap: true, Seed: 5}
	bins, err := forest.QuantileBins(x, nf, p.Bins, 100_000, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := bins.Bin(x, nf)
	if err != nil {
		t.Fatal(err)
	}
	fo, err := forest.Train(context.Background(), xb, y, k, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := &forest.Model{Features: []string{"B02", "B04", "B08", "ndvi", "ndwi"}, Bands: []string{"B02", "B04", "B08"}, Scale: 1e-4,
		Params: p, Bins: bins, Forest: fo}
	for c := range k {
		m.Classes = append(m.Classes, forest.Class{Code: uint8(10 * (c + 1)), Name: "c"})
	}
	rows := append([]float32{}, x[:600*nf]...)
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for f := range nf {
		special = append(special, bins.Edges[f]...)
	}
	for i, v := range special {
		row := make([]float32, nf)
		for f := range row {
			row[f] = special[(i+f*7)%len(special)]
		}
		row[i%nf] = v
		rows = append(rows, row...)
	}
	return m, rows, nf
}

// evaluate runs the ensemble as ONNX's TreeEnsembleClassifier defines it:
// per tree, from node 0, BRANCH_LEQ / BRANCH_LT on the raw value with NaN
// following nodes_missing_value_tracks_true, class weights summed at the
// leaves; the label is the first class of the largest score.
func (e *ensemble) evaluate(row []float32, k int) (int, []float32) {
	type key struct{ tree, node int64 }
	at := map[key]int{}
	for i := range e.treeIDs {
		at[key{e.treeIDs[i], e.nodeIDs[i]}] = i
	}
	scores := make([]float32, k)
	trees := e.treeIDs[len(e.treeIDs)-1] + 1
	for t := range trees {
		i := at[key{t, 0}]
		for e.modes[i] != "LEAF" {
			v := row[e.featureIDs[i]]
			var yes bool
			switch {
			case v != v:
				yes = e.missing[i] == 1
			case e.modes[i] == "BRANCH_LEQ":
				yes = v <= e.values[i]
			case e.modes[i] == "BRANCH_LT":
				yes = v < e.values[i]
			}
			next := e.falseIDs[i]
			if yes {
				next = e.trueIDs[i]
			}
			i = at[key{t, next}]
		}
		for j := range e.classTree {
			if e.classTree[j] == t && e.classNode[j] == e.nodeIDs[i] {
				scores[e.classID[j]] += e.weights[j]
			}
		}
	}
	best := 0
	for c := range scores {
		if scores[c] > scores[best] {
			best = c
		}
	}
	return best, scores
}

// TestEnsembleMatchesForest checks the translation of binned splits into
// thresholds on raw values: interpreted as ONNX defines the operator, the
// ensemble gives lulc's classes on every row (random values, NaN, ±Inf,
// values equal to bin edges) and its probabilities to float32 rounding.
func TestEnsembleMatchesForest(t *testing.T) {
	m, rows, nf := testModel(t)
	e, err := newEnsemble(m)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := m.Bins.Bin(rows, nf)
	if err != nil {
		t.Fatal(err)
	}
	k := m.Forest.Classes
	prob := make([]float32, xb.N*k)
	if err := m.Forest.Compile().Proba(xb, prob); err != nil {
		t.Fatal(err)
	}
	cls, _, _ := m.Forest.Classify(xb)
	for i := range xb.N {
		got, scores := e.evaluate(rows[i*nf:(i+1)*nf], k)
		if got != int(cls[i]) {
			t.Fatalf("row %d %v: ONNX class %d, lulc %d (scores %v, lulc %v)", i, rows[i*nf:(i+1)*nf], got, cls[i], scores, prob[i*k:(i+1)*k])
		}
		for c := range k {
			if d := math.Abs(float64(scores[c] - prob[i*k+c])); d > 1e-5 {
				t.Fatalf("row %d class %d: ONNX %v, lulc %v", i, c, scores[c], prob[i*k+c])
			}
		}
	}
}

// python is Debian's python3 when it imports the modules, else "".
func python(t *testing.T, modules string) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import "+modules).Run() == nil {
			return p
		}
	}
	t.Skipf("no python3 with %s", modules)
	return ""
}

// TestONNXChecker has the onnx package (Debian's python3-onnx) check the
// exported model and read its graph back, and requires the export to be
// byte for byte what onnx's own protobuf library writes for that model.
func TestONNXChecker(t *testing.T) {
	py := python(t, "onnx")
	m, _, _ := testModel(t)
	body, err := ONNX(m, "test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `import sys, onnx
m = onnx.load(sys.argv[1]); onnx.checker.check_model(m)
n = m.graph.node[0]
assert (n.op_type, n.domain) == ("TreeEnsembleClassifier", "ai.onnx.ml"), n.op_type
a = {x.name: x for x in n.attribute}
assert list(a["classlabels_int64s"].ints) == [10, 20, 30, 40], a["classlabels_int64s"].ints
assert [i.name for i in m.graph.input] == ["features"] and [o.name for o in m.graph.output] == ["label", "probabilities"]
assert m.SerializeToString() == open(sys.argv[1], "rb").read(), "onnx writes the model otherwise"
print(len(a["nodes_nodeids"].ints))`
	out, err := exec.CommandContext(context.Background(), py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx rejected the model: %v\n%s", err, out)
	}
	if n := bytes.TrimSpace(out); string(n) == "0" {
		t.Errorf("the model has no nodes: %s", out)
	}
}

// TestNPZ has numpy read the samples back: shapes, dtypes and values.
func TestNPZ(t *testing.T) {
	py := python(t, "numpy")
	m, rows, nf := testModel(t)
	n := len(rows) / nf
	set := &sampleset.Set{Header: sampleset.Header{Features: m.Features, Classes: []uint8{10, 20, 30, 40}, Sources: []string{"tile-ä"}}, X: rows}
	for i := range n {
		set.Y = append(set.Y, uint8(i%4))
		set.Split = append(set.Split, uint8(i%3%2))
		set.Pixel = append(set.Pixel, uint64(i)<<20|uint64(i%7))
	}
	var b bytes.Buffer
	if err := NPZ(&b, set, m); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	NPZ(&again, set, m)
	if !bytes.Equal(b.Bytes(), again.Bytes()) {
		t.Error("two exports of the same samples differ")
	}
	path := filepath.Join(t.TempDir(), "s.npz")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `import sys, numpy as np
z = np.load(sys.argv[1], allow_pickle=False)
n = int(sys.argv[2])
assert z["features"].shape == (n, 5) and z["features"].dtype == np.float32
assert list(z["labels"][:5]) == [10, 20, 30, 40, 10], z["labels"][:5]
assert z["class_index"].dtype == np.uint8 and z["split"].dtype == np.uint8 and z["weights"].sum() == n
assert z["pixel"].dtype == np.uint64 and int(z["pixel"][3]) == (3 << 20 | 3)
assert list(z["feature_names"]) == ["B02", "B04", "B08", "ndvi", "ndwi"] and list(z["sources"]) == ["tile-ä"]
assert list(z["class_codes"]) == [10, 20, 30, 40]
assert z["lulc_probability"].shape == (n, 4) and set(np.unique(z["lulc_label"])) <= {10, 20, 30, 40}
assert np.isnan(z["features"]).sum() > 0
print("ok")`
	out, err := exec.Command(py, "-c", script, path, strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
}

// TestQML: the style holds every class of the scheme as a palette entry
// of band 1 (code, colour, name, escaped), in a document QGIS's parser
// and any XML reader take.
func TestQML(t *testing.T) {
	t.Parallel()
	s := landcover.Scheme{Name: "fields", Classes: []landcover.Class{
		{Code: 1, Name: "Wheat & barley", Color: color.RGBA{0xf0, 0x96, 0xff, 0xff}},
		{Code: 7, Name: "Лес <ёлки>", Color: color.RGBA{0x00, 0x64, 0x00, 0xff}},
	}}
	b, err := QML(s)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Renderer struct {
			Type    string `xml:"type,attr"`
			Band    int    `xml:"band,attr"`
			Entries []struct {
				Value int    `xml:"value,attr"`
				Color string `xml:"color,attr"`
				Label string `xml:"label,attr"`
			} `xml:"colorPalette>paletteEntry"`
		} `xml:"pipe>rasterrenderer"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	r := doc.Renderer
	if r.Type != "paletted" || r.Band != 1 || len(r.Entries) != 2 ||
		r.Entries[0].Value != 1 || r.Entries[0].Color != "#f096ff" || r.Entries[0].Label != "Wheat & barley" ||
		r.Entries[1].Value != 7 || r.Entries[1].Color != "#006400" || r.Entries[1].Label != "Лес <ёлки>" {
		t.Fatalf("style %+v from:\n%s", r, b)
	}
	if _, err := QML(landcover.Scheme{Name: "empty"}); err == nil {
		t.Error("a scheme without classes gave a style")
	}
}
