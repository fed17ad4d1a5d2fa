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

	"google.golang.org/protobuf/proto"

	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/report/interop/onnxpb"
)

// ONNX format constants (onnx-ml.proto, the ai.onnx.ml operator set).
const (
	onnxIRVersion   = 8 // IR of ONNX 1.10+: Debian's onnx 1.12 and onnxruntime 1.30 read it
	onnxMLOpset     = 3 // ai.onnx.ml, which added *_as_tensor attributes lulc does not need
	onnxOpset       = 13
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
// order) and their first maximum is lulc's class. The model is built
// from ONNX's schema (package onnxpb) and marshalled deterministically:
// the same model and version give the same bytes.
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
	model := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(onnxIRVersion),
		ProducerName:    proto.String("lulc"),
		ProducerVersion: proto.String(version),
		Domain:          proto.String("org.lulc"),
		DocString:       proto.String("Land-cover classes from Sentinel-2 features; inputs are raw feature values (reflectance and indices)."),
		Graph: &onnxpb.GraphProto{
			Node:      []*onnxpb.NodeProto{e.node()},
			Name:      proto.String("lulc_forest"),
			DocString: proto.String(fmt.Sprintf("lulc random forest: %d trees, features %v", len(f.Trees), m.Features)),
			Input:     []*onnxpb.ValueInfoProto{valueInfo(onnxInputName, onnxpb.TensorProto_FLOAT, "N", f.Features)},
			Output: []*onnxpb.ValueInfoProto{
				valueInfo(onnxLabelName, onnxpb.TensorProto_INT64, "N", -1),
				valueInfo(onnxProbability, onnxpb.TensorProto_FLOAT, "N", f.Classes),
			},
		},
		OpsetImport: []*onnxpb.OperatorSetIdProto{
			{Domain: proto.String(onnxDomainML), Version: proto.Int64(onnxMLOpset)},
			{Domain: proto.String(""), Version: proto.Int64(onnxOpset)},
		},
	}
	for _, kv := range [][2]string{
		{"features", strings.Join(m.Features, ",")},
		{"bands", strings.Join(m.Bands, ",")},
		{"reflectance", fmt.Sprintf("DN × %g + %g", m.Scale, m.Offset)},
		{"config_sha256", m.ConfigHash},
	} {
		model.MetadataProps = append(model.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(kv[0]), Value: proto.String(kv[1])})
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("onnx: encoding the model: %w", err)
	}
	return body, nil
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
func (e *ensemble) node() *onnxpb.NodeProto {
	return &onnxpb.NodeProto{
		Input:  []string{onnxInputName},
		Output: []string{onnxLabelName, onnxProbability},
		Name:   proto.String("forest"),
		OpType: proto.String("TreeEnsembleClassifier"),
		Domain: proto.String(onnxDomainML),
		Attribute: []*onnxpb.AttributeProto{
			intsAttr("classlabels_int64s", e.labels),
			intsAttr("class_treeids", e.classTree), intsAttr("class_nodeids", e.classNode), intsAttr("class_ids", e.classID),
			floatsAttr("class_weights", e.weights),
			intsAttr("nodes_treeids", e.treeIDs), intsAttr("nodes_nodeids", e.nodeIDs), intsAttr("nodes_featureids", e.featureIDs),
			floatsAttr("nodes_values", e.values), stringsAttr("nodes_modes", e.modes),
			intsAttr("nodes_truenodeids", e.trueIDs), intsAttr("nodes_falsenodeids", e.falseIDs),
			intsAttr("nodes_missing_value_tracks_true", e.missing),
			stringAttr("post_transform", "NONE"),
		},
	}
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

// valueInfo is a tensor's ValueInfoProto: elem type, a symbolic first
// dimension and, when cols ≥ 0, a second.
func valueInfo(name string, elem onnxpb.TensorProto_DataType, rows string, cols int) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
		{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: rows}},
	}}
	if cols >= 0 {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(cols)}})
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)),
			Shape:    shape,
		}}},
	}
}

func intsAttr(name string, v []int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func floatsAttr(name string, v []float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
}

func stringsAttr(name string, v []string) *onnxpb.AttributeProto {
	a := &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum()}
	for _, s := range v {
		a.Strings = append(a.Strings, []byte(s))
	}
	return a
}

func stringAttr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}
