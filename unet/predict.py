"""Map a whole chips tile with a trained U-Net; write class indices for `lulc import classes`.

Overlapping windows are blended: each window's softmax probabilities are
weighted by a 2-D Hann window and summed, and each pixel takes the class
of the largest sum, so the seams between windows do not show.

    python3 unet/predict.py --model MODEL_DIR --chips CHIPS --tile T --out pred/T.npy
"""

import argparse
import json
import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    print("error: PyTorch is not installed: on Debian `apt-get install python3-torch`, "
          "elsewhere `pip install torch`", file=sys.stderr)
    sys.exit(2)

import torch.nn.functional as F

import unet


def parse_args():
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model directory (train.py --out)")
    p.add_argument("--chips", required=True, help="chips directory holding the tile")
    p.add_argument("--tile", required=True, help="tile name in chips.json")
    p.add_argument("--out", required=True, help="prediction .npy to write (and its .json beside it)")
    p.add_argument("--window", type=int, default=256, help="window side in pixels")
    p.add_argument("--overlap", type=int, default=64, help="pixels shared by neighbouring windows")
    p.add_argument("--batch", type=int, default=8, help="windows per forward pass")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (CUDA only)")
    return p.parse_args()


def starts(n, window, step):
    """Window origins along an axis of n pixels: every step, the last moved back to end at the edge."""
    if n <= window:
        return [0]
    return list(range(0, n - window, step)) + [n - window]


def hann(window):
    """2-D Hann weights, floored so that a tile's edge pixels (seen by one window only) still count."""
    w = np.sin(np.pi * (np.arange(window) + 0.5) / window) ** 2
    w = np.maximum(w, 1e-3).astype(np.float32)
    return np.outer(w, w)


def load(args):
    """Check every input; return (model info, tile planes, tile entry). Refusals exit 2."""
    if args.window <= args.overlap:
        unet.fail(f"--window {args.window} must be larger than --overlap {args.overlap}")
    if args.overlap < 0 or args.batch < 1:
        unet.fail("--overlap must be >= 0 and --batch >= 1")
    info = unet.read_json(os.path.join(args.model, "model.json"))
    if info.get("format") != "lulc-unet/1":
        unet.fail(f"{args.model}/model.json is not a lulc-unet/1 model (format {info.get('format')!r})")
    meta = unet.read_json(os.path.join(args.chips, "chips.json"))
    if info["planes"] != meta["planes"]:
        unet.fail(f"the model's planes differ from the chips' planes:\n  model: {info['planes']}\n"
                  f"  chips: {meta['planes']}")
    codes = [[c.get("code"), c.get("name")] for c in info["classes"]]
    if codes != [[c.get("code"), c.get("name")] for c in meta["classes"]]:
        unet.fail(f"the model's classes differ from the chips' classes: model {info['classes']}, "
                  f"chips {meta['classes']}")
    tiles = {t["name"]: t for t in meta.get("tiles", [])}
    if args.tile not in tiles:
        unet.fail(f"tile {args.tile!r} is not in {args.chips}/chips.json (tiles: {sorted(tiles)})")
    entry = tiles[args.tile]
    rel = entry.get("planes")
    rel = rel if isinstance(rel, str) else os.path.join("tiles", f"{args.tile}.npy")
    if not os.path.isfile(os.path.join(args.model, "model.pt")):
        unet.fail(f"missing file: {os.path.join(args.model, 'model.pt')}")
    x = unet.load_npy(os.path.join(args.chips, rel))
    if x.ndim != 3 or x.shape[0] != len(meta["planes"]):
        unet.fail(f"{rel} has shape {x.shape}, expected [{len(meta['planes'])}, H, W]")
    if "height" in entry and (entry["height"], entry["width"]) != x.shape[1:]:
        unet.fail(f"{rel} is {x.shape[1:]} but chips.json says {entry['height']}x{entry['width']}")
    return info, x


def predict(model, x, info, args, dev):
    """Class indices uint8 [H, W] (1…K, 0 where every plane is NaN) for tile planes x [C, H, W].

    Windows are taken a row band at a time into a buffer one window high,
    and rows no later band reaches are finalised, so memory is
    K × window × W floats rather than K × H × W.
    """
    _, h, w = x.shape
    win, k = args.window, len(info["classes"])
    mean, std = info["normalisation"]["mean"], info["normalisation"]["std"]
    weight = torch.from_numpy(hann(win)).to(dev)
    out = np.zeros((h, w), np.uint8)
    allnan = np.zeros((h, w), bool)
    buf = torch.zeros((k, win, w), device=dev)
    top = 0  # the tile row buf[:, 0] holds

    def finalise(rows):
        nonlocal buf, top
        out[top:top + rows] = (buf[:, :rows].argmax(0) + 1).to(torch.uint8).cpu().numpy()
        buf = torch.cat([buf[:, rows:], torch.zeros((k, rows, w), device=dev)], dim=1)
        top += rows

    step = win - args.overlap
    xs = starts(w, win, step)
    mean_t = torch.tensor(mean, dtype=torch.float32, device=dev).reshape(-1, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32, device=dev).reshape(-1, 1, 1)
    for y0 in starts(h, win, step):
        finalise(y0 - top)  # now buf[:, 0] is row y0
        hh = min(win, h - y0)
        # The band of rows is read once, normalised on the device and
        # zero-padded to a whole window (a tile smaller than the window).
        raw = torch.from_numpy(np.ascontiguousarray(x[:, y0:y0 + hh, :])).to(dev)
        allnan[y0:y0 + hh] = torch.isnan(raw).all(0).cpu().numpy()
        z = torch.nan_to_num((raw - mean_t) / std_t, nan=0.0, posinf=0.0, neginf=0.0)
        z = F.pad(z, (0, max(0, win - w), 0, win - hh))
        for i in range(0, len(xs), args.batch):
            group = xs[i:i + args.batch]
            xb = torch.stack([z[:, :, x0:x0 + win] for x0 in group])
            with torch.no_grad(), unet.autocast(dev, args.bf16):
                logits = model(xb)
            prob = torch.softmax(logits.float(), dim=1) * weight
            for j, x0 in enumerate(group):
                ww = min(win, w - x0)
                buf[:, :hh, x0:x0 + ww] += prob[j, :, :hh, :ww]
    finalise(h - top)
    out[allnan] = 0
    return out


def main():
    """Check the inputs, map the tile, write PRED.npy and PRED.json."""
    args = parse_args()
    info, x = load(args)
    dev = unet.pick_device(args.device)
    model = unet.UNet(len(info["planes"]), len(info["classes"]), info["base"])
    model.load_state_dict(torch.load(os.path.join(args.model, "model.pt"), map_location="cpu"))
    model.to(dev).eval()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    pred = predict(model, x, info, args, dev)
    wall = time.perf_counter() - t0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.save(args.out, pred)
    report = {
        "tile": args.tile,
        "height": int(pred.shape[0]),
        "width": int(pred.shape[1]),
        "window": args.window,
        "overlap": args.overlap,
        "seconds": wall,
        "pixels_per_s": pred.size / wall if wall else None,
        "device": unet.device_name(dev),
        "bf16": bool(args.bf16 and dev.type == "cuda"),
        "peak_gpu_memory_bytes": unet.peak_memory(dev),
        "torch": torch.__version__,
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"unet: {args.tile} {pred.shape[0]}x{pred.shape[1]} on {report['device']} in {wall:.2f} s "
          f"({report['pixels_per_s'] or 0:,.0f} px/s) -> {args.out}")


if __name__ == "__main__":
    main()
