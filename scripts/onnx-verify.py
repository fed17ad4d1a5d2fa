#!/usr/bin/env python3
"""Checks an exported lulc model against lulc's own predictions with onnxruntime.

Usage: onnx-verify.py MODEL.onnx SAMPLES.npz

SAMPLES.npz is `lulc export samples --model M` of the same model: it holds lulc's
label and probabilities for every row. On the validation rows (split 1) the
script runs the ONNX model and prints the row count, the labels that differ
(and how many of those are exact ties in lulc's probabilities, where float32
summation order may pick either class) and the largest probability
difference. It exits 1 when a label differs outside a tie or a probability
by more than 1e-5.
"""
import sys

import numpy as np
import onnxruntime as ort


def main(model, npz):
    z = np.load(npz, allow_pickle=False)
    rows = z["split"] == 1
    x = z["features"][rows]
    want_label, want_prob = z["lulc_label"][rows], z["lulc_probability"][rows]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    label, prob = sess.run(["label", "probabilities"], {"features": x})
    diff = label != want_label
    top = np.sort(want_prob, axis=1)
    ties = diff & np.isclose(top[:, -1], top[:, -2], rtol=0, atol=1e-6)
    err = float(np.abs(prob - want_prob).max()) if len(x) else 0.0
    print(f"onnxruntime {ort.__version__}: {len(x)} validation rows, {int(diff.sum())} labels differ "
          f"({int(ties.sum())} of them ties), largest probability difference {err:.2e}")
    return 1 if int(diff.sum()) > int(ties.sum()) or err > 1e-5 else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
