package onnxpb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// protoSHA256 is the checksum of ONNX 1.12.0's onnx-ml.proto (README.md).
const protoSHA256 = "35f16c52c19ba1da72240a45609129a3cf685dc44b76777e0055271e8bde1d3e"

// TestVendoredProto: the schema is still ONNX's file, unmodified.
func TestVendoredProto(t *testing.T) {
	b, err := os.ReadFile("onnx-ml.proto")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != protoSHA256 {
		t.Errorf("onnx-ml.proto has SHA-256 %x, ONNX 1.12.0's is %s: the vendored schema must stay unmodified (README.md)", sum, protoSHA256)
	}
}

// TestGenerated regenerates the bindings with scripts/gen-onnx into a
// temporary directory and requires the committed onnx-ml.pb.go to be
// byte for byte what it makes. Skipped without protoc 3.21.12 (the
// script's exit status 3), which CI does not install.
func TestGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds protoc-gen-go")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc is not installed (Debian: apt-get install protobuf-compiler)")
	}
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join("..", "..", "..", "scripts", "gen-onnx"), dir).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		t.Skipf("scripts/gen-onnx: %s", bytes.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("scripts/gen-onnx: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "onnx-ml.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("onnx-ml.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("onnx-ml.pb.go is not what scripts/gen-onnx makes: run scripts/gen-onnx and commit the result")
	}
}
