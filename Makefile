# nvfp4 -- build, test, sanitize, fuzz.  `make help` lists the targets.
#
# Sources are found by directory, so adding a file needs no edit here:
#   src/*/*.c, src/*/*/*.c the library (C11)
#   src/cpu/*_avx2.c       compiled with AVX2+FMA enabled (chosen at run time; x86-64)
#   src/cpu/*_avx512.c     compiled with AVX-512 enabled (chosen at run time; x86-64)
#   src/cuda/*.cu          CUDA C shared by the GPU families (only when nvcc is found)
#   src/cuda/sm90/*.cu     the H100 / H200 family, sm_90a
#   src/cuda/sm120/*.cu    the GB10 / RTX Blackwell family, sm_120a + sm_121a
#                          (when nvcc has them; the quantizer's kernels too)
#   src/cuda/stub_nocuda.c replaces them (and src/cuda/*/*.c) in builds without CUDA
#   cli/*.c                the nvfp4 command (bench/*.c joins it in CUDA builds)
#   tests/unit/test_*.c    one test program each
#   tests/perf/*.c         one timing program each (make perf)
#   $(BUILD)/gen/*.c       generated at build time (the H200's reciprocal table,
#                          from src/quant/rcp_sm90_table.bin.xz; needs xz)
#
# NVFP4_CUDA=auto|1|0 picks the CUDA backend (auto: when nvcc is on PATH or in
# /usr/local/cuda/bin).  BUILD=dir puts outputs elsewhere (sanitizer builds).

BUILD      ?= build
CC         ?= cc
NVFP4_CUDA ?= auto
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })

ifeq ($(NVFP4_CUDA),auto)
  ifneq ($(NVCC),)
    WITH_CUDA := 1
  else
    WITH_CUDA := 0
  endif
else
  WITH_CUDA := $(NVFP4_CUDA)
endif

OPT      ?= -O2
# -ffp-contract=off: no fused multiply-adds behind our back; bit-exactness
# depends on every FP32 operation rounding where the source says it does.
CFLAGS   ?=
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -fPIC \
            -ffp-contract=off -fno-fast-math -fvisibility=hidden -Iinclude -Isrc/core -Isrc
# jansson is linked statically when its archive exists, so binaries built here
# also run on machines without the package (the GPU machine, for one).
comma    := ,
JANSSON  := $(if $(wildcard /usr/lib/x86_64-linux-gnu/libjansson.a),-Wl$(comma)-Bstatic -ljansson -Wl$(comma)-Bdynamic,-ljansson)
LDLIBS   += $(JANSSON) -lpthread -lm
SANFLAGS ?=
CFLAGS   += $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)

NVCCFLAGS ?= -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -Xcompiler -fvisibility=hidden \
             -Xcompiler -Wall -Werror all-warnings -fmad=false -Iinclude -Isrc/core -Isrc \
             -lineinfo -Xfatbin=-compress-all
# TESTING=1: the library with its testing hooks (src/core/nvfp4_testing.h),
# which the test programs link: $(BUILD)/testing/libnvfp4.a.  The shipped
# library has none.
TESTING  ?= 0
ifeq ($(TESTING),1)
  CFLAGS    += -DNVFP4_TESTING
  NVCCFLAGS += -DNVFP4_TESTING
endif

LIB_C    := $(wildcard src/*/*.c src/*/*/*.c)
CUDA_CU  := $(wildcard src/cuda/*.cu src/cuda/*/*.cu)
# The sm120 family (src/cuda/sm120), for the targets this nvcc knows; a
# build without them runs the sm90 family only.
ifeq ($(WITH_CUDA),1)
  NVCC_ARCHS    := $(shell "$(NVCC)" --list-gpu-arch 2>/dev/null)
  SM120_GENCODE := $(if $(filter compute_120,$(NVCC_ARCHS)),-gencode=arch=compute_120a$(comma)code=sm_120a) \
                   $(if $(filter compute_121,$(NVCC_ARCHS)),-gencode=arch=compute_121a$(comma)code=sm_121a)
  WITH_SM120    := $(if $(strip $(SM120_GENCODE)),1,0)
endif
ifeq ($(WITH_CUDA),1)
  LIB_C   := $(filter-out src/cuda/stub_nocuda.c,$(LIB_C))
  CLI_C   := $(wildcard cli/*.c) $(wildcard bench/*.c)
  CFLAGS  += -DNVFP4_WITH_CUDA=1 -I$(CUDA_HOME)/include
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
  ifeq ($(WITH_SM120),1)
    CFLAGS  += -DNVFP4_WITH_SM120=1
  else
    LIB_C   := $(filter-out src/cuda/sm120/%,$(LIB_C))
    CUDA_CU := $(filter-out src/cuda/sm120/%,$(CUDA_CU))
  endif
else
  LIB_C   := $(filter-out src/cuda/%.c,$(LIB_C)) src/cuda/stub_nocuda.c
  CUDA_CU :=
  CLI_C   := $(wildcard cli/*.c)
  CUDA_LIBS :=
endif

# Generated sources: the reciprocal table is decompressed and turned into a C
# array by a generator built with the host compiler (no sanitizer flags).
HOSTCC   ?= cc
GEN_C    := $(BUILD)/gen/rcp_sm90_packed.c
LIB_O    := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_C)) $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CUDA_CU)) \
            $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_C))
CLI_O    := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_C))
TEST_C   := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_C))
PERF_C   := $(wildcard tests/perf/*.c)
PERF_BIN := $(patsubst tests/perf/%.c,$(BUILD)/perf/%,$(PERF_C))

.PHONY: all lib cli testing-lib tests perf test test-unit test-cli test-python test-torch test-sanitize fuzz \
        gpu-tests probe-sm120 sm120-sass deps help clean FORCE
all: lib cli

help:
	@echo "make             build $(BUILD)/libnvfp4.{a,so} and $(BUILD)/nvfp4 (CUDA: $(WITH_CUDA))"
	@echo "make test        unit + CLI + Python tests (the README's test command runs this)"
	@echo "make test-python the Python package's tests (python/tests) on $(BUILD)/libnvfp4.so"
	@echo "make test-torch  installs torch and transformers if missing, then every Python test"
	@echo "                 with torch (nvfp4.torch included) on the CPU"
	@echo "make test-sanitize  the same under ASan + UBSan (build-asan/)"
	@echo "make perf        build the timing programs of tests/perf ($(BUILD)/perf/)"
	@echo "make fuzz        libFuzzer over the safetensors and GGUF readers (FUZZ_SECONDS=60 each)"
	@echo "make gpu-tests   build the H200 test programs (tests/gpu/run.sh runs them)"
	@echo "make probe-sm120 build the GB10 / RTX Blackwell probe (when nvcc has sm_121a)"
	@echo "make sm120-sass  check the library's sm120 kernels hold the block-scaled MMA (cuobjdump)"
	@echo "make deps        install the Debian packages the build needs"

deps:
	@sh scripts/install-deps.sh

lib: $(BUILD)/libnvfp4.a $(BUILD)/libnvfp4.so
cli: $(BUILD)/nvfp4

$(BUILD)/libnvfp4.a: $(LIB_O)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libnvfp4.so: $(LIB_O)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(CUDA_LIBS) -ljansson -lpthread -lm

$(BUILD)/nvfp4: $(CLI_O) $(BUILD)/libnvfp4.a
	$(CC) -o $@ $(CLI_O) $(BUILD)/libnvfp4.a $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

# x86-64 only: elsewhere (aarch64: GB10, Grace) the SIMD files build without
# their flags, as the portable code they fall back to.
HOST_X86 := $(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null))
$(BUILD)/obj/%.o: %.c include/nvfp4.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(if $(HOST_X86),$(if $(findstring _avx512,$<),-mavx512f -mavx512bw -mavx512vl -mavx512dq -mbmi2) \
	      $(if $(findstring _avx2,$<),-mavx2 -mbmi2)) -MMD -MP -c $< -o $@

$(BUILD)/gen/rcp_table_c: tools/rcp_table_c.c
	@mkdir -p $(@D)
	$(HOSTCC) -std=c11 -O2 -Wall -Wextra -Werror -o $@ $<

$(BUILD)/gen/rcp_sm90_packed.c: src/quant/rcp_sm90_table.bin.xz $(BUILD)/gen/rcp_table_c
	xz -dc $< | $(BUILD)/gen/rcp_table_c > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c src/quant/quant_sm90.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# nvcc writes no dependency files: the headers CUDA sources include, listed.
CUDA_HDRS := include/nvfp4.h $(wildcard src/core/*.h src/formats/*.h src/quant/*.h src/oracle/*.h src/cuda/*.h \
                                       src/cuda/*.cuh src/cuda/*/*.h src/cuda/*/*.cuh src/cuda/*/*.def)
$(BUILD)/obj/%.cu.o: %.cu $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(NVCC_TU_FLAGS) -c $< -o $@
# the quantizer's kernels run on both families (the sm120 linear's A producer)
$(BUILD)/obj/src/cuda/quantize.cu.o: NVCC_TU_FLAGS = $(SM120_GENCODE)
# the sm120 family: its own targets only
$(BUILD)/obj/src/cuda/sm120/%.cu.o: src/cuda/sm120/%.cu $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(filter-out -gencode=%,$(NVCCFLAGS)) $(SM120_GENCODE) -c $< -o $@

# the testing library: the same sources with NVFP4_TESTING, under $(BUILD)/testing
TEST_LIB := $(BUILD)/testing/libnvfp4.a
$(TEST_LIB): FORCE
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/testing TESTING=1 lib
FORCE:
testing-lib: $(TEST_LIB)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/testlib.h $(TEST_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DNVFP4_TESTING -Itests/unit -o $@ $< $(TEST_LIB) $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

# The nvfp4 command with its test-only hooks (-DNVFP4_TESTING), for the CLI
# tests alone: `check` with a substitute backend must fail.  Never installed.
TEST_CLI := $(BUILD)/tests/nvfp4-testing
$(TEST_CLI): $(CLI_C) $(wildcard cli/*.h) include/nvfp4.h $(TEST_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DNVFP4_TESTING -o $@ $(CLI_C) $(TEST_LIB) $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

tests: $(TEST_BIN)

# timing programs (they force SIMD paths through the testing hooks, so they
# link the testing library)
$(BUILD)/perf/%: tests/perf/%.c $(TEST_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DNVFP4_TESTING -o $@ $< $(TEST_LIB) $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

perf: $(PERF_BIN)

# (not under the sanitizers: python3 cannot load an ASan-instrumented .so)
test: test-unit test-cli $(if $(SANFLAGS),,test-python)

test-unit: $(TEST_BIN)
	@sh tests/run_unit.sh $(BUILD)/tests

test-cli: $(BUILD)/nvfp4 $(TEST_CLI)
	@sh tests/cli/run.sh $(BUILD)/nvfp4

# The Python package from the source tree: PYTHONPATH + the freshly built .so.
# nvfp4.torch's own tests (test_torch*.py) run in test-torch.
test-python: $(BUILD)/libnvfp4.so $(BUILD)/nvfp4
	@NVFP4_LIB=$(BUILD)/libnvfp4.so NVFP4_CLI=$(BUILD)/nvfp4 PYTHONPATH=python sh python/tests/run.sh \
	  --ignore-glob='*/test_torch*'

# PyTorch from PyPI when missing (scripts/install-torch.sh), then all of
# python/tests with torch required: no torch test may skip for want of it.
test-torch: $(BUILD)/libnvfp4.so $(BUILD)/nvfp4
	@sh scripts/install-torch.sh
	@NVFP4_REQUIRE_TORCH=1 NVFP4_SUITE=torch NVFP4_LIB=$(BUILD)/libnvfp4.so NVFP4_CLI=$(BUILD)/nvfp4 \
	  PYTHONPATH=python$${PYTHONPATH:+:$$PYTHONPATH} sh python/tests/run.sh

# ASan + UBSan: every unit test and the CLI tests, CPU code only.
test-sanitize:
	$(MAKE) BUILD=build-asan NVFP4_CUDA=0 OPT=-O1 \
	  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

FUZZ_SECONDS ?= 60
fuzz:
	@mkdir -p build-fuzz
	clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc/core -Isrc -ffp-contract=off \
	  -fsanitize=fuzzer,address,undefined -o build-fuzz/fuzz_safetensors \
	  tests/fuzz/fuzz_safetensors.c src/io/*.c src/core/*.c src/formats/*.c -ljansson -lpthread -lm
	@sh tests/fuzz/run.sh build-fuzz/fuzz_safetensors $(FUZZ_SECONDS)
	clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc/core -Isrc -ffp-contract=off \
	  -fsanitize=fuzzer,address,undefined -o build-fuzz/fuzz_gguf \
	  tests/fuzz/fuzz_gguf.c src/io/*.c src/core/*.c src/formats/*.c -ljansson -lpthread -lm
	@sh tests/fuzz/run.sh build-fuzz/fuzz_gguf $(FUZZ_SECONDS) corpus-gguf

gpu-tests:
	@$(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD)

probe-sm120:
	@if [ -n "$(NVCC)" ] && "$(NVCC)" --list-gpu-arch 2>/dev/null | grep -q compute_121; then \
	  $(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD) probe-sm120; \
	else echo "probe-sm120: skipped (no nvcc with sm_120a / sm_121a here)"; fi

# the library's sm120 kernels hold the block-scaled MMA in their SASS (tests/gpu/gpu.mk)
sm120-sass:
	@if [ -n "$(NVCC)" ] && "$(NVCC)" --list-gpu-arch 2>/dev/null | grep -q compute_121; then \
	  $(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD) sm120-sass; \
	else echo "sm120-sass: skipped (no nvcc with sm_120a / sm_121a here)"; fi

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
