// Package onnxpb is ONNX's schema as Go types: the messages of
// onnx-ml.proto (ModelProto, GraphProto, NodeProto, AttributeProto, …)
// from ONNX 1.12.0, IR version 8, with the ONNX-ML additions, generated
// by protoc-gen-go into onnx-ml.pb.go. report/interop builds lulc's
// ONNX-ML export from them and marshals it with
// google.golang.org/protobuf/proto.
//
// onnx-ml.proto is vendored unmodified (README.md says where from; ONNX's
// licence is LICENSE-Apache-2.0); scripts/gen-onnx regenerates
// onnx-ml.pb.go from it, and this package's test checks that the
// committed file is what the script makes.
package onnxpb
