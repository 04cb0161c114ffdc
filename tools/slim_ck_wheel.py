#!/usr/bin/env python3
"""Copy a comfy-kitchen wheel without its ROCm extension, to carry to a CUDA machine.

    python3 tools/slim_ck_wheel.py comfy_kitchen-0.2.40-cp312-abi3-*.whl build/wheels/

The HIP extension (backends/hip/_C*.so, ~150 MiB unpacked) is imported only
under a ROCm build of PyTorch; without it the wheel is about 36 MiB, small
enough to travel with the working tree to the H200 for
tests/gpu/test_python_cuda.py (which unpacks it; no pip needed).  Everything
else, the CUDA extension included, is copied unchanged.
"""
import os
import sys
import zipfile


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[2])
    src, dest_dir = sys.argv[1], sys.argv[2]
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, os.path.basename(src))
    tmp = dest + ".tmp"
    dropped = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename.startswith("comfy_kitchen/backends/hip/_C"):
                dropped += info.file_size
                continue
            zout.writestr(info, zin.read(info.filename))
    os.replace(tmp, dest)
    print(f"{dest}: {os.path.getsize(dest) / 2**20:.1f} MiB ({dropped / 2**20:.0f} MiB of HIP "
          "extension left out)")


if __name__ == "__main__":
    main()
