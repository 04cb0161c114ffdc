#!/bin/sh
# session20.sh -- the twentieth session's question (built without a device):
# is the wgmma kernel's activation feed what holds attn-out and FC2 at M =
# 128 (and 64) back, and does multicast over clusters of two lift it?
#   -DNVFP4_SM90_MCAST (flag set `mcast`): where both CTAs of a cluster run
#   the same activation tile through the same chunks (nvfp4_sm90_plan_mcast),
#   each loads half of every activation box into both CTAs' stages.
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session20.sh BUILD
#   probe     probe_chain: the 64x128 tile's pair step in parts on one
#             warpgroup a CTA (the wgmma chain alone, the dequantization
#             alone, both, and each beside a TMA stream): does the
#             dequantization overlap the chain?  Then probe_rates bcast: 84
#             CTAs reading the same 16 KiB boxes of an L2-resident 2 MiB
#             tensor (with and without 2 KiB of their own DRAM bytes a
#             chunk), plain and multicast over clusters of 2 and 4, and 132
#             CTAs: the feed alone, no MMA
#   mcast     gemm_variants against gemm_variants_mcast: attn-out and FC2 at
#             M = 64 and 128 (multicast), QKV at M = 128 (stream-K: no
#             multicast, what the option's branches cost), each checked bit
#             for bit, then timed
#   parts     parts left out, fixed at compile time, at attn-out and FC2 M =
#             128: the library's 64x128 tile (gemm_variants_devN; 1 no
#             dequantization, 3 copies alone, 5 the wgmma chain and its
#             barriers alone, 7 neither copies nor wgmma) and with multicast
#             (gemm_variants_mcastdev1, _mcastdev3)
#   quick     test_gemm_cuda_mcast --quick (every wgmma variant forced on
#             small shapes; where the grid is even and M <= bn they multicast)
#   suites    test_gemm_cuda_mcast in full, test_linear_cuda_mcast
#   checks    nvfp4_mcast check and --streaming-a at 128 rows (1 and 2048
#             run no multicast: nvfp4_sm90_plan_mcast)
#   bench     nvfp4 bench --m 64,128, the library then nvfp4_mcast, each with
#             cuBLAS in its own run
#   sanitize  racecheck and memcheck on gemm_variants_mcast (attn-out M = 128)
# One call: PARTS="probe mcast parts quick" (about 300 s); then, if
# multicast wins, PARTS="suites checks bench sanitize".
# The carry (dev/cuda/pack_carry.sh), this list with session19.sh's:
#   ONLY="$(echo probe_chain probe_rates gemm_variants gemm_variants_mcast gemm_variants_dev1 \
#     gemm_variants_dev3 gemm_variants_dev5 gemm_variants_dev7 gemm_variants_mcastdev1 \
#     gemm_variants_mcastdev3 test_gemm_cuda_mcast test_linear_cuda_mcast nvfp4_mcast)" \
#     sh dev/cuda/pack_carry.sh
# Offline, dev/cuda/sass_sched.py reads the kernels' schedules (docs/KERNEL.md,
# twentieth session).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-probe mcast parts quick}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if has probe; then
    step probe_chain 60 "$B/gpu/probe_chain"
    grep -E "cycles a step" "$L/probe_chain.log"
    step probe_bcast 120 "$B/gpu/probe_rates" bcast
    grep -E "CTAs" "$L/probe_bcast.log"
fi
if has mcast; then
    for s in ${MCAST_SHAPES:-attn_out:128 fc2:128 attn_out:64 fc2:64 qkv:128}; do
        for prog in gemm_variants gemm_variants_mcast; do
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
if has quick; then step quick_mcast 240 "$B/gpu/test_gemm_cuda_mcast" --quick; fi
if has suites; then step_suites_of mcast 300; fi
if has checks; then
    step mcast_check128 200 "$B/gpu/nvfp4_mcast" check --rows 128 --json "$L/mcast_check128.json"
    step mcast_streaming128 200 "$B/gpu/nvfp4_mcast" check --rows 128 --streaming-a --json "$L/mcast_streaming128.json"
fi
if has bench; then step_bench_vs mcast 64,128 200 12; fi
if has sanitize; then
    step_race race_mcast 200 gemm_variants_mcast attn_out 128
    step_mem mem_mcast 150 gemm_variants_mcast attn_out 128
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L"/race_mcast.log "$L"/mem_mcast.log | head -n 4
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
