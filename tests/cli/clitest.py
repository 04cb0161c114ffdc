"""What the CLI test scripts share (standard library only): counting checks,
running the command the way a user does, and a small independent safetensors
reader and writer.  Each script ends with summary(), the closing line
tests/cli/run.sh adds up."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

NVFP4 = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/nvfp4")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
counts = {"passed": 0, "failed": 0, "skipped": 0}


def check(cond, what):
    if cond:
        counts["passed"] += 1
    else:
        counts["failed"] += 1
        print("FAIL:", what)
    return bool(cond)


def skip(reason):
    """A check this machine cannot make: counted and said, never passed."""
    counts["skipped"] += 1
    print("SKIP:", reason)


def summary(name):
    """The closing line; the exit status for sys.exit."""
    print(f"cli {name}: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    return 1 if counts["failed"] or not counts["passed"] else 0


def run_cases(name, cases, prefix):
    """cases(tmp) in a temporary directory removed afterwards; the closing line."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        cases(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary(name)


def run(*args, env=None, timeout=None):
    """(exit status, stdout, stderr) of `nvfp4 ARGS`; progress lines off."""
    e = dict(os.environ)
    e["NVFP4_NO_PROGRESS"] = "1"
    if env:
        e.update(env)
    try:
        p = subprocess.run([NVFP4, *map(str, args)], capture_output=True, text=True, env=e,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1000, "", f"timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def write_st(path, tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    """({name: (dtype, shape, bytes)}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
           for k, v in header.items()}
    return out, meta


def bf16(vals):
    """BF16 bytes of Python floats (truncated: exact for values that are BF16)."""
    return b"".join(struct.pack("<f", v)[2:] for v in vals)


def f32(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


def floats(dtype, data):
    """Python floats of BF16 / F32 bytes."""
    if dtype == "F32":
        return list(struct.unpack(f"<{len(data) // 4}f", data))
    return [struct.unpack("<f", b"\0\0" + data[i:i + 2])[0] for i in range(0, len(data), 2)]
