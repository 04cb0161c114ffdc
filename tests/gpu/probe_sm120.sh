#!/bin/sh
# probe_sm120.sh -- build (if needed) and run the sm120 accumulation probe on
# an RTX Blackwell (sm_120) or GB10 (sm_121) GPU.  We have no such GPU: this
# has never run.
#   sh tests/gpu/probe_sm120.sh [--steps N]   build into build/probe120, run, print counts
#   sh tests/gpu/probe_sm120.sh --build-only  just build (any machine with nvcc >= 12.9)
#   sh tests/gpu/probe_sm120.sh --sass        build and show the block-scaled MMA in the SASS
# The C model (src/oracle/sm120.c and what it needs) is compiled with gcc and
# linked into the CUDA binary.  Exit status 0 only with zero mismatches.
set -e
cd "$(dirname "$0")/../.."
B=${BUILD:-build}/probe120
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CC=${CC:-cc}
build() {
    mkdir -p $B
    for f in src/core/error.c src/formats/scalars.c src/oracle/sm90.c src/oracle/sm120.c; do
        $CC -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -ffp-contract=off \
            -Iinclude -Isrc/core -Isrc -c $f -o $B/$(basename $f .c).o
    done
    "$NVCC" -O2 -gencode=arch=compute_120a,code=sm_120a -gencode=arch=compute_121a,code=sm_121a \
        -Xcompiler -Wall -Iinclude -Isrc/core -Isrc -c tests/gpu/probe_sm120.cu -o $B/probe_sm120.o
    "$NVCC" -o $B/probe_sm120 $B/probe_sm120.o $B/error.o $B/scalars.o $B/sm90.o $B/sm120.o
}
case "$1" in
--build-only) build; exit 0 ;;
--sass)
    build
    CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
    "$CUOBJDUMP" -sass $B/probe_sm120 | grep -E "arch = sm_12|OMMA|MMA" ; exit 0 ;;
esac
if ! [ -x $B/probe_sm120 ] || ! $B/probe_sm120 --check >/dev/null 2>&1; then build; fi
exec $B/probe_sm120 "$@"
