"""Train a U-Net on lulc's chips (docs/chips.md) and write MODEL_DIR/model.pt and model.json.

The loss is cross-entropy over the forest's training pixels only (split 1,
labelled); validation pixels (split 2) drive early stopping, so the model is
scored on exactly the pixels the random forest is.

    python3 unet/train.py --chips CHIPS --out MODEL_DIR [--epochs 50] [--patience 5]
"""

import argparse
import json
import math
import os
import random
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

IGNORE = -100  # target of pixels the loss skips (cross_entropy's default ignore_index)
CHUNK = 64  # chips read at a time when scanning the memory-mapped arrays


def parse_args():
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chips", required=True, help="chips directory (lulc export chips)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--patience", type=int, default=5, help="epochs without a better validation loss before stopping")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--base", type=int, default=32, help="width of the first level")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimiser steps in all (CI)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (CUDA only)")
    return p.parse_args()


def seed_everything(seed):
    """Fix every random source; ask for deterministic kernels where torch has them."""
    # cuBLAS is only deterministic with a fixed workspace; must be set before CUDA starts
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if hasattr(torch.backends, "cudnn"):
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    # warn_only: some CUDA backward kernels (e.g. max-pool) have no deterministic twin
    torch.use_deterministic_algorithms(True, warn_only=True)


def scan(x, y, split):
    """One pass over the chips: which hold train / validation pixels, and the planes' mean/std.

    The statistics are over training pixels (split 1) with finite values,
    accumulated in float64 chunk by chunk so the arrays stay memory-mapped.
    """
    n, c = x.shape[:2]
    s1 = np.zeros(c)
    s2 = np.zeros(c)
    cnt = np.zeros(c)
    has_train = np.zeros(n, bool)
    has_val = np.zeros(n, bool)
    for i in range(0, n, CHUNK):
        yy, ss = np.asarray(y[i:i + CHUNK]), np.asarray(split[i:i + CHUNK])
        labelled = yy > 0
        has_train[i:i + CHUNK] = ((ss == 1) & labelled).any(axis=(1, 2))
        has_val[i:i + CHUNK] = ((ss == 2) & labelled).any(axis=(1, 2))
        train = ss == 1
        if not train.any():
            continue
        xx = np.asarray(x[i:i + CHUNK])
        for p in range(c):
            v = xx[:, p][train]
            v = v[np.isfinite(v)].astype(np.float64)
            s1[p] += v.sum()
            s2[p] += (v * v).sum()
            cnt[p] += v.size
    mean = np.divide(s1, cnt, out=np.zeros(c), where=cnt > 0)
    var = np.divide(s2, cnt, out=np.ones(c), where=cnt > 0) - mean**2
    std = np.sqrt(np.maximum(var, 0))
    std[std < 1e-12] = 1.0  # a constant plane carries nothing; keep it finite
    return np.flatnonzero(has_train), np.flatnonzero(has_val), mean, std


def batch(x, y, split, idx, mean, std, keep, rng=None):
    """Read chips idx, normalise them and build targets: class − 1 where split == keep and labelled.

    With rng, each chip is rotated by a random multiple of 90° and maybe
    flipped (the same for its planes and targets).
    """
    idx = np.sort(idx)  # sorted reads of a memory map are sequential
    xb = unet.normalise(x[idx], mean, std)
    yb = np.asarray(y[idx]).astype(np.int64) - 1
    yb[(np.asarray(split[idx]) != keep) | (yb < 0)] = IGNORE
    if rng is not None:
        for j in range(len(idx)):
            k, flip = rng.integers(4), rng.integers(2)
            a, b = np.rot90(xb[j], k, axes=(1, 2)), np.rot90(yb[j], k)
            if flip:
                a, b = a[:, :, ::-1], b[:, ::-1]
            xb[j], yb[j] = a.copy(), b.copy()  # a and b are views of xb[j], yb[j]
    return torch.from_numpy(np.ascontiguousarray(xb)), torch.from_numpy(np.ascontiguousarray(yb))


def to_device(x, y, split, mean, std, dev, bf16):
    """The chips normalised and held on the GPU, when they fit in half its free memory; else None.

    Reading and normalising chips on the CPU for every batch starves a GPU
    (a few M px/s); held on the device, a batch is an index and the GPU
    runs at its own speed.
    """
    if dev.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(dev)
    dtype = torch.bfloat16 if bf16 else torch.float32
    need = x.shape[0] * x.shape[1] * x.shape[2] * x.shape[3] * (2 if bf16 else 4) + 2 * y.size
    if need > free // 2:
        return None
    xd = torch.empty(x.shape, dtype=dtype, device=dev)
    for i in range(0, x.shape[0], CHUNK):
        xd[i:i + CHUNK] = torch.from_numpy(unet.normalise(x[i:i + CHUNK], mean, std)).to(dev, dtype)
    return xd, torch.from_numpy(np.asarray(y)).to(dev), torch.from_numpy(np.asarray(split)).to(dev)


def batch_on(held, idx, keep, rng=None):
    """batch() for chips held on the device: the same chips, targets and augmentation."""
    xd, yd, sd = held
    t = torch.from_numpy(np.sort(idx)).to(xd.device)
    xb = xd[t].float()
    yb = yd[t].long() - 1
    yb[(sd[t] != keep) | (yb < 0)] = IGNORE
    if rng is not None:
        for j in range(len(idx)):
            k, flip = int(rng.integers(4)), rng.integers(2)
            a, b = torch.rot90(xb[j], k, (1, 2)), torch.rot90(yb[j], k, (0, 1))
            if flip:
                a, b = a.flip(2), b.flip(1)
            xb[j], yb[j] = a, b
    return xb, yb


def validate(model, x, y, split, idx, mean, std, args, dev, held=None):
    """Mean cross-entropy and overall accuracy over the validation pixels of chips idx."""
    model.eval()
    loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(idx), args.batch):
            if held is not None:
                xb, yb = batch_on(held, idx[i:i + args.batch], keep=2)
            else:
                xb, yb = batch(x, y, split, idx[i:i + args.batch], mean, std, keep=2)
            xb, yb = xb.to(dev), yb.to(dev)
            with unet.autocast(dev, args.bf16):
                logits = model(xb)
            logits = logits.float()
            loss += F.cross_entropy(logits, yb, ignore_index=IGNORE, reduction="sum").item()
            m = yb != IGNORE
            correct += (logits.argmax(1)[m] == yb[m]).sum().item()
            count += m.sum().item()
    model.train()
    return loss / count, correct / count


def main():
    """Train, early-stop on the validation loss, write the best model and its metadata."""
    args = parse_args()
    seed_everything(args.seed)
    meta = unet.read_json(os.path.join(args.chips, "chips.json"))
    x = unet.load_npy(os.path.join(args.chips, "x.npy"))
    y = unet.load_npy(os.path.join(args.chips, "y.npy"))
    split = unet.load_npy(os.path.join(args.chips, "split.npy"))
    planes, classes = meta["planes"], meta["classes"]
    if x.ndim != 4 or x.shape[1] != len(planes) or y.shape != x.shape[:1] + x.shape[2:] or split.shape != y.shape:
        unet.fail(f"chips arrays disagree: x {x.shape}, y {y.shape}, split {split.shape}, "
                  f"{len(planes)} planes in chips.json")
    if y.max(initial=0) > len(classes):
        unet.fail(f"y.npy holds class index {int(y.max())} but chips.json has {len(classes)} classes")

    train_idx, val_idx, mean, std = scan(x, y, split)
    if len(train_idx) == 0:
        unet.fail("no chip holds a labelled training pixel (split 1)")
    if len(val_idx) == 0:
        print("warning: no validation pixels (split 2): training all epochs, keeping the last weights",
              file=sys.stderr)

    dev = unet.pick_device(args.device)
    model = unet.UNet(len(planes), len(classes), args.base).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    held = to_device(x, y, split, mean, std, dev, args.bf16 and dev.type == "cuda")

    val_loss, val_oa, train_loss = [], [], []
    best, best_epoch, best_state, stale = math.inf, 0, None, 0
    steps, step_pixels, step_seconds = 0, 0, 0.0
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(train_idx)
        total, n = 0.0, 0
        for i in range(0, len(order), args.batch):
            if args.max_steps is not None and steps >= args.max_steps:
                break
            ts = time.perf_counter()
            if held is not None:
                xb, yb = batch_on(held, order[i:i + args.batch], keep=1, rng=rng)
            else:
                xb, yb = batch(x, y, split, order[i:i + args.batch], mean, std, keep=1, rng=rng)
            xb, yb = xb.to(dev), yb.to(dev)
            with unet.autocast(dev, args.bf16):
                logits = model(xb)
            loss = F.cross_entropy(logits.float(), yb, ignore_index=IGNORE)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + loss.item(), n + 1  # .item() also waits for the GPU, so the timing is honest
            steps += 1
            step_pixels += xb.shape[0] * xb.shape[2] * xb.shape[3]
            step_seconds += time.perf_counter() - ts
        train_loss.append(total / max(n, 1))
        if len(val_idx):
            vl, oa = validate(model, x, y, split, val_idx, mean, std, args, dev, held)
            val_loss.append(vl)
            val_oa.append(oa)
            if vl < best:
                best, best_epoch, stale = vl, epoch, 0
                best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            else:
                stale += 1
        else:
            best_epoch = epoch
        if stale >= args.patience or (args.max_steps is not None and steps >= args.max_steps):
            break
    wall = time.perf_counter() - t0
    if best_state is None:
        best_state = {k: v.detach().cpu() for k, v in model.state_dict().items()}

    os.makedirs(args.out, exist_ok=True)
    torch.save(best_state, os.path.join(args.out, "model.pt"))
    params = unet.param_count(model)
    info = {
        "format": "lulc-unet/1",
        "planes": planes,
        "classes": classes,
        "scheme": meta.get("scheme"),
        "base": args.base,
        "parameters": params,
        "normalisation": {"mean": mean.tolist(), "std": std.tolist()},
        "seed": args.seed,
        "batch": args.batch,
        "lr": args.lr,
        "bf16": bool(args.bf16 and dev.type == "cuda"),
        "train_chips": int(len(train_idx)),
        "validation_chips": int(len(val_idx)),
        "steps": steps,
        "epochs_run": len(train_loss),
        "best_epoch": best_epoch,
        "train_loss": train_loss,
        "validation_loss": val_loss,
        "validation_oa": val_oa,
        "train_seconds": wall,
        "train_pixels_per_s": step_pixels / step_seconds if step_seconds else None,
        "device": unet.device_name(dev),
        "peak_gpu_memory_bytes": unet.peak_memory(dev),
        "chips_on_device": held is not None,
        "torch": torch.__version__,
    }
    with open(os.path.join(args.out, "model.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    oa = f"{val_oa[best_epoch - 1]:.4f}" if val_oa else "n/a"
    vl = f"{val_loss[best_epoch - 1]:.4f}" if val_loss else "n/a"
    print(f"unet: {params:,} parameters on {info['device']}, {len(train_loss)} epochs ({steps} steps), "
          f"best epoch {best_epoch}: validation OA {oa} loss {vl}, {wall:.1f} s, "
          f"{info['train_pixels_per_s'] or 0:,.0f} px/s -> {args.out}")


if __name__ == "__main__":
    main()
