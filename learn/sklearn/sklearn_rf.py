"""Fits scikit-learn's RandomForestClassifier for lulc's training benchmark.

Usage: sklearn_rf.py TRAIN_X TRAIN_Y VAL_X VAL_Y TREES MAX_DEPTH MAX_FEATURES
       MIN_SAMPLES_LEAF BOOTSTRAP JOBS SEED [PRED]

The arrays are .npy files written by lulc (package sklearn). Prints one JSON line:
the fit's and the validation prediction's wall times, the validation accuracy, the
total node count and scikit-learn's version. With PRED, it also writes the
validation rows' predicted classes there, one byte each.
"""
import json
import sys
import time

import numpy as np
import sklearn
from sklearn.ensemble import RandomForestClassifier


def main(argv):
    tx, ty, vx, vy = (np.load(p) for p in argv[1:5])
    trees, depth = int(argv[5]), int(argv[6])
    max_features = argv[7] if argv[7] == "sqrt" else int(argv[7])
    leaf, bootstrap = int(argv[8]), argv[9] == "true"
    jobs, seed = int(argv[10]), int(argv[11])
    rf = RandomForestClassifier(n_estimators=trees, max_depth=depth, max_features=max_features,
                                min_samples_leaf=leaf, bootstrap=bootstrap,
                                n_jobs=jobs if jobs > 0 else -1, random_state=seed % (2**32))
    t0 = time.perf_counter()
    rf.fit(tx, ty)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = rf.predict(vx)
    predict = time.perf_counter() - t0
    acc = float((pred == vy).mean())
    if len(argv) > 12:
        pred.astype(np.uint8).tofile(argv[12])
    nodes = int(sum(e.tree_.node_count for e in rf.estimators_))
    print(json.dumps({"fit_seconds": fit, "predict_seconds": predict, "accuracy": acc, "nodes": nodes,
                      "version": sklearn.__version__}))


if __name__ == "__main__":
    main(sys.argv)
