#!/usr/bin/env bash
# Issue 26.9, the small ones on the command line: `serve` beyond loopback
# without a token warns; `--transport nccl` without a CUDA device and an
# unknown transport are refused when the engine starts (nccl was tried 5
# times per rank); a 200-character engine id is refused with the limit (the
# message was about local socket names).
source "$(dirname "$0")/lib.sh"
export WSYNC_HOST_ID=smallones-$$

port=$(free_port)
bg "$WSYNC" serve --listen 0.0.0.0:$port >"$TMP/open.out" 2>"$TMP/open.err"
wait_http "http://127.0.0.1:$port/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/open.err")"; exit 0; }
check serve_beyond_loopback_without_token_warns grep -q 'warning: listening on 0.0.0.0.* without a token' "$TMP/open.err"
port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/lo.out" 2>"$TMP/lo.err"
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/lo.err")"; exit 0; }
check serve_on_loopback_does_not_warn sh -c "! grep -q warning '$TMP/lo.err'"

# engine_refused NAME NEEDLE ARGS...: exits non-zero within 5 s, stderr naming NEEDLE.
engine_refused() {
    local name=$1 needle=$2 t0 rc
    shift 2
    t0=$(date +%s)
    timeout 60 "$WSYNC" engine --control "$url" --local-rank 0 --local-world 1 --versions 1 "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    if [ $rc -ne 0 ] && [ $(($(date +%s) - t0)) -le 5 ] && grep -q -- "$needle" "$TMP/$name.err"; then pass "$name"
    else fail "$name" "exit $rc after $(($(date +%s) - t0)) s: $(tail -2 "$TMP/$name.err" | tr '\n' '|')"; fi
}
if [ "$(cuda_devices)" = 0 ]; then
    engine_refused nccl_without_cuda_refused_at_start 'transport nccl needs a CUDA device' --engine n1 --transport nccl
else
    skip nccl_without_cuda_refused_at_start "this machine has CUDA devices"
fi
engine_refused unknown_transport_refused_at_start "unknown transport 'carrier-pigeon'" --engine n2 \
    --transport carrier-pigeon
engine_refused long_engine_id_names_the_limit 'at most 64' --engine "$(printf 'e%.0s' $(seq 200))"
