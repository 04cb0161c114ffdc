# gpu.mk -- the GPU test programs and dev/cuda programs (`make gpu-tests`;
# tests/gpu/run.sh runs the tests).  They link the testing library
# ($(BUILD)/testing/libnvfp4.a: the shipped sources with NVFP4_TESTING, whose
# kernels are the shipped ones but for the quantizer's store delay).
BUILD     ?= build
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
comma     := ,
JANSSON   := $(if $(wildcard /usr/lib/x86_64-linux-gnu/libjansson.a),-Wl$(comma)-Bstatic -ljansson -Wl$(comma)-Bdynamic,-ljansson)
GPU_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -ffp-contract=off -DNVFP4_TESTING \
              -Iinclude -Isrc/core -Isrc -Itests/unit -I$(CUDA_HOME)/include -DNVFP4_WITH_CUDA=1
# -lstdc++: nvcc's kernel launch stubs use guarded statics and exception
# tables (C++ runtime) even in CUDA C sources.
GPU_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt \
             -lstdc++ $(JANSSON) -lpthread -lm
TEST_LIB  := $(BUILD)/testing/libnvfp4.a
DEV_NVCC   = $(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -fmad=false \
             -Xcompiler -Wall -Werror all-warnings -DNVFP4_TESTING -Iinclude -Isrc/core -Isrc

GPU_TESTS := $(patsubst tests/gpu/%.c,$(BUILD)/gpu/%,$(wildcard tests/gpu/test_*.c))

NVCC      ?= $(CUDA_HOME)/bin/nvcc

.PHONY: all lib testing-lib cli probe-fastmath probe-sm120
all: $(GPU_TESTS) $(BUILD)/gpu/cublas_explain cli

# the fast-math instruction probe (tests/gpu/comfy_cuda.sh runs it); standalone
probe-fastmath: $(BUILD)/gpu/probe_fastmath
$(BUILD)/gpu/probe_fastmath: tests/gpu/probe_fastmath.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -gencode=arch=compute_90a,code=sm_90a -o $@ $<

lib:
	@$(MAKE) --no-print-directory -f Makefile BUILD=$(BUILD) NVFP4_CUDA=1 lib
testing-lib:
	@$(MAKE) --no-print-directory -f Makefile BUILD=$(BUILD) NVFP4_CUDA=1 testing-lib

# the nvfp4 command (for `nvfp4 bench` in run.sh); see GPU_LIBS for -lstdc++
cli: lib
	@$(MAKE) --no-print-directory -f Makefile BUILD=$(BUILD) NVFP4_CUDA=1 LDFLAGS=-lstdc++ cli

$(BUILD)/gpu/%: tests/gpu/%.c tests/unit/testlib.h testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(TEST_LIB) $(GPU_LIBS)

# dev/cuda programs (llm.c style: check against the CPU oracle, then time)
all: $(BUILD)/gpu/gemm_variants $(BUILD)/gpu/inkernel_a
$(BUILD)/gpu/gemm_variants $(BUILD)/gpu/inkernel_a: $(BUILD)/gpu/%: dev/cuda/%.c dev/cuda/dev_check.h dev/cuda/dev_rand.h \
                                                    testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(TEST_LIB) $(GPU_LIBS)

# dev/cuda probes: TMA, dequantization-instruction and mma.sync rates; the
# 64x128 tile's pair step in parts; the quantizer's threshold table; the
# quantizer kernels side by side; the stage hand-off for racecheck
DEV_CU := probe_rates probe_chain probe_table quantizer_coop racecheck_bulk
all: $(foreach p,$(DEV_CU),$(BUILD)/gpu/$(p))
$(foreach p,$(DEV_CU),$(BUILD)/gpu/$(p)): $(BUILD)/gpu/%: dev/cuda/%.cu dev/cuda/dev_check.h dev/cuda/dev_rand.h \
                                          dev/cuda/dev_tmap.h src/cuda/ptx.cuh src/cuda/quantize_internal.h \
                                          src/cuda/sm90/common.cuh src/cuda/sm90/wgmma_ptx.cuh testing-lib
	@mkdir -p $(@D)
	$(DEV_NVCC) -c -o $@.o $<
	$(CC) -o $@ $@.o $(TEST_LIB) $(GPU_LIBS)

# cuBLAS's BF16 GEMM explained (tests/gpu/cublas_explain.c): nvfp4_explain
# names the contract cuBLAS followed on the four linears.
$(BUILD)/gpu/cublas_explain: tests/gpu/cublas_explain.c testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(TEST_LIB) -lcublas $(GPU_LIBS)

# The sm120 kernel proven on an H100 / H200 (tests/gpu/sm120_emu.sh runs it):
# src/cuda/sm120/gemm.cu built with NVFP4_SM120_EMULATE for sm_90a (the
# block-scaled MMA done by shuffles and the C rule, src/cuda/sm120/mma.cuh),
# linked ahead of the testing library so that it takes the place of the
# library's sm120 object; test_sm120_emu runs the GEMM and the linear on it
# against the CPU backend, probe_sm120_emu the probe on the emulated MMA (its
# layout, and its step against nvfp4_sm120_step).  sm120_suite is the same
# test on the library itself, for a GB10 / RTX Blackwell (tests/gpu/gb10.sh).
# A test build only: the emulation never enters the library.
SM120_EMU_NVCC = $(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
  -Xcompiler -fvisibility=hidden -Xcompiler -Wall -Werror all-warnings -fmad=false -Iinclude -Isrc/core -Isrc \
  -DNVFP4_TESTING -DNVFP4_SM120_EMULATE
.PHONY: sm120-emu
sm120-emu: $(BUILD)/gpu/test_sm120_emu $(BUILD)/gpu/probe_sm120_emu
all: sm120-emu $(BUILD)/gpu/sm120_suite
$(BUILD)/obj/sm120emu/gemm.cu.o: src/cuda/sm120/gemm.cu src/cuda/sm120/*.h src/cuda/sm120/*.cuh src/oracle/*.h
	@mkdir -p $(@D)
	$(SM120_EMU_NVCC) -c $< -o $@
$(BUILD)/gpu/test_sm120_emu: tests/gpu/test_sm120_emu.c tests/gpu/sm120_data.h tests/unit/testlib.h \
                            $(BUILD)/obj/sm120emu/gemm.cu.o testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -DNVFP4_SM120_EMULATE -o $@ $< $(BUILD)/obj/sm120emu/gemm.cu.o $(TEST_LIB) $(GPU_LIBS)
$(BUILD)/gpu/sm120_suite: tests/gpu/test_sm120_emu.c tests/gpu/sm120_data.h tests/unit/testlib.h testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(TEST_LIB) $(GPU_LIBS)
# cuBLASLt's NVFP4 GEMM explained (tests/gpu/gb10.sh runs it on a GB10;
# --selftest anywhere)
all: $(BUILD)/gpu/cublaslt_nvfp4_explain
$(BUILD)/gpu/cublaslt_nvfp4_explain: tests/gpu/cublaslt_nvfp4_explain.c tests/gpu/sm120_data.h tests/unit/testlib.h \
                                     testing-lib
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -o $@ $< $(TEST_LIB) -lcublasLt $(GPU_LIBS)
$(BUILD)/gpu/probe_sm120_emu: tests/gpu/probe_sm120.cu src/cuda/sm120/*.h src/cuda/sm120/*.cuh src/oracle/*.h testing-lib
	@mkdir -p $(@D)
	$(SM120_EMU_NVCC) -c -o $@.o $<
	$(CC) -o $@ $@.o $(TEST_LIB) $(GPU_LIBS)

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
