# gpu.mk -- the H200 test programs (`make gpu-tests`; tests/gpu/run.sh runs them).
# Builds the CUDA library first, then links each test against it.
BUILD     ?= build
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
comma     := ,
JANSSON   := $(if $(wildcard /usr/lib/x86_64-linux-gnu/libjansson.a),-Wl$(comma)-Bstatic -ljansson -Wl$(comma)-Bdynamic,-ljansson)
GPU_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -ffp-contract=off \
              -Iinclude -Isrc/core -Isrc -Itests/unit -I$(CUDA_HOME)/include -DNVFP4_WITH_CUDA=1
# -lstdc++: nvcc's kernel launch stubs use guarded statics and exception
# tables (C++ runtime) even in CUDA C sources.
GPU_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt \
             -lstdc++ $(JANSSON) -lpthread -lm

GPU_TESTS := $(patsubst tests/gpu/%.c,$(BUILD)/gpu/%,$(wildcard tests/gpu/test_*.c))

NVCC      ?= $(CUDA_HOME)/bin/nvcc

.PHONY: all lib cli probe-fastmath probe-sm120
all: $(GPU_TESTS) $(BUILD)/gpu/cublas_explain cli

# the fast-math instruction probe (tests/gpu/comfy_cuda.sh runs it); standalone
probe-fastmath: $(BUILD)/gpu/probe_fastmath
$(BUILD)/gpu/probe_fastmath: tests/gpu/probe_fastmath.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -gencode=arch=compute_90a,code=sm_90a -o $@ $<

lib:
	@$(MAKE) --no-print-directory -f Makefile BUILD=$(BUILD) NVFP4_CUDA=1 lib

# the nvfp4 command (for `nvfp4 bench` in run.sh); see GPU_LIBS for -lstdc++
cli: lib
	@$(MAKE) --no-print-directory -f Makefile BUILD=$(BUILD) NVFP4_CUDA=1 LDFLAGS=-lstdc++ cli

$(BUILD)/gpu/%: tests/gpu/%.c tests/unit/testlib.h lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a $(GPU_LIBS)

# dev/cuda programs (llm.c style: check against the CPU oracle, then time)
all: $(BUILD)/gpu/gemm_variants
$(BUILD)/gpu/gemm_variants: dev/cuda/gemm_variants.c dev/cuda/dev_check.h dev/cuda/dev_rand.h lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a $(GPU_LIBS)

all: $(BUILD)/gpu/inkernel_a
$(BUILD)/gpu/inkernel_a: dev/cuda/inkernel_a.c dev/cuda/dev_check.h dev/cuda/dev_rand.h lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a $(GPU_LIBS)

# dev/cuda/probe_rates: TMA, dequantization-instruction and mma.sync rates on the H200
all: $(BUILD)/gpu/probe_rates
$(BUILD)/gpu/probe_rates: dev/cuda/probe_rates.cu dev/cuda/dev_check.h dev/cuda/dev_tmap.h src/cuda/ptx.cuh lib
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -Iinclude -Isrc/core -Isrc \
	    -c -o $@.o $<
	$(CC) -o $@ $@.o $(BUILD)/libnvfp4.a $(GPU_LIBS)

# dev/cuda/probe_chain: the 64x128 tile's pair step in parts (wgmma chain,
# dequantization, a TMA stream) on the H200
all: $(BUILD)/gpu/probe_chain
$(BUILD)/gpu/probe_chain: dev/cuda/probe_chain.cu dev/cuda/dev_check.h dev/cuda/dev_tmap.h src/cuda/ptx.cuh src/cuda/sm90_internal.cuh \
                          src/cuda/sm90_wgmma.cuh lib
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -Werror all-warnings \
	    -Iinclude -Isrc/core -Isrc -c -o $@.o $<
	$(CC) -o $@ $@.o $(BUILD)/libnvfp4.a $(GPU_LIBS)

# dev/cuda/quantizer_coop: the four-lane quantizer kernel (not in the library yet), checked then timed
all: $(BUILD)/gpu/quantizer_coop
$(BUILD)/gpu/quantizer_coop: dev/cuda/quantizer_coop.cu dev/cuda/dev_check.h dev/cuda/dev_rand.h \
                             src/cuda/quantize_internal.h lib
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -fmad=false -Xcompiler -Wall -Werror all-warnings \
	    -Iinclude -Isrc/core -Isrc -c -o $@.o $<
	$(CC) -o $@ $@.o $(BUILD)/libnvfp4.a $(GPU_LIBS)

# dev/cuda/probe_table: the quantizer's threshold table -- build, load and per-block cycles, checked against the host
all: $(BUILD)/gpu/probe_table
$(BUILD)/gpu/probe_table: dev/cuda/probe_table.cu dev/cuda/dev_check.h src/cuda/quantize_internal.h src/quant/thresholds.h lib
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -fmad=false -Xcompiler -Wall -Werror all-warnings \
	    -Iinclude -Isrc/core -Isrc -c -o $@.o $<
	$(CC) -o $@ $@.o $(BUILD)/libnvfp4.a $(GPU_LIBS)

# The cuBLAS-contract proof (issue 12): cuBLAS GemmEx, nvfp4_explain, our kernel.
$(BUILD)/gpu/cublas_explain: tests/gpu/cublas_explain.c lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a -lcublas $(GPU_LIBS)

# The sm120 kernel proven on an H100 / H200 (tests/gpu/sm120_emu.sh runs it):
# src/cuda/sm120/gemm.cu built with NVFP4_SM120_EMULATE for sm_90a (the
# block-scaled MMA done by shuffles and the C rule, src/cuda/sm120/mma.cuh)
# replaces the library's sm120 object in a copy of the library; test_sm120_emu
# runs the GEMM and the linear on it against the CPU backend, probe_sm120_emu
# the probe on the emulated MMA (its layout, and its step against
# nvfp4_sm120_step).  sm120_suite is the same test on the library itself, for
# a GB10 / RTX Blackwell (tests/gpu/gb10.sh).  A test build only: the
# emulation never enters the library.
SM120_EMU_NVCC = $(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
  -Xcompiler -fvisibility=hidden -Xcompiler -Wall -Werror all-warnings -fmad=false -Iinclude -Isrc/core -Isrc \
  -DNVFP4_SM120_EMULATE
.PHONY: sm120-emu
sm120-emu: $(BUILD)/gpu/test_sm120_emu $(BUILD)/gpu/probe_sm120_emu
all: sm120-emu $(BUILD)/gpu/sm120_suite
$(BUILD)/obj/sm120emu/gemm.cu.o: src/cuda/sm120/gemm.cu src/cuda/sm120/*.h src/cuda/sm120/*.cuh src/oracle/*.h lib
	@mkdir -p $(@D)
	$(SM120_EMU_NVCC) -c $< -o $@
$(BUILD)/obj/sm120emu/libnvfp4_sm120emu.a: $(BUILD)/obj/sm120emu/gemm.cu.o lib
	cp $(BUILD)/libnvfp4.a $@
	ar d $@ gemm.cu.o
	ar rcs $@ $<
$(BUILD)/gpu/test_sm120_emu: tests/gpu/test_sm120_emu.c tests/gpu/sm120_data.h tests/unit/testlib.h \
                            $(BUILD)/obj/sm120emu/libnvfp4_sm120emu.a
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -DNVFP4_SM120_EMULATE -o $@ $< $(BUILD)/obj/sm120emu/libnvfp4_sm120emu.a $(GPU_LIBS)
$(BUILD)/gpu/sm120_suite: tests/gpu/test_sm120_emu.c tests/gpu/sm120_data.h tests/unit/testlib.h lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a $(GPU_LIBS)
# cuBLASLt's NVFP4 GEMM explained (tests/gpu/gb10.sh runs it on a GB10;
# --selftest anywhere)
all: $(BUILD)/gpu/cublaslt_nvfp4_explain
$(BUILD)/gpu/cublaslt_nvfp4_explain: tests/gpu/cublaslt_nvfp4_explain.c tests/gpu/sm120_data.h tests/unit/testlib.h lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a -lcublasLt $(GPU_LIBS)
$(BUILD)/gpu/probe_sm120_emu: tests/gpu/probe_sm120.cu src/cuda/sm120/*.h src/cuda/sm120/*.cuh src/oracle/*.h lib
	@mkdir -p $(@D)
	$(SM120_EMU_NVCC) -c -o $@.o $<
	$(CC) -o $@ $@.o $(BUILD)/libnvfp4.a $(GPU_LIBS)

# The library's sm120 kernels in SASS (CI): every kernel of each target
# (sm_120a, sm_121a) holds the block-scaled MMA, OMMA.SF ... UE4M3.4X, when a
# cuobjdump is found (else it says it could not look).
.PHONY: sm120-sass
SM120_OBJ := $(BUILD)/obj/src/cuda/sm120/gemm.cu.o
sm120-sass: lib
	@CUOBJDUMP=$${CUOBJDUMP:-$$(command -v cuobjdump || echo $(CUDA_HOME)/bin/cuobjdump)}; \
	if [ ! -x "$$CUOBJDUMP" ]; then echo "sm120-sass: built (no cuobjdump here to show the SASS)"; exit 0; fi; \
	"$$CUOBJDUMP" -sass $(SM120_OBJ) | awk ' \
	  /arch = / { arch = $$3 } \
	  /Function :/ { f = arch " " $$3; fns[f] = 0; order[++n] = f } \
	  /OMMA\.SF\.16864\.F32\.E2M1\.E2M1\.UE4M3\.4X/ { fns[f]++; total++ } \
	  END { bad = 0; archs = 0; \
	        for (i = 1; i <= n; i++) { if (fns[order[i]] == 0) { print "sm120-sass: no block-scaled MMA in " order[i]; bad++ } \
	                                   split(order[i], w, " "); seen[w[1]] = 1 } \
	        for (a in seen) archs++; \
	        printf "sm120-sass: %d kernels on %d targets, %d block-scaled MMAs (OMMA.SF.16864...UE4M3.4X)\n", n, archs, total; \
	        exit (bad > 0 || n == 0 || archs < 2) }'

# The GB10 / RTX Blackwell probe (tests/gpu/probe_sm120.cu), sm_120a + sm_121a:
# compile-only wherever nvcc can (CI); it runs only on such a GPU.  When a
# cuobjdump is found, the SASS must hold the block-scaled MMA (OMMA.SF).
probe-sm120:
	@BUILD=$(BUILD) sh tests/gpu/probe_sm120.sh --build-only
	@CUOBJDUMP=$${CUOBJDUMP:-$$(command -v cuobjdump || echo $(CUDA_HOME)/bin/cuobjdump)}; \
	if [ -x "$$CUOBJDUMP" ]; then \
	  n=$$("$$CUOBJDUMP" -sass $(BUILD)/probe120/probe_sm120 | grep -c 'OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X'); \
	  echo "probe-sm120: $$n block-scaled MMA(s) in the SASS (sm_120a, sm_121a)"; test "$$n" -ge 2; \
	else echo "probe-sm120: built (no cuobjdump here to show the SASS)"; fi

# dev/cuda/racecheck_handoff: REGR's accumulator hand-off (mbarrier, named barrier, none), for racecheck
all: $(BUILD)/gpu/racecheck_handoff
$(BUILD)/gpu/racecheck_handoff: dev/cuda/racecheck_handoff.cu dev/cuda/dev_check.h src/cuda/ptx.cuh
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -Isrc -o $@ $<

# dev/cuda/racecheck_bulk: the stage hand-off with a 1-D bulk copy or a 2-D tensor copy, for racecheck
all: $(BUILD)/gpu/racecheck_bulk
$(BUILD)/gpu/racecheck_bulk: dev/cuda/racecheck_bulk.cu dev/cuda/dev_check.h dev/cuda/dev_tmap.h src/cuda/ptx.cuh
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -Isrc -o $@ $<

# gemm_variants_dev: the same program against a library whose wgmma kernel
# honours dev_mode's "no wgmma" bit (-DNVFP4_SM90_DEV: a branch around the
# wgmmas, which the library's kernels must not carry); dev/cuda only.  Built
# by the alternative-build rules below (flag set `dev`).
all: $(BUILD)/gpu/gemm_variants_dev
ALT_FLAGS_dev := -DNVFP4_SM90_DEV

# gemm_variants_devN: the parts left out fixed at compile time
# (-DNVFP4_SM90_DEV_FIXED=N: no runtime branch, so no injected
# warpgroup.arrive; run with NVFP4_DEV_MODE=N so that the check is skipped).
# Not in `all` (a compile of sm90_gemm.cu each): make -f tests/gpu/gpu.mk dev-fixed
# (5: the wgmma chain and its barriers alone; 6: the dequantization alone)
DEV_FIXED ?= 1 2 3 4 5 6 7
$(foreach n,1 2 3 4 5 6 7,$(eval ALT_FLAGS_dev$(n) := -DNVFP4_SM90_DEV_FIXED=$(n)))
.PHONY: dev-fixed
dev-fixed: $(foreach n,$(DEV_FIXED),$(BUILD)/gpu/gemm_variants_dev$(n))

# Alternative builds: gemm_variants_X and test_gemm_cuda_X (and for the
# options, nvfp4_X and test_linear_cuda_X) link a library whose sm90_gemm.cu
# object is compiled with ALT_FLAGS_X (the dev builds above, the options
# below), and whose sm90_quantize.cu object too with ALT_QFLAGS_X where a set
# has them.
#
# Builds of the GEMM kernels with sixteenth- and seventeenth-session options
# (pair, regbal and lean the library's default since the seventeenth
# session's H200 runs; `base` below builds without them): `pair` (-DNVFP4_SM90_PAIR,
# sm90_gemm_body.cuh: wgmma groups of two chunks), `regbal`
# (-DNVFP4_SM90_REGBAL: setmaxnreg on the single-consumer wgmma tiles),
# `regstatic` (-DNVFP4_SM90_REG_STATIC, sm90_regm_body.cuh: the register
# kernels' dev_mode folded away outside dev builds), `lean`
# (-DNVFP4_SM90_LEAN, sm90_gemm_body.cuh: the bn <= 64 tiles without the
# K-slice code, which twins carry for GEMMs with slices), `all` (the four, and the four-lane
# quantizer kernel wherever each thread has at most two blocks:
# -DNVFP4_Q_COOP=2, sm90_quantize.cu); each as
# gemm_variants_ALT and test_gemm_cuda_ALT against a library whose objects
# are built so, `all` also as nvfp4_all and test_linear_cuda_all (the bench,
# the P0 checks and the fused linear's suite with every option: if all win,
# flipping the defaults gives byte-identical kernels -- dev/cuda/elf_sections.py
# says so -- and these runs are the library's), and ALT_devN (N as DEV_FIXED)
# for parts left out.
# Not in `all`: make -f tests/gpu/gpu.mk alts
# (The options' own objects compile warning-free, as the library's must;
# `alt-objs` builds just those: CI does, so that the options cannot rot.)
ALT_WERROR          := -Xcompiler -Wall -Werror all-warnings
ALT_DEFS_all        := -DNVFP4_SM90_PAIR=1 -DNVFP4_SM90_REGBAL=1 -DNVFP4_SM90_REG_STATIC=1 \
                       -DNVFP4_SM90_LEAN=1
ALT_FLAGS_pair      := -DNVFP4_SM90_PAIR=1 $(ALT_WERROR)
ALT_FLAGS_lean      := -DNVFP4_SM90_LEAN=1 $(ALT_WERROR)
ALT_FLAGS_regbal    := -DNVFP4_SM90_REGBAL=1 $(ALT_WERROR)
ALT_FLAGS_regstatic := -DNVFP4_SM90_REG_STATIC=1 $(ALT_WERROR)
ALT_FLAGS_all       := $(ALT_DEFS_all) $(ALT_WERROR)
ALT_QFLAGS_all      := -DNVFP4_Q_COOP=2 $(ALT_WERROR)
# `pick`: the seventeenth session's candidate, measured on the H200 and
# then made the library's default (sm90_gemm.cu, sm90_quantize.cu): all but
# REG_STATIC (slower on REGR), the four-lane quantizer only where the
# one-thread kernel ran (at M = 128 the table kernel measured faster).
# `pick` builds the seventeenth session's library (the eighteenth's
# named-barrier hand-off, the twenty-first's load order and the
# twenty-second's whole-chunk activation warps left out), and `base` the
# fifteenth session's (none of the options), for A/B runs against it.
ALT_FLAGS_pick      := -DNVFP4_SM90_PAIR=1 -DNVFP4_SM90_REGBAL=1 -DNVFP4_SM90_LEAN=1 -DNVFP4_SM90_NBAR=0 \
                       -DNVFP4_SM90_LOAD_FIRST=0 -DNVFP4_SM90_REGR_ACT_ROT=0 $(ALT_WERROR)
ALT_QFLAGS_pick     := -DNVFP4_Q_COOP=1 $(ALT_WERROR)
ALT_FLAGS_base      := -DNVFP4_SM90_PAIR=0 -DNVFP4_SM90_REGBAL=0 -DNVFP4_SM90_LEAN=0 -DNVFP4_SM90_NBAR=0 \
                       -DNVFP4_SM90_LOAD_FIRST=0 -DNVFP4_SM90_REGR_ACT_ROT=0 $(ALT_WERROR)
ALT_QFLAGS_base     := -DNVFP4_Q_COOP=0 $(ALT_WERROR)
# `nbar` (eighteenth session; 2 % faster at M = 1, exact, but racecheck
# reports its hand-off: docs/KERNEL.md): REGR's accumulator hand-off by named barriers
# (-DNVFP4_SM90_NBAR, sm90_regm.cuh REGR_HAND_WAIT); `nbardev` the same with
# dev_mode's REGR_DEV_NO_HAND bit; `turn2` and `nbarturn2`: REGR turns of two
# chunks (-DNVFP4_SM90_REGR_TURN=2: half the hand-offs, 128 fragment
# registers a warp; measured slower at MT = 8, where they spill)
ALT_FLAGS_nbar      := -DNVFP4_SM90_NBAR=1 $(ALT_WERROR)
ALT_FLAGS_nbardev   := -DNVFP4_SM90_NBAR=1 -DNVFP4_SM90_DEV
ALT_FLAGS_turn2     := -DNVFP4_SM90_REGR_TURN=2 $(ALT_WERROR)
ALT_FLAGS_nbarturn2 := -DNVFP4_SM90_NBAR=1 -DNVFP4_SM90_REGR_TURN=2 $(ALT_WERROR)
# Nineteenth session (built without a device: to be measured, see
# dev/cuda/session19.sh): `il`, REGR with interleaved rows where N % 128 ==
# 0 (-DNVFP4_SM90_REGR_IL, sm90_heuristics.cuh REGR_IL_STAGE_BYTES: each
# CTA loads its own rows' scales only, 14 KB stages at FC2 M = 1 instead of
# 17.5); `actrot`, REGR's activation warps taking whole chunks in turn
# (-DNVFP4_SM90_REGR_ACT_ROT=1: at every MT); `ilrot` both; `ildev`,
# `ilrotdev` with dev_mode (parts left out).  Twenty-second session (H200):
# whole chunks measured 8-9 % faster at MT = 16 (attn-out, FC2 M = 16) and
# 1 % slower at MT = 8, and are the default at MT >= 16
# (NVFP4_SM90_REGR_ACT_ROT=16); `actsplit` (=0) is the previous library's
# split, for A/B runs.  `il` and `ildev` pin the split (=0), as measured.
ALT_FLAGS_il        := -DNVFP4_SM90_REGR_IL=1 -DNVFP4_SM90_REGR_ACT_ROT=0 $(ALT_WERROR)
ALT_FLAGS_actrot    := -DNVFP4_SM90_REGR_ACT_ROT=1 $(ALT_WERROR)
ALT_FLAGS_actsplit  := -DNVFP4_SM90_REGR_ACT_ROT=0 $(ALT_WERROR)
ALT_FLAGS_ilrot     := -DNVFP4_SM90_REGR_IL=1 -DNVFP4_SM90_REGR_ACT_ROT=1 $(ALT_WERROR)
ALT_FLAGS_ildev     := -DNVFP4_SM90_REGR_IL=1 -DNVFP4_SM90_REGR_ACT_ROT=0 -DNVFP4_SM90_DEV
ALT_FLAGS_ilrotdev  := -DNVFP4_SM90_REGR_IL=1 -DNVFP4_SM90_REGR_ACT_ROT=1 -DNVFP4_SM90_DEV
# Twentieth session (built without a device; measured in the twenty-first,
# below; dev/cuda/session20.sh): `mcast`, the wgmma kernel's activation boxes
# multicast over clusters of two CTAs where both run the same activation
# tile through the same chunks (-DNVFP4_SM90_MCAST, sm90_gemm_body.cuh);
# `mcastdevN` with the parts left out fixed as devN's (1: no
# dequantization, 3: copies alone); `loadfirst`, the chunk-pair step's
# next loads issued before its wgmmas (-DNVFP4_SM90_LOAD_FIRST)
# Twenty-first session (H100): `loadfirst` measured 2.4-2.8 % faster at
# attn-out / FC2 M = 128 and made the default (its set now builds the
# library's kernels); `loadlast` (-DNVFP4_SM90_LOAD_FIRST=0) is the previous
# order, for A/B runs.  `mcast` measured 2x slower (docs/KERNEL.md).
ALT_FLAGS_mcast     := -DNVFP4_SM90_MCAST=1 $(ALT_WERROR)
ALT_FLAGS_loadfirst := -DNVFP4_SM90_LOAD_FIRST=1 $(ALT_WERROR)
ALT_FLAGS_loadlast  := -DNVFP4_SM90_LOAD_FIRST=0 $(ALT_WERROR)
ALT_FLAGS_mcastdev1 := -DNVFP4_SM90_MCAST=1 -DNVFP4_SM90_DEV_FIXED=1
ALT_FLAGS_mcastdev3 := -DNVFP4_SM90_MCAST=1 -DNVFP4_SM90_DEV_FIXED=3
# Twenty-seventh session (built without a device: to be measured, see
# dev/cuda/session27.sh): `res`, REGR at M <= 2 with resident activation
# fragments, made once per CTA, and stages of weights only
# (-DNVFP4_SM90_REGR_RES, sm90_heuristics.cuh REGR_RES_STAGE_BYTES);
# `resdev` the same with dev_mode (parts left out); `f16`, REGR reading the
# exact FP16 operands the fused linear's quantizer writes (its quantizer
# then writes them where REGR is planned: -DNVFP4_SM90_REGR_F16=1,
# REGR_F16_STAGE_BYTES), and `f16pre` also in the prequantized GEMM, after
# the pre-pass (=3); `f16dev` that with dev_mode.
ALT_FLAGS_res       := -DNVFP4_SM90_REGR_RES=1 $(ALT_WERROR)
ALT_FLAGS_resdev    := -DNVFP4_SM90_REGR_RES=1 -DNVFP4_SM90_DEV
ALT_FLAGS_f16       := -DNVFP4_SM90_REGR_F16=1 $(ALT_WERROR)
ALT_FLAGS_f16pre    := -DNVFP4_SM90_REGR_F16=3 $(ALT_WERROR)
ALT_FLAGS_f16dev    := -DNVFP4_SM90_REGR_F16=3 -DNVFP4_SM90_DEV
ALTS     ?= pair regbal regstatic lean all pick base nbar turn2 il actrot actsplit ilrot mcast loadlast res f16 \
            f16pre
ALT_FULL ?= all pick base il ilrot mcast loadlast res f16 f16pre
ALT_DEV  ?= all_dev1 all_dev4 all_dev5 all_dev6 nbardev ildev ilrotdev mcastdev1 mcastdev3 resdev f16dev
$(foreach n,1 2 3 4 5 6 7,$(eval ALT_FLAGS_all_dev$(n) := $(ALT_DEFS_all) -DNVFP4_SM90_DEV_FIXED=$(n)))
.PHONY: alts alt-objs
alts: $(foreach a,$(ALTS),$(BUILD)/gpu/gemm_variants_$(a) $(BUILD)/gpu/test_gemm_cuda_$(a)) \
      $(foreach a,$(ALT_FULL),$(BUILD)/gpu/nvfp4_$(a) $(BUILD)/gpu/test_linear_cuda_$(a)) \
      $(foreach a,$(ALT_DEV),$(BUILD)/gpu/gemm_variants_$(a))
alt-objs: $(foreach a,$(ALTS),$(BUILD)/obj/alt/sm90_gemm_$(a).cu.o \
                              $(if $(ALT_QFLAGS_$(a)),$(BUILD)/obj/alt/sm90_quantize_$(a).cu.o))
.SECONDARY:
SM90_ALT_NVCC = $(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
  -Xcompiler -fvisibility=hidden -fmad=false -Iinclude -Isrc/core -Isrc -lineinfo
# (the family's entry points under their own names, as the library's: Makefile SM90_ENTRY_FLAGS)
$(BUILD)/obj/alt/sm90_gemm_%.cu.o: src/cuda/sm90_gemm.cu lib
	@mkdir -p $(@D)
	$(SM90_ALT_NVCC) -DNVFP4_SM90_ENTRIES -include src/cuda/dispatch.h $(ALT_FLAGS_$*) -c $< -o $@
$(BUILD)/obj/alt/sm90_quantize_%.cu.o: src/cuda/sm90_quantize.cu lib
	@mkdir -p $(@D)
	$(SM90_ALT_NVCC) $(ALT_QFLAGS_$*) -c $< -o $@
# the library with the set's objects in place of its own (members are named
# by their files' base names)
.SECONDEXPANSION:
$(BUILD)/obj/alt/libnvfp4_%.a: $(BUILD)/obj/alt/sm90_gemm_%.cu.o \
                               $$(if $$(ALT_QFLAGS_$$*),$(BUILD)/obj/alt/sm90_quantize_$$*.cu.o) lib
	cp $(BUILD)/libnvfp4.a $@
	ar d $@ sm90_gemm.cu.o $(if $(ALT_QFLAGS_$*),sm90_quantize.cu.o)
	ar rcs $@ $(filter %.cu.o,$^)
$(BUILD)/gpu/gemm_variants_%: dev/cuda/gemm_variants.c $(BUILD)/obj/alt/libnvfp4_%.a
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/obj/alt/libnvfp4_$*.a $(GPU_LIBS)
$(BUILD)/gpu/test_gemm_cuda_%: tests/gpu/test_gemm_cuda.c tests/unit/testlib.h $(BUILD)/obj/alt/libnvfp4_%.a
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/obj/alt/libnvfp4_$*.a $(GPU_LIBS)
$(BUILD)/gpu/test_linear_cuda_%: tests/gpu/test_linear_cuda.c tests/unit/testlib.h $(BUILD)/obj/alt/libnvfp4_%.a
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/obj/alt/libnvfp4_$*.a $(GPU_LIBS)
# the fused linear timed on the alternative library (dev/cuda/inkernel_a:
# every output checked against the CPU linear first), for A/B runs
$(BUILD)/gpu/inkernel_a_%: dev/cuda/inkernel_a.c dev/cuda/dev_check.h dev/cuda/dev_rand.h $(BUILD)/obj/alt/libnvfp4_%.a
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(BUILD)/obj/alt/libnvfp4_$*.a $(GPU_LIBS)
# the nvfp4 command (bench, check) on the alternative library: the CLI's
# objects as `cli` built them
ALT_CLI_O = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard cli/*.c bench/*.c))
$(BUILD)/gpu/nvfp4_%: $(BUILD)/obj/alt/libnvfp4_%.a cli
	@mkdir -p $(@D)
	$(CC) -o $@ $(ALT_CLI_O) $(BUILD)/obj/alt/libnvfp4_$*.a $(GPU_LIBS)

# the flags of an alternative build, for dev/cuda/flip_check.sh:
# make -s -f tests/gpu/gpu.mk alt-flags-SET (two lines: sm90_gemm.cu's, sm90_quantize.cu's)
alt-flags-%:
	@echo '$(ALT_FLAGS_$*)'
	@echo '$(ALT_QFLAGS_$*)'
