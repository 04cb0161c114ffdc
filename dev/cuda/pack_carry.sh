#!/bin/sh
# pack_carry.sh -- the binaries a device call runs, packed for the lent H200
# (which has no registry and only the CUDA driver and toolkit):
#   [ONLY="PROG ..."] sh dev/cuda/pack_carry.sh [BUILD]       (default build)
# builds the library, the nvfp4 command, the GPU programs (make gpu-tests),
# the kernel options and the parts-left-out builds (tests/gpu/gpu.mk alts
# dev-fixed; with ONLY, just the programs it names), then writes .carry/carry.tar.xz: BUILD's nvfp4 and gpu/ under
# t/, at most 64 MiB (a call's carry limit).  On the device:
#   tar xJf .carry/carry.tar.xz -C .carry && OUT=$OUT PARTS="..." \
#     sh dev/cuda/session16.sh .carry/t/build
# with carry [".carry"] (tests/gpu/*.sh and dev/cuda/*.sh come with the
# working tree).
set -eu
B=${1:-build}
J=${JOBS:-8}
make -j"$J" BUILD="$B" >/dev/null
make -j"$J" BUILD="$B" gpu-tests >/dev/null
# with ONLY, just those programs (each option's library is its own compile
# of sm90_gemm.cu, about a minute on 2 cores: all of them half an hour)
if [ -n "${ONLY:-}" ]; then
    make -j"$J" -f tests/gpu/gpu.mk BUILD="$B" $(for p in $ONLY; do echo "$B/gpu/$p"; done) >/dev/null
else
    make -j"$J" -f tests/gpu/gpu.mk BUILD="$B" alts dev-fixed >/dev/null
fi
rm -rf .carry/t && mkdir -p .carry/t/"$B"/gpu
cp "$B/nvfp4" .carry/t/"$B"/
# the programs, not their objects (ONLY="NAME ..." keeps those alone: the
# carry limit is 64 MiB and every option adds programs)
if [ -n "${ONLY:-}" ]; then
    for p in $ONLY; do cp "$B/gpu/$p" .carry/t/"$B"/gpu/; done
else
    find "$B/gpu" -maxdepth 1 -type f -perm -u+x ! -name '*.o' -exec cp {} .carry/t/"$B"/gpu/ \;
fi
# one large window: the programs share most of their bytes (50 -> 32 MB)
tar cf - -C .carry t | xz -T1 -6 --lzma2=dict=256MiB >.carry/carry.tar.xz
# only the archive travels (a call's carry counts every byte under .carry)
rm -rf .carry/t
bytes=$(wc -c <.carry/carry.tar.xz)
echo "pack_carry: .carry/carry.tar.xz $bytes bytes, $(tar tJf .carry/carry.tar.xz | grep -c "/gpu/.") programs"
if [ "$bytes" -gt $((64 * 1024 * 1024)) ]; then
    echo "pack_carry: over the 64 MiB a call may carry" >&2
    exit 1
fi
