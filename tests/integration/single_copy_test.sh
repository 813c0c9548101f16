#!/usr/bin/env bash
# Single-copy publishing (wsync trainer --single-copy: WSYNC_PUBLISH_SINGLE_COPY
# and wsync_publisher_wait_held) with real processes on host memory, trainer
# and engine under one host id (the same contract as a shared GPU): engines
# copy each version straight out of the trainer's memory, and the trainer
# writes the next version's bytes into that memory right after wait_held
# returns. Every dumped version must equal the safetensors file (written by
# python, not wsync) it was published from: staged and in place, and with an
# engine stopped (SIGSTOP) past the hold timeout, whose version must not be
# torn (the trainer reports the timeout, the engine fails that version and
# keeps the one it held, then takes the next).
source "$(dirname "$0")/lib.sh"

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
python3 "$ST" make "$TMP/m" 3 >/dev/null
FILES="$TMP/m0.safetensors,$TMP/m1.safetensors,$TMP/m2.safetensors"

# dumps_match DIR V...: each dumped version V equals file (V-1) mod 3.
dumps_match() {
    local dir=$1 v ok=0
    shift
    for v in "$@"; do
        python3 "$ST" compare "$TMP/m$(((v - 1) % 3)).safetensors" "$dir/e0/rank0/v$v.safetensors" || ok=1
    done
    return $ok
}


# wait_for FILE PATTERN SECONDS
wait_for() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

for mode in staged in-place; do
    serve_local $mode
    bg "$WSYNC" engine --control "$URL" --engine e0 --local-rank 0 --local-world 1 --mode $mode --host-id hc \
        --versions 3 --dump "$TMP/d-$mode" >"$TMP/e-$mode.log" 2>&1
    E=$!
    wait_registered "$URL" e0 # wait_held waits only for the nodes of its host registered when it looks
    "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 3 --chunk 64K \
        --single-copy --hold-timeout-ms 60000 --host-id hc --exit-after-publish >"$TMP/t-$mode.log" 2>&1
    trc=$?
    wait $E
    erc=$?
    held=$(grep -c "held by the engine nodes on this host" "$TMP/t-$mode.log")
    if [ $trc = 0 ] && [ $erc = 0 ] && [ "$held" = 3 ] && dumps_match "$TMP/d-$mode" 1 2 3; then
        pass single_copy_${mode//-/_}_every_version_held_intact
    else
        fail single_copy_${mode//-/_}_every_version_held_intact \
            "trainer rc=$trc engine rc=$erc held=$held: $(tail -3 "$TMP/t-$mode.log") $(tail -3 "$TMP/e-$mode.log")"
    fi
done

# An engine that is stopped while version 2 waits to be held: wait_held times
# out and says which engine it waited for; the trainer then writes version 3's
# bytes. The engine, resumed, must not hold a torn version 2.
serve_local slow
bg "$WSYNC" engine --control "$URL" --engine e0 --local-rank 0 --local-world 1 --mode staged --host-id hc \
    --versions 2 --max-failures 1000 --dump "$TMP/d-slow" >"$TMP/e-slow.log" 2>&1
E=$!
wait_registered "$URL" e0
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 3 --chunk 64K \
    --single-copy --hold-timeout-ms 3000 --interval-ms 1000 --host-id hc --exit-after-publish >"$TMP/t-slow.log" 2>&1
T=$!
ok=1
if wait_for "$TMP/t-slow.log" "version 1 held" 60 && wait_for "$TMP/e-slow.log" "version 1 ready" 30; then
    kill -STOP $E
    wait_for "$TMP/t-slow.log" "version 2 not held" 60 || ok=0
    kill -CONT $E
else
    ok=0
fi
wait $T
trc=$?
wait $E
erc=$?
line=$(grep "version 2 not held" "$TMP/t-slow.log")
if [ $ok = 1 ] && [ $trc = 0 ] && grep -q "not held (timeout" <<<"$line" && grep -q "engine e0" <<<"$line"; then
    pass single_copy_hold_timeout_reported
else
    # a sanitizer's report whole (a rare LeakSanitizer report of libcrypto blocks under make asan, ~1 run in 50,
    # showed only its first frames), else the log's end
    fail single_copy_hold_timeout_reported "ok=$ok trainer rc=$trc: $(grep -A60 -m1 'Sanitizer' "$TMP/t-slow.log" ||
        tail -4 "$TMP/t-slow.log")"
fi
# Version 2 was released after the timeout: the engine's pull of it fails (or,
# had its bytes all arrived first, holds it whole); never a torn one.
v2ok=1
[ -f "$TMP/d-slow/e0/rank0/v2.safetensors" ] && { dumps_match "$TMP/d-slow" 2 || v2ok=0; }
if [ $erc = 0 ] && dumps_match "$TMP/d-slow" 1 3 && [ $v2ok = 1 ] &&
    { grep -q "released" "$TMP/e-slow.log" || [ -f "$TMP/d-slow/e0/rank0/v2.safetensors" ]; }; then
    pass single_copy_slow_engine_not_torn
else
    fail single_copy_slow_engine_not_torn "engine rc=$erc v2ok=$v2ok: $(tail -4 "$TMP/e-slow.log")"
fi
