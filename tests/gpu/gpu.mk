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
