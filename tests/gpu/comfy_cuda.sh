#!/bin/sh
# comfy_cuda.sh OUT -- on the H200: measure the fast-math instructions of comfy-kitchen's compiled
# quantize_nvfp4 (tests/gpu/probe_fastmath.cu) and make golden vectors with that kernel
# (tools/comfy_cuda_golden.py), then pack everything into OUT/comfy_cuda.tar.gz.
# Needs: nvcc, python3.12 with torch (CUDA), and the wheel at
# .whl/comfy_kitchen-0.2.40-*.whl or .whl/comfy_site.tar.xz (installed into a private
# directory, never system-wide).
# Contents of the tarball:
#   probe/probe_fastmath.txt, probe/rcp_table.bin, probe/rcp_exceptions.txt [, probe/rcp_diff_list.txt]
#   golden/*.safetensors (tests/golden/comfy-kitchen-cuda/ format), logs/*.log
# Exit status 0 when the probe's models all matched and the golden tool succeeded.
cd "$(dirname "$0")/../.." || exit 2
OUT=${1:?usage: sh tests/gpu/comfy_cuda.sh OUTDIR}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/comfy_cuda.XXXXXX)
mkdir -p "$W/probe" "$W/golden" "$W/logs" build/gpu
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=$(command -v python3.12 || command -v python3)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$W/logs/gpu.log" 2>&1

probe_rc=9
if "$NVCC" -O2 -gencode=arch=compute_90a,code=sm_90a -o build/gpu/probe_fastmath \
        tests/gpu/probe_fastmath.cu > "$W/logs/probe_build.log" 2>&1; then
    timeout 150 build/gpu/probe_fastmath "$W/probe" > "$W/logs/probe.log" 2>&1
    probe_rc=$?
else
    echo "probe_fastmath: build failed" >> "$W/logs/probe.log"
fi

golden_rc=9
SITE=$W/site
WHL=$(ls .whl/comfy_kitchen-0.2.40-*.whl 2>/dev/null | head -n 1)
# A smaller carry: the wheel's files without its HIP backend, as .whl/comfy_site.tar.xz
# (made with: unzip WHEEL; rm -r comfy_kitchen/backends/hip; tar cJf comfy_site.tar.xz comfy_kitchen*)
if [ -f .whl/comfy_site.tar.xz ] && mkdir -p "$SITE" && tar xJf .whl/comfy_site.tar.xz -C "$SITE" \
        > "$W/logs/pip.log" 2>&1; then
    PYTHONPATH=$SITE timeout 150 "$PY" tools/comfy_cuda_golden.py "$W/golden" > "$W/logs/golden.log" 2>&1
    golden_rc=$?
elif [ -n "$WHL" ] && "$PY" -m pip install --no-index --no-deps --target "$SITE" "$WHL" \
        > "$W/logs/pip.log" 2>&1; then
    PYTHONPATH=$SITE timeout 150 "$PY" tools/comfy_cuda_golden.py "$W/golden" > "$W/logs/golden.log" 2>&1
    golden_rc=$?
else
    echo "comfy_cuda_golden: wheel missing (.whl/comfy_kitchen-0.2.40-*.whl) or pip failed" >> "$W/logs/golden.log"
fi
rm -rf "$SITE"

tar czf "$OUT/comfy_cuda.tar.gz" -C "$W" probe golden logs
echo "== probe_fastmath (exit $probe_rc)"
grep -v '^  in 0x' "$W/logs/probe.log" | head -n 60
echo "== comfy_cuda_golden (exit $golden_rc)"
tail -n 60 "$W/logs/golden.log"
echo "== $OUT/comfy_cuda.tar.gz: $(du -h "$OUT/comfy_cuda.tar.gz" | cut -f1)"
rm -rf "$W"
[ $probe_rc -eq 0 ] && [ $golden_rc -eq 0 ]
