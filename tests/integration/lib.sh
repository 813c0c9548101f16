# lib.sh: helpers for integration tests (sourced). Each test case prints one
# line, "PASS name", "FAIL name: why" or "SKIP name: skipped: why"; processes a
# test starts are killed when it exits. $WSYNC_BIN is the binary under test.
set -u
WSYNC_ROOT=${WSYNC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
WSYNC=${WSYNC_BIN:-$WSYNC_ROOT/build/wsync}
TMP=$(mktemp -d /tmp/wsync-test.XXXXXX)
WSYNC_PIDS=()
cleanup() {
    local p
    for p in "${WSYNC_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${WSYNC_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    # WSYNC_KEEP_TMP=1 keeps the logs of a run (e.g. on a test host that is given back)
    [ -n "${WSYNC_KEEP_TMP:-}" ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
skip() { echo "SKIP $1: skipped: $2"; }
# check NAME CONDITION-COMMAND...: PASS when the command succeeds.
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n" "'$*' failed"; fi; }

# tp_bench NAME: $BENCH is the built tp_e2e_bench, or check NAME fails saying
# it is not built (returns 1: the caller exits).
tp_bench() {
    BENCH=${WSYNC_BUILD:-build}/bench/tp_e2e_bench
    [ -x "$BENCH" ] && return 0
    fail "$1" "$BENCH is not built (make all-tests builds it)"
    return 1
}

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# bg CMD...: start in the background, remember the pid in $! and WSYNC_PIDS.
bg() { "$@" & WSYNC_PIDS+=($!); }

# wait_http URL [SECONDS]: until URL answers 200.
wait_http() {
    local url=$1 t=${2:-10} i
    for ((i = 0; i < t * 20; i++)); do
        curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# skip_unless_cuda_python NAMES: without a CUDA device, or without a python
# with torch and CUDA (PY, from pick_python.sh with NEED_CUDA=1) or a wsync
# built with CUDA, every test in NAMES is skipped saying why, and the script
# ends.
skip_unless_cuda_python() {
    local c why=
    if [ "$(cuda_devices)" = 0 ]; then
        why="no CUDA device"
    elif [ -z "$PY" ] || ! grep -q cuda <<<"$("$WSYNC" --version)"; then
        why="no python with torch and CUDA, or libwsync built without CUDA"
    fi
    [ -z "$why" ] && return 0
    for c in $1; do skip "$c" "$why"; done
    exit 0
}

# serve_local TAG [ARGS...]: a control endpoint on loopback (`wsync serve
# ARGS`), its output in $TMP/serve-TAG.log; sets PORT, URL and SERVE (its pid);
# 0 once it answers.
serve_local() {
    PORT=$(free_port)
    URL=http://127.0.0.1:$PORT
    bg "$WSYNC" serve --listen 127.0.0.1:$PORT "${@:2}" >"$TMP/serve-$1.log" 2>&1
    SERVE=$!
    wait_http "$URL/healthz"
}

# wait_registered URL ID: until engine node ID is registered at the control
# endpoint URL (up to 30 s).
wait_registered() {
    local i
    for ((i = 0; i < 300; i++)); do
        curl -fsS "$1/v1/status" 2>/dev/null | grep -q "\"id\":\"$2\"" && return 0
        sleep 0.1
    done
    return 1
}

# cuda_devices: how many CUDA devices the binary under test can use here
# (0 without nvidia-smi's GPUs, or when a one-version GPU demo says there is
# no CUDA device: a build without CUDA). The GPU tests skip on 0.
cuda_devices() {
    local n=0 probe
    if command -v nvidia-smi >/dev/null 2>&1; then n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU '); fi
    if [ "$n" != 0 ]; then
        probe=$(timeout 60 "$WSYNC" demo --device cuda --trainers 1 --engines 1 --local-ranks 1 --synthetic 1M \
                --versions 1 --chunk 256K 2>&1)
        grep -q 'no CUDA device' <<<"$probe" && n=0
    fi
    echo "$n"
}
