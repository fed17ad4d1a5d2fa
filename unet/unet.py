"""A standard U-Net for lulc's chips, and helpers shared by train.py and predict.py.

The network: four levels of down-sampling (widths base, 2·base, 4·base,
8·base, bottleneck 16·base), each block two 3×3 conv-BN-ReLU, 2×2 max-pool
down, 2×2 transposed conv up, skip connections concatenated, a 1×1 conv to
K class logits. Inputs of any size are padded to a multiple of 16 and the
logits cropped back, so a window or chip need not be a power of two.
"""

import contextlib
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

LEVELS = 4  # pools; the input side must be a multiple of 2**LEVELS (padded if not)


def block(cin, cout):
    """Two 3×3 conv-BN-ReLU; the convs have no bias because BN adds one."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """U-Net mapping [B, planes, H, W] to class logits [B, classes, H, W]."""

    def __init__(self, planes, classes, base=32):
        super().__init__()
        widths = [base * 2**i for i in range(LEVELS + 1)]  # 32, 64, 128, 256, 512
        self.down = nn.ModuleList()
        cin = planes
        for w in widths[:-1]:
            self.down.append(block(cin, w))
            cin = w
        self.bottom = block(widths[-2], widths[-1])
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(2 * w, w, 2, stride=2))
            self.dec.append(block(2 * w, w))  # upsampled + skip, concatenated
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        h, w = x.shape[-2:]
        m = 2**LEVELS
        ph, pw = (-h) % m, (-w) % m
        if ph or pw:
            x = F.pad(x, (0, pw, 0, ph))  # zeros = the planes' means after normalising
        skips = []
        for enc in self.down:
            x = enc(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)[..., :h, :w]


def param_count(model):
    """The number of trainable parameters of a model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fail(msg):
    """Print an error and exit with status 2 (a refusal, as argparse does)."""
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_json(path):
    """Read a JSON file, refusing with exit 2 if it is missing."""
    if not os.path.isfile(path):
        fail(f"missing file: {path}")
    with open(path) as f:
        return json.load(f)


def load_npy(path):
    """Memory-map a .npy file, refusing with exit 2 if it is missing."""
    if not os.path.isfile(path):
        fail(f"missing file: {path}")
    return np.load(path, mmap_mode="r")


def normalise(x, mean, std):
    """Standardise planes (axis -3) by the training means/stds, then NaN/inf → 0.

    Zero after normalising is the plane's training mean, the most neutral
    value to give a pixel with no observation.
    """
    shape = (-1, 1, 1)
    z = (np.asarray(x, dtype=np.float32) - np.asarray(mean, np.float32).reshape(shape)) / np.asarray(
        std, np.float32).reshape(shape)
    return np.where(np.isfinite(z), z, np.float32(0)).astype(np.float32, copy=False)


def pick_device(name):
    """Resolve --device auto|cpu|cuda to a torch.device, refusing cuda when absent."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        fail("--device cuda but torch sees no CUDA device")
    return torch.device(name)


def device_name(dev):
    """A human name for the device: the GPU's model or "cpu"."""
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"


def autocast(dev, bf16):
    """bfloat16 autocast on CUDA when asked, else a no-op context.

    Off CUDA no autocast object is made at all: torch 1.13's probes CUDA
    even when disabled, which fails on a CPU-only build.
    """
    if bf16 and dev.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def peak_memory(dev):
    """Peak bytes of GPU memory allocated by torch, or None on the CPU."""
    return int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None


if __name__ == "__main__":
    # python3 unet/unet.py [planes classes base]: print the parameter count
    c, k, b = (int(a) for a in (sys.argv[1:4] if len(sys.argv) >= 4 else (20, 11, 32)))
    print(f"U-Net planes={c} classes={k} base={b}: {param_count(UNet(c, k, b)):,} parameters")
