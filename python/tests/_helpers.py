"""Shared helpers of the Python tests: a plain safetensors reader/writer (so the
tests do not check the library with itself), the CLI, bit comparisons."""
import json
import os
import struct
import subprocess

import ml_dtypes
import numpy as np
import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLI = os.environ.get("NVFP4_CLI", os.path.join(REPO, "build", "nvfp4"))
GOLDEN = os.path.join(REPO, "tests", "golden", "comfy-kitchen")

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
ST_DTYPES = {"BF16": BF16, "F16": np.dtype(np.float16), "F32": np.dtype(np.float32),
             "U8": np.dtype(np.uint8), "F8_E4M3": E4M3}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def st_read(path):
    """{name: np.ndarray} of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        arr = np.frombuffer(data[base + lo:base + hi], dtype=ST_DTYPES[e["dtype"]])
        out[name] = arr.reshape(e["shape"]).copy()
    return out


def st_write(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        raw = arr.tobytes()
        header[name] = {"dtype": ST_NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def cli(*args):
    if not os.path.exists(CLI):
        pytest.fail(f"{CLI} not built (make)")
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"nvfp4 {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


def to_numpy(x):
    """NumPy view of an array or a CPU/CUDA torch tensor (bit-preserving)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    import torch
    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(BF16)
    if x.dtype == torch.float8_e4m3fn:
        return x.view(torch.uint8).numpy()
    return x.numpy()


def bits(x):
    x = np.ascontiguousarray(to_numpy(x))
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def assert_bits_equal(got, want, what):
    """Every bit equal; on a mismatch name the first differing (row, col, bits)."""
    g, w = bits(got), bits(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, want {w.shape}"
    diff = np.argwhere(g != w)
    if diff.size:
        idx = tuple(diff[0])
        pytest.fail(f"{what}: {len(diff)} of {g.size} differ; first at {idx}: "
                    f"got 0x{int(g[idx]):x}, want 0x{int(w[idx]):x}")


def random_bf16(rng, rows, cols, scale=1.0):
    return (rng.standard_normal((rows, cols)) * scale).astype(np.float32).astype(BF16)


def tiled_offsets(rows, cols):
    """[rows, cols/16] byte offsets of the block scales in cuBLAS's 128x4 tiled
    layout, written out here independently of the library: 128-row x 4-column
    tiles of 512 bytes, row-major over tiles; inside, row r sits at
    (r % 32) * 16 + ((r % 128) // 32) * 4, block column cb at cb % 4."""
    r = np.arange(rows)[:, None]
    cb = np.arange(cols // 16)[None, :]
    ncb = (cols // 16 + 3) // 4 * 4
    return ((r // 128) * (ncb // 4) + cb // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + cb % 4


def tile_scales(row_major, rows, cols):
    """Row-major [rows, cols/16] E4M3 bytes -> the tiled array, padding zero."""
    tiled = np.zeros(((rows + 127) // 128 * 128, (cols // 16 + 3) // 4 * 4), dtype=np.uint8)
    tiled.reshape(-1)[tiled_offsets(rows, cols)] = row_major
    return tiled
