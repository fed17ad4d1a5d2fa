// Package sklearn fits scikit-learn's RandomForestClassifier, in a python3
// child, on samples lulc drew and with lulc's forest parameters: the
// reference that lulc's forest is measured against, for accuracy (lulc
// train --compare sklearn) and speed (lulc bench forest). Arrays cross as
// NumPy .npy files.
package sklearn

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/lulc/lulc/learn/forest"
)

//go:embed sklearn_rf.py
var script []byte

// Runner says how to run scikit-learn: the interpreter (see Python), n_jobs
// (0: every CPU) and a directory for the exchanged files.
type Runner struct {
	Python string
	Jobs   int
	Dir    string
}

// Result is one fit: wall times of the fit and of the validation rows'
// prediction, the validation accuracy, the trees' node count and the
// scikit-learn version that ran.
type Result struct {
	Fit      float64 `json:"fit_seconds"`
	Predict  float64 `json:"predict_seconds"`
	Accuracy float64 `json:"accuracy"`
	Nodes    int     `json:"nodes"`
	Version  string  `json:"version"`
}

// Data is what a forest is fitted and measured on: the training rows X
// (Features values a row) with their classes Y, and the validation rows
// and classes in the .npy files ValX and ValY (WriteNpy).
type Data struct {
	X          []float32
	Y          []uint8
	Features   int
	ValX, ValY string
}

// Fit fits a forest with p's trees, depth, features per split, leaf size,
// bootstrap and seed on d's training rows and measures it on its
// validation rows.
func (r Runner) Fit(ctx context.Context, p forest.Params, d Data) (Result, error) {
	return r.fit(ctx, p, d, "")
}

// FitPredict is Fit that also returns the forest's predicted class for
// each of the n validation rows, for metrics beyond accuracy.
func (r Runner) FitPredict(ctx context.Context, p forest.Params, d Data, n int) (Result, []uint8, error) {
	pred := filepath.Join(r.Dir, "pred.u8")
	defer os.Remove(pred)
	res, err := r.fit(ctx, p, d, pred)
	if err != nil {
		return res, nil, err
	}
	out, err := os.ReadFile(pred)
	if err != nil {
		return res, nil, fmt.Errorf("sklearn: predictions: %w", err)
	}
	if len(out) != n {
		return res, nil, fmt.Errorf("sklearn: %d predictions for %d validation rows", len(out), n)
	}
	return res, out, nil
}

// fit runs the script; pred, when set, is where it writes the validation
// rows' predicted classes (one byte each).
func (r Runner) fit(ctx context.Context, p forest.Params, d Data, pred string) (Result, error) {
	x, y, nf, valX, valY := d.X, d.Y, d.Features, d.ValX, d.ValY
	tx, ty := filepath.Join(r.Dir, "train_x.npy"), filepath.Join(r.Dir, "train_y.npy")
	if err := WriteNpy(tx, x, []int{len(y), nf}); err != nil {
		return Result{}, err
	}
	if err := WriteNpy(ty, y, []int{len(y)}); err != nil {
		return Result{}, err
	}
	defer os.Remove(tx)
	defer os.Remove(ty)
	path := filepath.Join(r.Dir, "sklearn_rf.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return Result{}, err
	}
	defer os.Remove(path)
	maxFeatures := "sqrt"
	if p.MaxFeatures > 0 {
		maxFeatures = fmt.Sprint(p.MaxFeatures)
	}
	python, err := Python(ctx, r.Python)
	if err != nil {
		return Result{}, err
	}
	args := []string{path, tx, ty, valX, valY, fmt.Sprint(p.Trees), fmt.Sprint(p.MaxDepth), maxFeatures,
		fmt.Sprint(p.MinSamplesLeaf), fmt.Sprint(p.Bootstrap), fmt.Sprint(r.Jobs), fmt.Sprint(p.Seed)}
	if pred != "" {
		args = append(args, pred)
	}
	out, err := exec.CommandContext(ctx, python, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Result{}, fmt.Errorf("sklearn: %w: %s", err, strings.TrimSpace(lastLine(string(ee.Stderr))))
		}
		return Result{}, fmt.Errorf("sklearn: %w", err)
	}
	var res Result
	if err := json.Unmarshal([]byte(lastLine(string(out))), &res); err != nil {
		return Result{}, fmt.Errorf("sklearn: output %q: %w", lastLine(string(out)), err)
	}
	return res, nil
}

// Python returns the interpreter to run scikit-learn with: python when it
// is set (as given: a failure shows when it runs), else the first of
// python3 (on PATH) and /usr/bin/python3 (where Debian's python3-sklearn
// lives, even when another python3 comes first on PATH) that imports numpy
// and sklearn.
func Python(ctx context.Context, python string) (string, error) {
	if python != "" {
		return python, nil
	}
	var why []string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		out, err := exec.CommandContext(ctx, c, "-c", "import numpy, sklearn").CombinedOutput()
		if err == nil {
			return c, nil
		}
		why = append(why, fmt.Sprintf("%s: %s", c, strings.TrimSpace(lastLine(string(out)+" "+err.Error()))))
	}
	return "", fmt.Errorf("sklearn: no python with numpy and scikit-learn (%s); install python3-sklearn", strings.Join(why, "; "))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// WriteNpy writes a little-endian float32 or uint8 array as a NumPy .npy
// (format 1.0) file.
func WriteNpy[T float32 | uint8](path string, data []T, shape []int) error {
	descr := "<f4"
	if _, ok := any(data).([]uint8); ok {
		descr = "|u1"
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	// Magic (6) + version (2) + length (2) + header + '\n', padded to 64.
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(header)))
	w.WriteString(header)
	if err := binary.Write(w, binary.LittleEndian, data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
