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
