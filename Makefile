# wsync build. `make` builds build/wsync and build/libwsync.{a,so};
# `make test` runs every test; `make demo` runs the main job on this machine;
# `make install PREFIX=/usr/local` installs them (DESTDIR honoured).
# The entry points (all, test, demo, unit, bench, test-gpu, asan, valgrind,
# fuzz) first install what is missing (deps-check), then build in a second
# make run: CUDA, NCCL and VERBS below are detected from what is installed, so
# they must be decided after `make deps`, never in the run that installs.
# Sources are found by folder, so a new file needs no Makefile change:
#   common/ trainer_side/ engine_side/  -> the library (every .c; .cu with CUDA)
#   cli/*.c                             -> the wsync binary
#   tests/unit/**/_test.c, tests/gpu/*_test.c, bench/*.c, tests/fuzz/*_fuzz.c
#                                       -> one program each
#   tests/tools/*.c                     -> one test tool each (no libwsync)

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
LDLIBS   := -ljansson -lmicrohttpd -lcurl -lxxhash -lcrypto -lz -lpthread -lm -ldl -lrt

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
TOOL_SRCS  := $(sort $(wildcard tests/tools/*.c))

LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CU_SRCS:%.cu=$(BUILD)/obj/%.cu.o)
CLI_OBJS   := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
GPU_BINS   := $(GPU_SRCS:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
TOOL_BINS  := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/tools/%)

.PHONY: chaos all binaries deps deps-check deps-check-build test all-tests all-tests-bins unit unit-bins asan valgrind fuzz \
        fuzz-bins demo bench bench-bins test-gpu gpu-bins test-verbs test-fresh install install-files \
        uninstall format-check format-check-files clean
.DEFAULT_GOAL := all

all: deps-check-build
	@$(MAKE) --no-print-directory binaries

# Goals named together (`make -j8 all test`) go one after another: each runs a
# make of its own below, and two of them writing build/libwsync.a at once
# left a broken archive and no build/wsync. Inside each, -j builds as usual.
# (Not keyed on MAKELEVEL: a make started from another's recipe, as the tests
# start one, counts as a level deeper.)
ifneq ($(word 2,$(MAKECMDGOALS)),)
.NOTPARALLEL:
endif

binaries: $(BUILD)/wsync $(BUILD)/libwsync.a $(BUILD)/libwsync.so $(BUILD)/wsync-pc.txt

# --- set-up ----------------------------------------------------------------
# What `make deps` installs (Debian 12 / Ubuntu 24.04). To build: a C
# toolchain, pkg-config, libmicrohttpd (control endpoint), jansson (JSON),
# libcurl (control client), libxxhash (layout digests), libssl (libcrypto:
# the data-plane handshake's HMAC), zlib (gzip answers of the control
# endpoint), libibverbs (RDMA transport). To test: clang + its runtime (libFuzzer),
# valgrind, iproute2 (network namespaces), nftables and ethtool (network
# faults: loss and partitions; offloads off where tests/tools/delay_link runs), curl,
# python3 with torch and numpy (Python API tests), procps/psmisc, chromium and
# python3-websocket (the status page test drives a headless browser).
DEB_BUILD_PKGS := build-essential pkg-config libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev \
            libxxhash-dev libssl-dev zlib1g-dev libibverbs-dev
DEB_PKGS := $(DEB_BUILD_PKGS) ibverbs-providers rdma-core clang libclang-rt-dev valgrind \
            iproute2 curl python3 procps psmisc \
            python3-torch python3-numpy nftables ethtool clang-format python3-venv \
            chromium python3-websocket
DEB_VM_PKGS := qemu-system-x86 debootstrap
# Test-only packages some releases do not have (Ubuntu 24.04 has no
# python3-torch): installed where apt has them; the tests that need them skip.
DEB_OPTIONAL_PKGS := python3-torch
DEPS_PKGS ?= $(DEB_PKGS)
# One command line for both cases: run by `make deps` as root, printed for
# the user to run as root otherwise (no sudo is assumed).
APT_INSTALL := apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
# has_candidate P: whether apt's package lists offer P.
has_candidate = apt-cache policy $(1) 2>/dev/null | grep -q 'Candidate: [^(]'

deps:
	@missing= optional=; for p in $(DEPS_PKGS) $(EXTRA_PKGS); do dpkg -s $$p >/dev/null 2>&1 && continue; \
	  case " $(DEB_OPTIONAL_PKGS) " in *" $$p "*) optional="$$optional $$p";; *) missing="$$missing $$p";; esac; done; \
	if [ -z "$$missing$$optional" ]; then echo "deps: everything is installed"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  if [ -n "$$missing" ]; then \
	    echo "deps: missing packages:$$missing" >&2; \
	    echo "deps: install them as root (then run make again):" >&2; \
	    echo "  $(APT_INSTALL)$$missing" >&2; fi; \
	  [ -z "$$optional" ] || echo "deps: optional, where your release has them (tests that need them skip otherwise):$$optional" >&2; \
	  [ -z "$$missing" ]; exit; fi; \
	apt-get update -q || exit 1; \
	for p in $$optional; do \
	  if $(call has_candidate,$$p); then missing="$$missing $$p"; \
	  else echo "deps: $$p is not available from apt here; the tests that need it will skip"; fi; done; \
	[ -n "$$missing" ] || exit 0; \
	echo "deps: installing$$missing"; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing

# Cheap checks first: only call `deps` when a header or tool is missing.
# deps-check-build (for `make`): what the build needs; deps-check (for test,
# demo and the other entry points): everything in DEB_PKGS but the optional
# packages (a release without them would run apt-get update every time).
DEPS_BUILD_FILES := /usr/bin/cc /usr/bin/pkg-config /usr/include/microhttpd.h /usr/include/jansson.h \
          /usr/include/xxhash.h /usr/include/*/curl/curl.h /usr/include/infiniband/verbs.h \
          /usr/include/openssl/hmac.h /usr/include/zlib.h
DEPS_FILES := $(DEPS_BUILD_FILES) /usr/bin/clang /usr/bin/valgrind /usr/bin/curl /usr/bin/python3 \
          /usr/bin/pkill /usr/bin/killall /usr/sbin/ip /usr/lib/python3/dist-packages/numpy /usr/sbin/nft \
          /usr/sbin/ethtool /usr/bin/clang-format /usr/bin/chromium /usr/lib/python3/dist-packages/websocket

deps-check-build:
	@for f in $(DEPS_BUILD_FILES); do \
	  [ -e $$f ] || { echo "deps-check: $$f is missing; running make deps"; \
	    $(MAKE) --no-print-directory deps DEPS_PKGS="$(DEB_BUILD_PKGS)" && exit 0 || exit 1; }; \
	done

deps-check:
	@for f in $(DEPS_FILES); do \
	  [ -e $$f ] || { echo "deps-check: $$f is missing; running make deps"; $(MAKE) --no-print-directory deps && exit 0 || exit 1; }; \
	done

# --- build -----------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The status page (GET /) is built into the binary: its one file becomes a
# byte array (od, from coreutils), NUL-terminated; page.c includes it.
$(BUILD)/gen/page_html.h: common/control/page/index.html
	@mkdir -p $(dir $@)
	{ echo '/* generated from $< by make: do not edit */'; \
	  echo 'static const unsigned char ctl_page_html[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/common/control/page.o: $(BUILD)/gen/page_html.h
$(BUILD)/obj/common/control/page.o: CFLAGS += -I$(BUILD)/gen

$(BUILD)/obj/%.cu.o: %.cu $(shell find common -name "*.cuh")
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libwsync.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libwsync.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LDLIBS)

# What a program linking libwsync.a needs besides it (for wsync.pc): the
# libraries this build linked, as they are. Not their pkg-config modules as
# Requires.private: `pkg-config --static` would then add those modules' own
# private libraries (libcurl's -lnghttp2 -lssh2 -lldap ...), which Debian's
# -dev packages do not ship.
$(BUILD)/wsync-pc.txt: $(BUILD)/libwsync.so Makefile
	@printf '%s\n' 'Libs.private: $(strip $(LDLIBS))' >$@

$(BUILD)/wsync: $(CLI_OBJS) $(BUILD)/libwsync.a
	$(CC) -o $@ $(CLI_OBJS) $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libwsync.a tests/test.h tests/unit/rig.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests/unit/common/control/client_test $(BUILD)/tests/unit/common/control/client_polls_test: \
    tests/unit/common/control/control_rig.h

$(BUILD)/tests/gpu/%: tests/gpu/%.c $(BUILD)/libwsync.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libwsync.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/tools/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS)

$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libwsync.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libwsync.a $(LDFLAGS) $(LDLIBS)

# --- run -------------------------------------------------------------------
# Each entry point: deps-check in this run, the build in a second one.
test: deps-check
	@$(MAKE) --no-print-directory all-tests
	@tests/run.sh $(BUILD)

all-tests: deps-check-build
	@$(MAKE) --no-print-directory all-tests-bins

all-tests-bins: binaries $(UNIT_BINS) $(GPU_BINS) $(BENCH_BINS) $(TOOL_BINS)

unit: deps-check
	@$(MAKE) --no-print-directory unit-bins
	@WSYNC_ONLY=unit tests/run.sh $(BUILD)

unit-bins: binaries $(UNIT_BINS)

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

demo: deps-check
	@$(MAKE) --no-print-directory binaries
	$(BUILD)/wsync demo

# Seeded fault campaign (tests/chaos/chaos.py through tests/integration/chaos_test.sh:
# in network namespaces with network faults as root): CHAOS_FAULTS faults, SEED=N to replay one.
CHAOS_FAULTS ?= 120
chaos: deps-check all
	@$(MAKE) --no-print-directory $(TOOL_BINS)
	@WSYNC_BIN=$(CURDIR)/$(BUILD)/wsync WSYNC_BUILD=$(CURDIR)/$(BUILD) CHAOS_FAULTS=$(CHAOS_FAULTS) \
	  CHAOS_SEED=$(if $(SEED),$(SEED),$$(date +%s)) CHAOS_TIME_LIMIT=900 bash tests/integration/chaos_test.sh

bench: deps-check-build
	@$(MAKE) --no-print-directory bench-bins
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done

bench-bins: binaries $(BENCH_BINS)

test-gpu: deps-check
	@$(MAKE) --no-print-directory gpu-bins
	@WSYNC_ONLY=gpu tests/run.sh $(BUILD)

gpu-bins: binaries $(GPU_BINS)

# The verbs transport for real: a Debian guest under qemu with the software
# RoCE driver (tests/verbs/, docs/verbs.md). Installs qemu/debootstrap first.
test-verbs:
	@command -v qemu-system-x86_64 >/dev/null && command -v debootstrap >/dev/null || \
	  $(MAKE) --no-print-directory deps DEPS_PKGS="$(DEB_VM_PKGS)"
	@tests/verbs/run_vm.sh

# What a new user does: a minbase Debian 12 with git, make, ca-certificates;
# clone this commit; make demo; make test; the install routes
# (tests/fresh/run.sh; WSYNC_FRESH_ONLY=install for the routes alone,
# WSYNC_FRESH_SUITE=noble for Ubuntu 24.04). Root only. The archive mirror is
# the one this machine's apt uses for that release (or WSYNC_FRESH_MIRROR).
test-fresh:
	@if [ "$$(id -u)" = 0 ] && ! command -v debootstrap >/dev/null; then \
	  $(MAKE) --no-print-directory deps DEPS_PKGS=debootstrap; fi
	@tests/fresh/run.sh

# --- install ---------------------------------------------------------------
# PREFIX/bin/wsync, PREFIX/lib/libwsync.{so,a}, the public headers under
# PREFIX/include/wsync/ with their folders (so `#include "common/wsync.h"`
# reads the same in and out of the tree; Cflags: -I$(includedir)/wsync),
# PREFIX/lib/pkgconfig/wsync.pc, and python/wsync where PYTHON imports it
# from (python/_install_dir.py: /usr/local/lib/python3.X/dist-packages for
# /usr/local, the user site directory for ~/.local). A program linked with
# `pkg-config --libs wsync` runs without LD_LIBRARY_PATH: a LIBDIR the
# dynamic linker searches (ld.so.conf: /usr/local/lib, /usr/lib) gets
# `ldconfig` after the copy, any other an rpath in the .pc's Libs.
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PUBLIC_HEADERS := common/wsync.h trainer_side/wsync_publisher.h engine_side/wsync_receiver.h
PYTHON     ?= /usr/bin/python3
LDCONFIG   ?= $(firstword $(wildcard /sbin/ldconfig /usr/sbin/ldconfig) ldconfig)
# "DIR KIND" (python/_install_dir.py); empty without PYTHON.
PY_SITE     = $(shell [ -x $(PYTHON) ] && $(PYTHON) python/_install_dir.py '$(PREFIX)' 2>/dev/null)
PYTHONDIR  ?= $(word 1,$(PY_SITE))
# "yes" when the dynamic linker searches LIBDIR (a directory of ld.so.conf or
# a built-in one), compared by real path (/lib is /usr/lib on merged-usr).
LIB_IS_SYSTEM = $(shell d=$$(realpath -m '$(LIBDIR)'); $(LDCONFIG) -v -N -X 2>/dev/null | \
                  sed -n 's|^\(/[^:]*\):.*|\1|p' | while read -r x; do \
                  [ "$$(realpath -m "$$x")" = "$$d" ] && echo yes && break; done)
comma      := ,
INSTALLED   = $(BINDIR)/wsync $(LIBDIR)/libwsync.so $(LIBDIR)/libwsync.a $(LIBDIR)/pkgconfig/wsync.pc \
              $(PUBLIC_HEADERS:%=$(INCLUDEDIR)/wsync/%)

install: all
	@$(MAKE) --no-print-directory install-files

# Copies what `make` built into BUILD; builds nothing (the libraries' link
# flags of that build are in BUILD/wsync-pc.txt). The notes at the end say
# what a reader must still do: a BINDIR not on PATH, a PYTHONDIR PYTHON does
# not search, an ldconfig that failed.
install-files:
	@for f in $(BUILD)/wsync $(BUILD)/libwsync.so $(BUILD)/libwsync.a $(BUILD)/wsync-pc.txt; do \
	  [ -f $$f ] || { echo "install: $$f is not built (run make first)" >&2; exit 1; }; done
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(addprefix $(DESTDIR)$(INCLUDEDIR)/wsync/,$(sort $(dir $(PUBLIC_HEADERS))))
	install -m 755 $(BUILD)/wsync $(DESTDIR)$(BINDIR)/wsync
	install -m 755 $(BUILD)/libwsync.so $(DESTDIR)$(LIBDIR)/libwsync.so
	install -m 644 $(BUILD)/libwsync.a $(DESTDIR)$(LIBDIR)/libwsync.a
	@for h in $(PUBLIC_HEADERS); do echo "install -m 644 $$h $(DESTDIR)$(INCLUDEDIR)/wsync/$$h"; \
	  install -m 644 $$h $(DESTDIR)$(INCLUDEDIR)/wsync/$$h || exit 1; done
	{ printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	  'Name: wsync' 'Description: syncs model weights from trainer ranks to inference engines' \
	  'Version: $(VERSION)' 'Cflags: -I$${includedir}/wsync' \
	  'Libs: -L$${libdir}$(if $(LIB_IS_SYSTEM),, -Wl$(comma)-rpath$(comma)$${libdir}) -lwsync'; \
	  cat $(BUILD)/wsync-pc.txt; } >$(DESTDIR)$(LIBDIR)/pkgconfig/wsync.pc
	@set -- $(PY_SITE); dir=$(PYTHONDIR); \
	if [ ! -d python/wsync ]; then :; \
	elif [ -z "$$dir" ]; then echo "install: note: $(PYTHON) is not installed, so neither is the Python package" \
	  "(make deps installs python3; then make install again)"; \
	else echo "install python/wsync -> $(DESTDIR)$$dir/wsync"; \
	  install -d $(DESTDIR)$$dir/wsync && \
	  find python/wsync -maxdepth 1 -name '*.py' -exec install -m 644 -t $(DESTDIR)$$dir/wsync {} + && \
	  printf '%s\n' '"""Written by make install: where it put libwsync.so."""' 'LIBDIR = "$(LIBDIR)"' \
	    >$(DESTDIR)$$dir/wsync/_installed.py || exit 1; \
	  [ "$$2" != other ] || echo "install: note: $(PYTHON) does not search $$dir: import wsync with" \
	    "PYTHONPATH=$$dir, or install with PREFIX=/usr/local or PREFIX=\$$HOME/.local"; fi
	@[ -z "$(DESTDIR)" ] || exit 0; \
	if [ -n "$(LIB_IS_SYSTEM)" ]; then echo "$(LDCONFIG)"; $(LDCONFIG) || \
	  echo "install: note: ldconfig failed: run it as root, or programs will not find $(LIBDIR)/libwsync.so"; fi; \
	case ":$$PATH:" in *:$(BINDIR):*) ;; *) echo "install: note: $(BINDIR) is not on your PATH:" \
	  "export PATH=\"$(BINDIR):\$$PATH\" (Debian's ~/.profile adds ~/.local/bin at your next login)";; esac

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@set -- $(PY_SITE); dir=$(PYTHONDIR); [ -z "$$dir" ] || { echo "rm -rf $(DESTDIR)$$dir/wsync"; \
	  rm -rf $(DESTDIR)$$dir/wsync; [ "$$2" = site ] || rmdir $(DESTDIR)$$dir $(DESTDIR)$$(dirname $$dir) 2>/dev/null; }; \
	rmdir $(addprefix $(DESTDIR)$(INCLUDEDIR)/wsync/,$(sort $(dir $(PUBLIC_HEADERS)))) \
	  $(DESTDIR)$(INCLUDEDIR)/wsync $(DESTDIR)$(LIBDIR)/pkgconfig 2>/dev/null; \
	[ -n "$(DESTDIR)" ] || [ -z "$(LIB_IS_SYSTEM)" ] || $(LDCONFIG) || true

# --- habits ----------------------------------------------------------------
# Every C/CUDA source and header against .clang-format (clang-format 14);
# lists the files that differ. The tree itself is not reformatted here.
CLANG_FORMAT ?= $(firstword $(shell command -v clang-format-14 clang-format 2>/dev/null))
FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || \
                find common trainer_side engine_side cli tests bench -name '*.[ch]' -o -name '*.cu')

format-check:
	@[ -n "$(CLANG_FORMAT)" ] || $(MAKE) --no-print-directory deps DEPS_PKGS=clang-format
	@$(MAKE) --no-print-directory format-check-files

format-check-files:
	@[ -n "$(CLANG_FORMAT)" ] || { echo "format-check: clang-format is not installed" >&2; exit 1; }
	@bad=; for f in $(FORMAT_SRCS); do \
	  $(CLANG_FORMAT) --style=file $$f | cmp -s - $$f || bad="$$bad $$f"; done; \
	if [ -n "$$bad" ]; then echo "format-check: these files differ from .clang-format ($(CLANG_FORMAT) -i FILE fixes one):"; \
	  for f in $$bad; do echo "  $$f"; done; exit 1; fi; \
	echo "format-check: every file matches .clang-format"

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/tests/unit -name '*.d' 2>/dev/null)
