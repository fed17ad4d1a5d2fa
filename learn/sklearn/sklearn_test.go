package sklearn

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/learn/forest"
)

func TestWriteNpy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.npy")
	if err := WriteNpy(path, []float32{1, 2, 3, 4, 5, 6}, []int{3, 2}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte("\x93NUMPY\x01\x00")) {
		t.Fatalf("magic %q", b[:8])
	}
	hl := int(binary.LittleEndian.Uint16(b[8:10]))
	if (10+hl)%64 != 0 || b[10+hl-1] != '\n' {
		t.Fatalf("header of %d bytes is not padded to 64 with a newline", hl)
	}
	header := string(b[10 : 10+hl])
	if !strings.Contains(header, "'descr': '<f4'") || !strings.Contains(header, "'shape': (3, 2)") {
		t.Fatalf("header %q", header)
	}
	if len(b) != 10+hl+24 || binary.LittleEndian.Uint32(b[10+hl+20:]) != 0x40c00000 { // 6.0
		t.Fatalf("data: %d bytes", len(b)-10-hl)
	}
	if err := WriteNpy(path, []uint8{1, 2}, []int{2}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), "'descr': '|u1'") || !strings.Contains(string(b), "'shape': (2,)") {
		t.Fatalf("uint8 header: %q", b[:80])
	}
}

// TestFit fits scikit-learn on two well-separated classes through the
// .npy exchange: it must learn them, and report its version. It needs
// python3 with numpy and scikit-learn.
func TestFit(t *testing.T) {
	if _, err := Python(context.Background(), ""); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	const n, nf = 400, 3
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		y[i] = uint8(i % 2)
		for f := range nf {
			x[i*nf+f] = float32(y[i])*10 + float32((i*7+f*3)%5)
		}
	}
	vx, vy := filepath.Join(dir, "vx.npy"), filepath.Join(dir, "vy.npy")
	if err := WriteNpy(vx, x, []int{n, nf}); err != nil {
		t.Fatal(err)
	}
	if err := WriteNpy(vy, y, []int{n}); err != nil {
		t.Fatal(err)
	}
	res, err := Runner{Dir: dir}.Fit(context.Background(), forest.Params{Trees: 5, MaxDepth: 4, MinSamplesLeaf: 1, Bootstrap: true, Seed: 3}, Data{x, y, nf, vx, vy})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accuracy != 1 || res.Version == "" || res.Nodes < 5 {
		t.Errorf("fit: %+v", res)
	}
	// The predictions come back one per validation row, and agree with
	// the accuracy the script reports.
	res, pred, err := Runner{Dir: dir}.FitPredict(context.Background(), forest.Params{Trees: 5, MaxDepth: 4, MinSamplesLeaf: 1, Bootstrap: true, Seed: 3}, Data{x, y, nf, vx, vy}, n)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i := range y {
		if pred[i] == y[i] {
			ok++
		}
	}
	if float64(ok)/n != res.Accuracy || ok != n {
		t.Errorf("FitPredict: %d of %d right, accuracy %v", ok, n, res.Accuracy)
	}
	if _, _, err := (Runner{Dir: dir}).FitPredict(context.Background(), forest.Params{Trees: 1, MaxDepth: 2, MinSamplesLeaf: 1}, Data{x, y, nf, vx, vy}, n+1); err == nil || !strings.Contains(err.Error(), "predictions for") {
		t.Errorf("a prediction count that is not the validation rows': %v", err)
	}
	if _, err := (Runner{Python: "/nonexistent/python3", Dir: dir}).Fit(context.Background(), forest.Params{Trees: 1, MaxDepth: 2, MinSamplesLeaf: 1}, Data{x, y, nf, vx, vy}); err == nil {
		t.Error("a missing interpreter gave no error")
	}
}
