# wsync build. `make` builds build/wsync and build/libwsync.{a,so};
# `make test` runs every test; `make demo` runs the main job on this machine.
# Sources are found by folder, so a new file needs no Makefile change:
#   common/ trainer_side/ engine_side/  -> the library (every .c; .cu with CUDA)
#   cli/*.c                             -> the wsync binary
#   tests/unit/**/_test.c, tests/gpu/*_test.c, bench/*.c, tests/fuzz/*_fuzz.c
#                                       -> one program each

VERSION   := 0.1.0
BUILD     ?= build
CC        ?= cc
CUDA_HOME ?= /usr/local/cuda
FUZZ_SECONDS ?= 60

# Optional backends: on when their headers and libraries exist; CUDA=0/1,
# NCCL=0/1, VERBS=0/1 override.
NCCL_HOME ?= $(CUDA_HOME)
CUDA  ?= $(shell test -f $(CUDA_HOME)/include/cuda_runtime.h -a -x $(CUDA_HOME)/bin/nvcc -a -f $(CUDA_HOME)/lib64/libcudart_static.a && echo 1 || echo 0)
NCCL  ?= $(shell test "$(CUDA)" = 1 -a -f $(NCCL_HOME)/include/nccl.h && ls $(NCCL_HOME)/lib/libnccl.so $(NCCL_HOME)/lib64/libnccl.so 2>/dev/null | grep -q . && echo 1 || echo 0)
VERBS ?= $(shell test -f /usr/include/infiniband/verbs.h && echo 1 || echo 0)

WARN     := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -fPIC -fvisibility=hidden -pthread -I. -D_GNU_SOURCE \
            -DWSYNC_HAVE_CUDA=$(CUDA) -DWSYNC_HAVE_NCCL=$(NCCL) -DWSYNC_HAVE_VERBS=$(VERBS)
LDLIBS   := -ljansson -lmicrohttpd -lcurl -lxxhash -lpthread -lm -ldl -lrt

ifeq ($(CUDA),1)
CFLAGS   += -I$(CUDA_HOME)/include
LDLIBS   += -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++
NVCC     ?= $(CUDA_HOME)/bin/nvcc
NVFLAGS  ?= -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
            -Xcompiler -fPIC,-fvisibility=hidden -I. -DWSYNC_HAVE_CUDA=1
endif
ifeq ($(NCCL),1)
NCCL_LIBDIR := $(firstword $(wildcard $(NCCL_HOME)/lib/libnccl.so $(NCCL_HOME)/lib64/libnccl.so))
CFLAGS   += -I$(NCCL_HOME)/include
LDLIBS   += -L$(dir $(NCCL_LIBDIR)) -lnccl -Wl,-rpath,$(dir $(NCCL_LIBDIR))
endif
ifeq ($(VERBS),1)
LDLIBS   += -libverbs
endif

ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
ifeq ($(FUZZ),1)
CFLAGS   += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=address,undefined
endif

LIB_SRCS   := $(shell find common trainer_side engine_side -name '*.c' | sort)
CU_SRCS    := $(if $(filter 1,$(CUDA)),$(shell find common trainer_side engine_side -name '*.cu' | sort))
CLI_SRCS   := $(sort $(wildcard cli/*.c))
UNIT_SRCS  := $(shell find tests/unit -name '*_test.c' | sort)
GPU_SRCS   := $(sort $(wildcard tests/gpu/*_test.c))
BENCH_SRCS := $(sort $(wildcard bench/*.c))
FUZZ_SRCS  := $(sort $(wildcard tests/fuzz/*_fuzz.c))

LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/%.cu.o)
CLI_OBJS   := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
GPU_BINS   := $(GPU_SRCS:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)

.PHONY: chaos all deps deps-check test unit asan valgrind fuzz demo bench test-gpu test-verbs clean
.DEFAULT_GOAL := all

all: $(BUILD)/wsync $(BUILD)/libwsync.a $(BUILD)/libwsync.so

# --- set-up ----------------------------------------------------------------
# What `make deps` installs (Debian/Ubuntu). Libraries: libmicrohttpd (control
# endpoint), jansson (JSON), libcurl (control client), libxxhash (layout
# digests), libibverbs (RDMA transport); tools: the test suite's clang
# (libFuzzer), valgrind, iproute2 (network namespaces), curl, python3.
DEB_PKGS := build-essential pkg-config libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev \
            libibverbs-dev ibverbs-providers rdma-core libxxhash-dev clang libclang-rt-14-dev valgrind \
            iproute2 curl python3 procps psmisc \
            python3-torch python3-numpy nftables libssl-dev
DEB_VM_PKGS := qemu-system-x86 debootstrap

deps:
	@missing=$$(for p in $(DEB_PKGS) $(EXTRA_PKGS); do dpkg -s $$p >/dev/null 2>&1 || printf '%s ' $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: everything is installed"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "deps: missing packages: $$missing" >&2; \
	  echo "deps: install them with: sudo apt-get update && sudo apt-get install -y $$missing" >&2; exit 1; fi; \
	echo "deps: installing $$missing"; \
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing

# Cheap check first: only call `deps` when a header or tool is missing.
deps-check:
	@for f in /usr/include/microhttpd.h /usr/include/jansson.h /usr/include/xxhash.h \
	          /usr/include/x86_64-linux-gnu/curl/curl.h /usr/include/infiniband/verbs.h \
	          /usr/bin/clang /usr/bin/valgrind /usr/bin/curl /usr/bin/python3 /usr/bin/pkill \
	          /usr/lib/python3/dist-packages/torch /usr/sbin/nft /usr/include/openssl/hmac.h; do \
	  [ -e $$f ] || { echo "deps-check: $$f is missing; running make deps"; $(MAKE) --no-print-directory deps && exit 0 || exit 1; }; \
	done

# --- build -----------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libwsync.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libwsync.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/wsync: $(CLI_OBJS) $(BUILD)/libwsync.a
	$(CC) -o $@ $(CLI_OBJS) $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libwsync.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/gpu/%: tests/gpu/%.c $(BUILD)/libwsync.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libwsync.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libwsync.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

# --- run -------------------------------------------------------------------
test: deps-check
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh $(BUILD)

all-tests: all $(UNIT_BINS) $(GPU_BINS) $(BENCH_BINS)

unit: all $(UNIT_BINS)
	@WSYNC_ONLY=unit tests/run.sh $(BUILD)

asan: deps-check
	@$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=1 CUDA=0 NCCL=0 all-tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  tests/run.sh build/asan

valgrind: deps-check
	@$(MAKE) --no-print-directory BUILD=build/vg CUDA=0 NCCL=0 all-tests
	@WSYNC_ONLY=unit WSYNC_WRAP="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite" \
	  tests/run.sh build/vg

fuzz: deps-check
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang FUZZ=1 CUDA=0 NCCL=0 fuzz-bins
	@set -e; for f in $(FUZZ_BINS:$(BUILD)/%=build/fuzz/%); do \
	  name=$$(basename $$f); mkdir -p build/fuzz/corpus/$$name; \
	  seeds=tests/fuzz/corpus/$$name; [ -d $$seeds ] || seeds=; \
	  echo "fuzz: $$name for $(FUZZ_SECONDS) s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 build/fuzz/corpus/$$name $$seeds 2>&1 | tail -4; \
	done

fuzz-bins: $(FUZZ_BINS)

demo: deps-check all
	$(BUILD)/wsync demo

# Seeded fault campaign (tests/chaos/chaos.py): CHAOS_FAULTS faults, SEED=N to replay one.
CHAOS_FAULTS ?= 120
chaos: deps-check all
	/usr/bin/python3 tests/chaos/chaos.py --wsync $(BUILD)/wsync --faults $(CHAOS_FAULTS) \
	  $(if $(SEED),--seed $(SEED)) --time-limit 900

bench: all $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done

test-gpu: all $(GPU_BINS)
	@WSYNC_ONLY=gpu tests/run.sh $(BUILD)

# The verbs transport for real: a Debian guest under qemu with the software
# RoCE driver (tests/verbs/, docs/verbs.md). Installs qemu/debootstrap first.
test-verbs:
	@command -v qemu-system-x86_64 >/dev/null && command -v debootstrap >/dev/null || \
	  $(MAKE) --no-print-directory deps EXTRA_PKGS="$(DEB_VM_PKGS)"
	@tests/verbs/run_vm.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
