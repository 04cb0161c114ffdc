#!/bin/sh
# session20.sh -- the twentieth session's question (built without a device):
# what holds the wgmma kernel's 64x128 tile (attn-out and FC2 at M = 128)
# at ~570 cycles a chunk when one consumer warp's stream and the wgmma
# chain each fit in ~270?  Two options, each a flag set:
#   mcast      (-DNVFP4_SM90_MCAST) where both CTAs of a cluster run the
#              same activation tile through the same chunks
#              (nvfp4_sm90_plan_mcast), each loads half of every activation
#              box into both CTAs' stages: half the L2 bytes;
#   loadfirst  (-DNVFP4_SM90_LOAD_FIRST) the chunk-pair step waits for and
#              loads the next pair's codes and scales before issuing this
#              pair's wgmmas, not after (64x128 and 128x128 tiles).
# Usage: OUT=DIR [PARTS="..."] [SETS="mcast loadfirst"] [S=SET] sh dev/cuda/session20.sh BUILD
#   probe     probe_chain: the 64x128 tile's pair step in parts on one
#             warpgroup a CTA (the wgmma chain alone, the dequantization
#             alone, both, both with the loads first, and each beside a TMA
#             stream): does the dequantization overlap the chain?  Then probe_rates bcast: 84
#             CTAs reading the same 16 KiB boxes of an L2-resident 2 MiB
#             tensor (with and without 2 KiB of their own DRAM bytes a
#             chunk), plain and multicast over clusters of 2 and 4, and 132
#             CTAs: the feed alone, no MMA
#   mcast     gemm_variants against gemm_variants_X for X in SETS: attn-out
#             and FC2 at M = 64 and 128 (multicast; the 64x128 tile at 128),
#             QKV at M = 128 (stream-K, the 128x128 tile: no multicast, so
#             what mcast's branches cost, and loadfirst there), each checked
#             bit for bit, then timed
#   parts     parts left out, fixed at compile time, at attn-out and FC2 M =
#             128: the library's 64x128 tile (gemm_variants_devN; 1 no
#             dequantization, 3 copies alone, 5 the wgmma chain and its
#             barriers alone, 7 neither copies nor wgmma) and with multicast
#             (gemm_variants_mcastdev1, _mcastdev3)
#   quick     test_gemm_cuda_X --quick for X in SETS (every wgmma variant
#             forced on small shapes; where the grid is even and M <= bn
#             they multicast)
#   suites    test_gemm_cuda_S in full, test_linear_cuda_S (S: the winner)
#   checks    nvfp4_S check and --streaming-a at 128 rows (1 and 2048 run
#             neither option's code)
#   bench     nvfp4 bench --m 64,128, the library then nvfp4_S, each with
#             cuBLAS in its own run
#   sanitize  racecheck and memcheck on gemm_variants_S (attn-out M = 128)
# One call: PARTS="probe mcast parts quick" (about 450 s; `quick` can go
# with the next call if the first runs long); then, for the
# winner S, PARTS="suites checks bench sanitize" S=...  (Both winning: make
# one the default, build, and run the other's set against it.)
# The carry (dev/cuda/pack_carry.sh), this list with session19.sh's:
#   ONLY="$(echo probe_chain probe_rates gemm_variants gemm_variants_mcast gemm_variants_dev1 \
#     gemm_variants_dev3 gemm_variants_dev5 gemm_variants_dev7 gemm_variants_mcastdev1 \
#     gemm_variants_mcastdev3 test_gemm_cuda_mcast test_linear_cuda_mcast nvfp4_mcast \
#     gemm_variants_loadfirst test_gemm_cuda_loadfirst test_linear_cuda_loadfirst nvfp4_loadfirst)" \
#     sh dev/cuda/pack_carry.sh
# Offline, dev/cuda/sass_sched.py reads the kernels' schedules (docs/KERNEL.md,
# twentieth session).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-probe mcast parts quick}
SETS=${SETS:-mcast loadfirst}
S=${S:-mcast}
if has probe; then
    step probe_chain 60 "$B/gpu/probe_chain"
    grep -E "cycles a step" "$L/probe_chain.log"
    step probe_bcast 120 "$B/gpu/probe_rates" bcast
    grep -E "CTAs" "$L/probe_bcast.log"
fi
if has mcast; then
    for s in ${MCAST_SHAPES:-attn_out:128 fc2:128 attn_out:64 fc2:64 qkv:128}; do
        for prog in gemm_variants $(for a in $SETS; do echo "gemm_variants_$a"; done); do
            step_variant "$prog" "$s" 120
        done
    done
fi
if has parts; then
    for s in ${PARTS_SHAPES:-attn_out:128 fc2:128}; do
        for prog in gemm_variants_dev1 gemm_variants_dev3 gemm_variants_dev5 gemm_variants_dev7 \
            gemm_variants_mcastdev1 gemm_variants_mcastdev3; do
            [ -x "$B/gpu/$prog" ] || continue
            n=${prog##*dev}
            NVFP4_DEV_MODE=$n step "${prog}_${s%%:*}_${s##*:}" 120 "$B/gpu/$prog" ${s%%:*} ${s##*:} -1 30
            grep -E "^(OK|DEV|MISMATCH)" "$L/${prog}_${s%%:*}_${s##*:}.log" | sed "s/^/$prog /"
        done
    done
fi
if has quick; then step_quick_sets "$SETS"; fi
if has suites; then step_suites_of "$S" 300; fi
if has checks; then step_checks_of "$S" 128 200; fi
if has bench; then step_bench_vs "$S" 64,128 200 12; fi
if has sanitize; then
    step_race "race_$S" 200 "gemm_variants_$S" attn_out 128
    step_mem "mem_$S" 150 "gemm_variants_$S" attn_out 128
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L/race_$S.log" "$L/mem_$S.log" | head -n 4
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
