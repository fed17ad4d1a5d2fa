// Package interop writes lulc's model, samples and class schemes in
// formats other tools open: the forest as an ONNX-ML model
// (TreeEnsembleClassifier, ai.onnx.ml opset 3), which onnxruntime runs on
// raw feature values, samples as NumPy's .npz, and a class scheme as a
// QGIS style. It computes from values in memory; lulc export and the
// stages read and write the files.
package interop

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lulc/lulc/learn/forest"
)

// ONNX format constants (onnx/onnx.proto, onnx-ml operator set).
const (
	onnxIRVersion   = 8 // IR of ONNX 1.10+: Debian's onnx 1.12 and onnxruntime 1.30 read it
	onnxMLOpset     = 3 // ai.onnx.ml, which added *_as_tensor attributes lulc does not need
	onnxOpset       = 13
	attrFloats      = 6 // AttributeProto.AttributeType
	attrInts        = 7
	attrStrings     = 8
	attrString      = 3
	tensorFloat     = 1 // TensorProto.DataType
	tensorInt64     = 7
	onnxDomainML    = "ai.onnx.ml"
	onnxInputName   = "features"
	onnxLabelName   = "label"
	onnxProbability = "probabilities"
)

// ONNX encodes the model as an ONNX-ML model: one TreeEnsembleClassifier
// node taking the raw features ("features", float [N, F] in the model's
// feature order) and giving the class codes ("label", int64 [N]) and the
// class probabilities ("probabilities", float [N, C] in the model's class
// order). lulc's binning becomes the trees' thresholds: a split sending
// rows whose bin code is at most t left sends left the values at most
// edge t−1 of the feature (BRANCH_LEQ), or none but NaN when t is 0
// (BRANCH_LT −Inf), or all when t is past the last edge (BRANCH_LEQ +Inf);
// NaN always goes left, as its code 0 does. Leaves weigh each class by
// its probability over the number of trees, so the summed scores are
// lulc's mean probabilities (to float32 rounding: sums run in another
// order) and their first maximum is lulc's class.
func ONNX(m *forest.Model, version string) ([]byte, error) {
	if m.Forest == nil || m.Bins == nil {
		return nil, fmt.Errorf("onnx: the model has no forest")
	}
	f := m.Forest
	if len(m.Bins.Edges) != f.Features || len(m.Features) != f.Features || len(m.Classes) != f.Classes {
		return nil, fmt.Errorf("onnx: %d features, %d bin edge lists and %d feature names; %d classes and %d class entries",
			f.Features, len(m.Bins.Edges), len(m.Features), f.Classes, len(m.Classes))
	}
	e, err := newEnsemble(m)
	if err != nil {
		return nil, err
	}
	node := e.node()
	var graph []byte
	graph = protowire.AppendTag(graph, 1, protowire.BytesType) // node
	graph = protowire.AppendBytes(graph, node)
	graph = appendString(graph, 2, "lulc_forest")
	graph = appendString(graph, 10, fmt.Sprintf("lulc random forest: %d trees, features %v", len(f.Trees), m.Features))
	graph = appendMessage(graph, 11, valueInfo(onnxInputName, tensorFloat, "N", f.Features))
	graph = appendMessage(graph, 12, valueInfo(onnxLabelName, tensorInt64, "N", -1))
	graph = appendMessage(graph, 12, valueInfo(onnxProbability, tensorFloat, "N", f.Classes))

	var model []byte
	model = protowire.AppendTag(model, 1, protowire.VarintType) // ir_version
	model = protowire.AppendVarint(model, onnxIRVersion)
	model = appendString(model, 2, "lulc")
	model = appendString(model, 3, version)
	model = appendString(model, 4, "org.lulc")
	model = appendString(model, 6, "Land-cover classes from Sentinel-2 features; inputs are raw feature values (reflectance and indices).")
	model = appendMessage(model, 7, graph)
	model = appendMessage(model, 8, opset(onnxDomainML, onnxMLOpset))
	model = appendMessage(model, 8, opset("", onnxOpset))
	for _, kv := range [][2]string{
		{"features", strings.Join(m.Features, ",")},
		{"bands", strings.Join(m.Bands, ",")},
		{"reflectance", fmt.Sprintf("DN × %g + %g", m.Scale, m.Offset)},
		{"config_sha256", m.ConfigHash},
	} {
		var e []byte
		e = appendString(e, 1, kv[0])
		e = appendString(e, 2, kv[1])
		model = appendMessage(model, 14, e) // metadata_props
	}
	return model, nil
}

// ensemble is a TreeEnsembleClassifier's attributes: one entry per node
// (nodes_*), one per nonzero class weight of a leaf (class_*).
type ensemble struct {
	treeIDs, nodeIDs, featureIDs, trueIDs, falseIDs, missing []int64
	values                                                   []float32
	modes                                                    []string
	classTree, classNode, classID                            []int64
	weights                                                  []float32
	labels                                                   []int64
}

// newEnsemble translates the model's trees (see ONNX).
func newEnsemble(m *forest.Model) (*ensemble, error) {
	f := m.Forest
	e := &ensemble{}
	inv := 1 / float32(len(f.Trees))
	for ti, t := range f.Trees {
		for n := range t.Feature {
			e.treeIDs, e.nodeIDs = append(e.treeIDs, int64(ti)), append(e.nodeIDs, int64(n))
			if t.Feature[n] < 0 {
				e.modes = append(e.modes, "LEAF")
				e.featureIDs, e.values = append(e.featureIDs, 0), append(e.values, 0)
				e.trueIDs, e.falseIDs, e.missing = append(e.trueIDs, 0), append(e.falseIDs, 0), append(e.missing, 0)
				p := t.Probs[int(t.Leaf[n])*f.Classes:][:f.Classes]
				for c, v := range p {
					if v != 0 {
						e.classTree, e.classNode, e.classID = append(e.classTree, int64(ti)), append(e.classNode, int64(n)), append(e.classID, int64(c))
						e.weights = append(e.weights, v*inv)
					}
				}
				continue
			}
			ft := int(t.Feature[n])
			if ft >= len(m.Bins.Edges) {
				return nil, fmt.Errorf("onnx: tree %d node %d splits feature %d of %d", ti, n, ft, len(m.Bins.Edges))
			}
			mode, v := threshold(m.Bins.Edges[ft], int(t.Bin[n]))
			e.modes, e.values = append(e.modes, mode), append(e.values, v)
			e.featureIDs = append(e.featureIDs, int64(ft))
			e.trueIDs, e.falseIDs, e.missing = append(e.trueIDs, int64(t.Left[n])), append(e.falseIDs, int64(t.Right[n])), append(e.missing, 1)
		}
	}
	for _, c := range m.Classes {
		e.labels = append(e.labels, int64(c.Code))
	}
	return e, nil
}

// node is the ensemble as a TreeEnsembleClassifier NodeProto.
func (e *ensemble) node() []byte {
	var node []byte
	node = appendString(node, 1, onnxInputName)
	node = appendString(node, 2, onnxLabelName)
	node = appendString(node, 2, onnxProbability)
	node = appendString(node, 3, "forest")
	node = appendString(node, 4, "TreeEnsembleClassifier")
	for _, a := range [][]byte{
		intsAttr("classlabels_int64s", e.labels),
		intsAttr("class_treeids", e.classTree), intsAttr("class_nodeids", e.classNode), intsAttr("class_ids", e.classID),
		floatsAttr("class_weights", e.weights),
		intsAttr("nodes_treeids", e.treeIDs), intsAttr("nodes_nodeids", e.nodeIDs), intsAttr("nodes_featureids", e.featureIDs),
		floatsAttr("nodes_values", e.values), stringsAttr("nodes_modes", e.modes),
		intsAttr("nodes_truenodeids", e.trueIDs), intsAttr("nodes_falsenodeids", e.falseIDs),
		intsAttr("nodes_missing_value_tracks_true", e.missing),
		stringAttr("post_transform", "NONE"),
	} {
		node = appendMessage(node, 5, a)
	}
	return appendString(node, 7, onnxDomainML)
}

// threshold is the comparison a split on bin code ≤ t makes of the raw
// value, given the feature's bin edges (forest.Bins.Code: NaN is code 0,
// v is 1 + the index of the first edge ≥ v).
func threshold(edges []float32, t int) (string, float32) {
	switch {
	case t == 0:
		return "BRANCH_LT", float32(math.Inf(-1))
	case t <= len(edges):
		return "BRANCH_LEQ", edges[t-1]
	default:
		return "BRANCH_LEQ", float32(math.Inf(1))
	}
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendMessage(b []byte, field protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func opset(domain string, version int64) []byte {
	var b []byte
	b = appendString(b, 1, domain)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(version))
}

// valueInfo is a tensor's ValueInfoProto: elem type, a symbolic first
// dimension and, when cols ≥ 0, a second.
func valueInfo(name string, elem int, rows string, cols int) []byte {
	var dims []byte
	var d []byte
	d = appendString(d, 2, rows) // dim_param
	dims = appendMessage(dims, 1, d)
	if cols >= 0 {
		d = protowire.AppendTag(nil, 1, protowire.VarintType) // dim_value
		d = protowire.AppendVarint(d, uint64(cols))
		dims = appendMessage(dims, 1, d)
	}
	var tensor []byte
	tensor = protowire.AppendTag(tensor, 1, protowire.VarintType) // elem_type
	tensor = protowire.AppendVarint(tensor, uint64(elem))
	tensor = appendMessage(tensor, 2, dims) // shape
	typ := appendMessage(nil, 1, tensor)    // tensor_type
	var v []byte
	v = appendString(v, 1, name)
	return appendMessage(v, 2, typ)
}

func attrHead(name string, typ int) []byte {
	b := appendString(nil, 1, name)
	b = protowire.AppendTag(b, 20, protowire.VarintType) // type
	return protowire.AppendVarint(b, uint64(typ))
}

func intsAttr(name string, v []int64) []byte {
	b := attrHead(name, attrInts)
	var packed []byte
	for _, x := range v {
		packed = protowire.AppendVarint(packed, uint64(x))
	}
	return appendMessage(b, 8, packed)
}

func floatsAttr(name string, v []float32) []byte {
	b := attrHead(name, attrFloats)
	var packed []byte
	for _, x := range v {
		packed = protowire.AppendFixed32(packed, math.Float32bits(x))
	}
	return appendMessage(b, 7, packed)
}

func stringsAttr(name string, v []string) []byte {
	b := attrHead(name, attrStrings)
	for _, s := range v {
		b = appendString(b, 9, s)
	}
	return b
}

func stringAttr(name, v string) []byte {
	b := attrHead(name, attrString)
	return appendString(b, 4, v)
}
