#!/bin/sh
# probe.sh -- build (if needed) and run the sm90 accumulation probe on an H200.
#   sh tests/gpu/probe.sh [OUTDIR]        build into build/probe, run, logs in OUTDIR
#   sh tests/gpu/probe.sh --build-only    just build (on a machine with nvcc; no GPU needed)
# The C oracle (src/oracle/sm90.c) and the core helpers are compiled with gcc
# and linked into the CUDA binary.  Exit status 0 only with zero mismatches.
set -e
cd "$(dirname "$0")/../.."
B=build/probe
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build() {
    mkdir -p $B
    for f in src/core/error.c src/core/threads.c src/formats/scalars.c src/oracle/sm90.c; do
        gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -ffp-contract=off \
            -Iinclude -Isrc/core -Isrc -c $f -o $B/$(basename $f .c).o
    done
    "$NVCC" -O2 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -Iinclude -Isrc/core -Isrc \
        -c tests/gpu/probe_mma.cu -o $B/probe_mma.o
    "$NVCC" -o $B/probe_mma $B/probe_mma.o $B/error.o $B/threads.o $B/scalars.o $B/sm90.o -lpthread
}
if [ "$1" = "--build-only" ]; then build; exit 0; fi
# A binary built elsewhere may not start here (other system libraries): rebuild then.
if ! [ -x $B/probe_mma ] || ! $B/probe_mma --check >/dev/null 2>&1; then build; fi
OUT_DIR=${1:-$B}
mkdir -p "$OUT_DIR"
exec $B/probe_mma "$OUT_DIR"
