"""Tests of the U-Net trainer and predictor on chips synthesised with numpy.

Run from the repository root: python3 -m unittest discover -s unet -v
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PLANES = ["B02", "B04", "B08", "noise"]
H, W, S = 64, 80, 32  # the tile and the chip side
TIMING = {"train_seconds", "train_pixels_per_s"}  # the only model.json fields allowed to differ between runs


def synth(root, planes=PLANES):
    """Write a chips dir: one tile T1 (64×80, 3 classes in 8×8 blocks, NaN pixels) and 12 chips of 32² cut from it.

    Plane c < 3 is bright where the class is c + 1, so the classes separate;
    the last plane is noise. Returns (planes [C,H,W], labels [H,W], split [H,W]).
    """
    rng = np.random.default_rng(0)
    truth = np.kron(rng.integers(1, 4, (H // 8, W // 8)), np.ones((8, 8), int))
    x = 0.05 + rng.normal(0, 0.02, (4, H, W))
    for c in range(3):
        x[c] += 0.1 * (truth == c + 1)
    x = x.astype(np.float32)
    x[0][rng.random((H, W)) < 0.03] = np.nan  # one plane missing: still predicted
    x[:, rng.random((H, W)) < 0.03] = np.nan  # every plane missing: predicted 0
    y = truth.astype(np.uint8)
    y[:8, :16] = 0  # unlabelled corner
    bi, bj = np.meshgrid(np.arange(H) // 16, np.arange(W) // 16, indexing="ij")
    split = np.where((bi + bj) % 3 == 0, 2, 1).astype(np.uint8)  # blocks: a third validation
    split[:, 40:42] = 3  # a buffer stripe
    split[60:, :] = 0  # unsampled rows

    os.makedirs(os.path.join(root, "tiles"), exist_ok=True)
    origins = [(r, c) for r in (0, 16, 32) for c in (0, 16, 32, 48)]
    np.save(os.path.join(root, "x.npy"), np.stack([x[:, r:r + S, c:c + S] for r, c in origins]))
    np.save(os.path.join(root, "y.npy"), np.stack([y[r:r + S, c:c + S] for r, c in origins]))
    np.save(os.path.join(root, "split.npy"), np.stack([split[r:r + S, c:c + S] for r, c in origins]))
    np.save(os.path.join(root, "tiles", "T1.npy"), x)
    np.save(os.path.join(root, "tiles", "T1_y.npy"), y)
    np.save(os.path.join(root, "tiles", "T1_split.npy"), split)
    meta = {
        "format": "lulc-chips/1",
        "planes": planes,
        "classes": [{"index": i + 1, "code": 10 * (i + 1), "name": n, "color": "#000000"}
                    for i, n in enumerate(["tree", "crop", "water"])],
        "scheme": "test",
        "size": S,
        "stride": 16,
        "split": {"none": 0, "train": 1, "validation": 2, "buffer": 3},
        "sampling": {"block_size": 16, "validation_fraction": 0.33, "seed": 7, "buffer": 0},
        "tiles": [{"name": "T1", "epsg": 32632, "transform": [0, 10, 0, 0, 0, -10], "width": W, "height": H,
                   "planes": "tiles/T1.npy", "labels": "tiles/T1_y.npy", "split": "tiles/T1_split.npy"}],
        "chips": [{"tile": "T1", "x": c, "y": r} for r, c in origins],
        "dropped": {},
    }
    with open(os.path.join(root, "chips.json"), "w") as f:
        json.dump(meta, f)
    return x, y, split


def read_json(path):
    """Load a JSON file."""
    with open(path) as f:
        return json.load(f)


def run(script, *args, env=None):
    """Run unet/<script> with args in a subprocess; return the CompletedProcess."""
    return subprocess.run([sys.executable, os.path.join(HERE, script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def train(chips, out):
    """A short CPU training run for CI."""
    return run("train.py", "--chips", chips, "--out", out, "--device", "cpu", "--base", 8, "--batch", 4,
               "--epochs", 20, "--patience", 20, "--max-steps", 45, "--lr", 3e-3, "--seed", 7)


class TestUNet(unittest.TestCase):
    """Train once on the synthetic chips; predict and check the refusals against that model."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.chips = os.path.join(cls.tmp.name, "chips")
        cls.x, cls.y, cls.split = synth(cls.chips)
        cls.model = os.path.join(cls.tmp.name, "model")
        cls.trained = train(cls.chips, cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.trained.returncode, 0, self.trained.stderr)

    def predict(self, *extra, model=None, chips=None, tile="T1"):
        """Run predict.py on the CPU; return (process, output path)."""
        out = os.path.join(self.tmp.name, "pred", f"{tile}-{'-'.join(map(str, extra))}.npy")
        p = run("predict.py", "--model", model or self.model, "--chips", chips or self.chips, "--tile", tile,
                "--out", out, "--device", "cpu", *extra)
        return p, out

    def test_param_count(self):
        sys.path.insert(0, HERE)
        import unet
        self.assertEqual(unet.param_count(unet.UNet(20, 11, 32)), 7_768_267)  # as stated in README.md

    def test_model_json(self):
        m = read_json(os.path.join(self.model, "model.json"))
        self.assertEqual(m["format"], "lulc-unet/1")
        self.assertEqual(m["planes"], PLANES)
        self.assertEqual([c["name"] for c in m["classes"]], ["tree", "crop", "water"])
        self.assertEqual(m["base"], 8)
        self.assertEqual(m["steps"], 45)
        self.assertEqual(len(m["normalisation"]["mean"]), 4)
        for key in ("parameters", "seed", "epochs_run", "best_epoch", "train_seconds", "train_pixels_per_s",
                    "device", "peak_gpu_memory_bytes", "torch"):
            self.assertIn(key, m)
        self.assertEqual(len(m["validation_oa"]), m["epochs_run"])
        self.assertEqual(len(m["validation_loss"]), m["epochs_run"])
        # mean of plane 0 over finite training pixels, as train.py must compute it
        chips_v = np.load(os.path.join(self.chips, "x.npy"))[:, 0]
        chips_s = np.load(os.path.join(self.chips, "split.npy"))
        v = chips_v[(chips_s == 1) & np.isfinite(chips_v)]
        self.assertAlmostEqual(m["normalisation"]["mean"][0], float(v.mean(dtype=np.float64)), places=5)
        self.assertGreater(m["validation_oa"][m["best_epoch"] - 1], 0.8)  # chance is about 1/3
        self.assertIn("unet:", self.trained.stdout)

    def test_deterministic(self):
        out = os.path.join(self.tmp.name, "model2")
        p = train(self.chips, out)
        self.assertEqual(p.returncode, 0, p.stderr)
        a, b = (read_json(os.path.join(d, "model.json")) for d in (self.model, out))
        for key in set(a) - TIMING:
            self.assertEqual(a[key], b[key], key)

    def check_prediction(self, out):
        """Shape, dtype, range, NaN → 0 and accuracy of a prediction of T1."""
        pred = np.load(out)
        self.assertEqual(pred.shape, (H, W))
        self.assertEqual(pred.dtype, np.uint8)
        allnan = np.isnan(self.x).all(axis=0)
        self.assertTrue((pred[allnan] == 0).all())
        self.assertTrue(((pred[~allnan] >= 1) & (pred[~allnan] <= 3)).all())
        scored = (self.y > 0) & ~allnan
        self.assertGreater((pred[scored] == self.y[scored]).mean(), 0.8)
        report = read_json(os.path.splitext(out)[0] + ".json")
        self.assertEqual(report["device"], "cpu")
        self.assertGreater(report["pixels_per_s"], 0)

    def test_predict_windows(self):
        p, out = self.predict("--window", 32, "--overlap", 8, "--batch", 3)  # 3×4 overlapping windows
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_prediction(out)

    def test_predict_tile_smaller_than_window(self):
        p, out = self.predict("--window", 128, "--overlap", 32)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_prediction(out)

    def test_refuse_planes(self):
        other = os.path.join(self.tmp.name, "other")
        synth(other, planes=["B02", "B03", "B08", "noise"])
        p, _ = self.predict(chips=other)
        self.assertEqual(p.returncode, 2)
        self.assertIn("planes differ", p.stderr)
        self.assertIn("'B04'", p.stderr)
        self.assertIn("'B03'", p.stderr)

    def test_refuse_unknown_tile(self):
        p, _ = self.predict(tile="T9")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'T9' is not in", p.stderr)

    def test_refuse_window(self):
        p, _ = self.predict("--window", 64, "--overlap", 64)
        self.assertEqual(p.returncode, 2)
        self.assertIn("must be larger than --overlap", p.stderr)

    def test_refuse_missing_file(self):
        p, _ = self.predict(model=os.path.join(self.tmp.name, "nowhere"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing file", p.stderr)

    def test_refuse_without_torch(self):
        # a torch module that fails to import stands in for a machine without PyTorch
        fake = os.path.join(self.tmp.name, "notorch")
        os.makedirs(fake, exist_ok=True)
        with open(os.path.join(fake, "torch.py"), "w") as f:
            f.write("raise ImportError('no torch here')\n")
        env = dict(os.environ, PYTHONPATH=fake)
        for script in ("train.py", "predict.py"):
            p = run(script, "--chips", self.chips, "--out", "x", "--model", "m", "--tile", "T1", env=env)
            self.assertEqual(p.returncode, 2, script)
            self.assertIn("apt-get install python3-torch", p.stderr)
            self.assertIn("pip install torch", p.stderr)


if __name__ == "__main__":
    unittest.main()
