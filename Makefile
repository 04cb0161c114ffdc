# nvfp4 -- build, test, sanitize, fuzz.  `make help` lists the targets.
#
# Sources are found by directory, so adding a file needs no edit here:
#   src/*/*.c              the library (C11)
#   src/cpu/*_avx2.c       compiled with AVX2+FMA enabled (chosen at run time)
#   src/cpu/*_avx512.c     compiled with AVX-512 enabled (chosen at run time)
#   src/cuda/*.cu          CUDA C for sm_90a (only when nvcc is found)
#   src/cuda/stub_nocuda.c replaces them in builds without CUDA
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
             -lineinfo

LIB_C    := $(wildcard src/*/*.c)
CUDA_CU  := $(wildcard src/cuda/*.cu)
ifeq ($(WITH_CUDA),1)
  LIB_C   := $(filter-out src/cuda/stub_nocuda.c,$(LIB_C))
  CLI_C   := $(wildcard cli/*.c) $(wildcard bench/*.c)
  CFLAGS  += -DNVFP4_WITH_CUDA=1 -I$(CUDA_HOME)/include
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
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

.PHONY: all lib cli tests perf test test-unit test-cli test-python test-sanitize fuzz gpu-tests sm90-options probe-sm120 deps help clean
all: lib cli

help:
	@echo "make             build $(BUILD)/libnvfp4.{a,so} and $(BUILD)/nvfp4 (CUDA: $(WITH_CUDA))"
	@echo "make test        unit + CLI + Python tests (the README's test command runs this)"
	@echo "make test-python the Python package's tests (python/tests) on $(BUILD)/libnvfp4.so"
	@echo "make test-sanitize  the same under ASan + UBSan (build-asan/)"
	@echo "make perf        build the timing programs of tests/perf ($(BUILD)/perf/)"
	@echo "make fuzz        libFuzzer over the safetensors reader (FUZZ_SECONDS=60)"
	@echo "make gpu-tests   build the H200 test programs (tests/gpu/run.sh runs them)"
	@echo "make probe-sm120 build the GB10 / RTX Blackwell probe (when nvcc has sm_121a)"
	@echo "make sm90-options  compile the H200 kernel's not-yet-default options (tests/gpu/gpu.mk alts)"
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

$(BUILD)/obj/%.o: %.c include/nvfp4.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(if $(findstring _avx512,$<),-mavx512f -mavx512bw -mavx512vl -mavx512dq -mbmi2) \
	      $(if $(findstring _avx2,$<),-mavx2 -mbmi2) -MMD -MP -c $< -o $@

$(BUILD)/gen/rcp_table_c: tools/rcp_table_c.c
	@mkdir -p $(@D)
	$(HOSTCC) -std=c11 -O2 -Wall -Wextra -Werror -o $@ $<

$(BUILD)/gen/rcp_sm90_packed.c: src/quant/rcp_sm90_table.bin.xz $(BUILD)/gen/rcp_table_c
	xz -dc $< | $(BUILD)/gen/rcp_table_c > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c src/quant/quant_sm90.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# nvcc writes no dependency files: the headers CUDA sources include, listed.
CUDA_HDRS := include/nvfp4.h $(wildcard src/core/*.h src/formats/*.h src/quant/*.h src/cuda/*.h src/cuda/*.cuh)
$(BUILD)/obj/%.cu.o: %.cu $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/testlib.h $(BUILD)/libnvfp4.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(BUILD)/libnvfp4.a $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

tests: $(TEST_BIN)

# timing programs (they read the testing hooks, so they link the static archive)
$(BUILD)/perf/%: tests/perf/%.c $(BUILD)/libnvfp4.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libnvfp4.a $(LDFLAGS) $(CUDA_LIBS) $(LDLIBS)

perf: $(PERF_BIN)

# (not under the sanitizers: python3 cannot load an ASan-instrumented .so)
test: test-unit test-cli $(if $(SANFLAGS),,test-python)

test-unit: $(TEST_BIN)
	@sh tests/run_unit.sh $(BUILD)/tests

test-cli: $(BUILD)/nvfp4
	@sh tests/cli/run.sh $(BUILD)/nvfp4

# The Python package from the source tree: PYTHONPATH + the freshly built .so.
test-python: $(BUILD)/libnvfp4.so $(BUILD)/nvfp4
	@NVFP4_LIB=$(BUILD)/libnvfp4.so NVFP4_CLI=$(BUILD)/nvfp4 PYTHONPATH=python sh python/tests/run.sh

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

gpu-tests:
	@$(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD)

# the wgmma kernel's measured-before-default options (tests/gpu/gpu.mk alts)
# compile warning-free: CI builds their objects
sm90-options:
	@if [ -n "$(NVCC)" ]; then \
	  $(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD) NVCC=$(NVCC) alt-objs; \
	else echo "sm90-options: skipped (no nvcc here)"; fi

probe-sm120:
	@if [ -n "$(NVCC)" ] && "$(NVCC)" --list-gpu-arch 2>/dev/null | grep -q compute_121; then \
	  $(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD) probe-sm120; \
	else echo "probe-sm120: skipped (no nvcc with sm_120a / sm_121a here)"; fi

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
