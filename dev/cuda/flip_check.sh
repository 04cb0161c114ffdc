#!/bin/sh
# flip_check.sh -- are the library's H200 kernels, byte for byte, those of an
# alternative build (tests/gpu/gpu.mk, flag set SET)?
#   sh dev/cuda/flip_check.sh [SET]          (default: all)
# Compiles src/cuda/sm90_gemm.cu and src/cuda/sm90_quantize.cu to cubins with
# the library's device flags, and again with SET's (ALT_FLAGS_SET, and
# ALT_QFLAGS_SET where SET has them), then compares each pair's .text sections
# (dev/cuda/elf_sections.py: one per kernel).  Exit status 0 when every
# kernel is identical.  Before the options are the default this says how many
# kernels they change; after SET's options are made the default, 0 means
# that SET's programs measured on the H200 (nvfp4_SET bench and check,
# test_gemm_cuda_SET, gemm_variants_SET) ran the library's kernels.
# Host code (a launch rule such as NVFP4_Q_COOP's) is not in a cubin: that
# part of a flip is read in the diff.
set -eu
SET=${1:-all}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
T=${TMPDIR:-/tmp}/flip_check.$$
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
flags=$(make -s -f tests/gpu/gpu.mk alt-flags-"$SET")
gflags=$(echo "$flags" | sed -n 1p)
qflags=$(echo "$flags" | sed -n 2p)
if [ -z "$gflags" ]; then
    echo "flip_check: tests/gpu/gpu.mk has no flag set '$SET'" >&2
    exit 2
fi
# the device side of the library's NVCCFLAGS (host-only flags do not reach a cubin)
base="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -fmad=false -Iinclude -Isrc/core -Isrc -lineinfo"
rc=0
for src in sm90_gemm sm90_quantize; do
    if [ "$src" = sm90_gemm ]; then alt=$gflags; else alt=$qflags; fi
    if [ -z "$alt" ]; then
        echo "flip_check: $src.cu: not in set $SET (the library's object is used)"
        continue
    fi
    # (ptxas's performance notes are not this script's business; errors are)
    # shellcheck disable=SC2086 # flag lists split on purpose
    "$NVCC" $base -cubin -o "$T/lib.cubin" "src/cuda/$src.cu" 2>"$T/err" || { cat "$T/err" >&2; exit 2; }
    # shellcheck disable=SC2086
    "$NVCC" $base $alt -cubin -o "$T/alt.cubin" "src/cuda/$src.cu" 2>"$T/err" || { cat "$T/err" >&2; exit 2; }
    echo "flip_check: $src.cu, the library against set $SET:"
    python3 "$(dirname "$0")/elf_sections.py" "$T/lib.cubin" "$T/alt.cubin" || rc=1
done
exit $rc
