#!/usr/bin/env bash
# Issue 26.2: every long-running command, and a Python pull, stops within a
# second of SIGINT or SIGTERM (asserted <= 3 s: a loaded machine), cleanly:
# no child left running, no shared-memory file left in /dev/shm. Before the
# fix: a trainer whose endpoint is down 57 s, an engine following 62 s, rank
# 1 of a two-rank node 117 s, a Python pull(timeout=30) 30 s, the demo as
# long as its children, a Python Receiver(...) waiting for its endpoint or
# its local rank 0 as long as that wait (until 26.2's last item). In the SIGTERM round the endpoint holds a version
# whose trainer is gone (the SIGINT round's), so the engines are in the
# middle of a pull that cannot finish when the signal comes.
source "$(dirname "$0")/lib.sh"
LIMIT=3
export WSYNC_HOST_ID=signals-$$
shm_before=$(ls /dev/shm 2>/dev/null | sort)

# stops_within NAME SIG PID: send SIG to PID, PASS when it exits within LIMIT s.
stops_within() {
    local name=$1 sig=$2 pid=$3 t0 t1 i
    t0=$(date +%s%N)
    kill -"$sig" "$pid" 2>/dev/null
    for i in $(seq $((LIMIT * 50))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.02
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "$name" "still running ${LIMIT} s after SIG$sig"
        kill -9 "$pid" 2>/dev/null
        return 1
    fi
    wait "$pid" 2>/dev/null
    t1=$(date +%s%N)
    echo "  $name: exited $(( (t1 - t0) / 1000000 )) ms after SIG$sig" >&2
    pass "$name"
}

port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
spid=$!
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }

for sig in INT TERM; do
    # A trainer whose control endpoint is down: retrying its registration.
    dead=$(free_port)
    bg "$WSYNC" trainer --control http://127.0.0.1:$dead --rank 0 --world 1 --synthetic 1M >"$TMP/t$sig.log" 2>&1
    p=$!; sleep 1
    stops_within trainer_endpoint_down_sig$sig $sig $p

    # An engine following: waiting in the long poll for a version.
    bg "$WSYNC" engine --control "$url" --engine f$sig --local-rank 0 --local-world 1 --follow >"$TMP/f$sig.log" 2>&1
    p=$!; sleep 1.5
    stops_within engine_follow_sig$sig $sig $p

    # A two-rank node: rank 1 waits on the board for rank 0's attempt; the
    # signal to rank 1 alone, then to rank 0.
    for r in 0 1; do
        bg "$WSYNC" engine --control "$url" --engine n$sig --local-rank $r --local-world 2 --follow \
            >"$TMP/n$sig$r.log" 2>&1
        np[$r]=$!
    done
    sleep 2
    stops_within engine_rank1_of_two_sig$sig $sig "${np[1]}"
    stops_within engine_rank0_of_two_sig$sig $sig "${np[0]}"

    # A trainer serving its versions (published, waiting for pulls).
    bg "$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 1M --versions 1 >"$TMP/s$sig.log" 2>&1
    p=$!
    for _ in $(seq 100); do grep -q 'published version' "$TMP/s$sig.log" && break; sleep 0.05; done
    stops_within trainer_serving_sig$sig $sig $p

    # A single-copy trainer in wsync_publisher_wait_held: an engine node of
    # its host is registered but still setting up (the test hook), so the
    # version is not held and the wait would last --hold-timeout-ms. Two
    # versions: the trainer waits for the first to be held before it writes
    # the second (with --versions 1 it only served, and the wait for a
    # "version 1" line, never written as versions continue from the newest,
    # ran out after 5 s).
    WSYNC_TEST_SETUP_DELAY_MS=30000 bg "$WSYNC" engine --control "$url" --engine h$sig --local-rank 0 \
        --local-world 1 --versions 1 >"$TMP/h$sig.log" 2>&1
    hp=$!
    wait_registered "$url" h$sig
    bg "$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 1M --versions 2 --single-copy \
        --hold-timeout-ms 60000 >"$TMP/w$sig.log" 2>&1
    p=$!
    for _ in $(seq 100); do grep -q 'published version' "$TMP/w$sig.log" && break; sleep 0.05; done
    sleep 1
    stops_within trainer_waiting_held_sig$sig $sig $p
    kill -9 "$hp" 2>/dev/null; wait "$hp" 2>/dev/null

    # The demo while its engines set up (slowed by the test hook): the
    # signal reaches its children, which it reaps.
    WSYNC_TEST_SETUP_DELAY_MS=30000 bg "$WSYNC" demo --synthetic 4M --chunk 1M --versions 2 >"$TMP/d$sig.log" 2>&1
    p=$!
    for _ in $(seq 200); do grep -q 'trainer rank 1' "$TMP/d$sig.log" && break; sleep 0.05; done
    sleep 1
    kids=$(pgrep -P "$p" | tr '\n' ' ')
    stops_within demo_sig$sig $sig $p
    left=""
    for k in $kids; do kill -0 "$k" 2>/dev/null && left="$left $k"; done
    check demo_children_reaped_sig$sig [ -z "$left" ]
    [ -z "$left" ] || kill -9 $left 2>/dev/null

    # `wsync status --watch` into a file: tables one after another, no
    # terminal codes (26.8); it stops at SIGTERM (it keeps the default
    # actions, and a script's background job starts with SIGINT ignored).
    if [ $sig = TERM ]; then
        bg "$WSYNC" status --control "$url" --watch >"$TMP/watch.out" 2>&1
        p=$!; sleep 2.5
        stops_within status_watch_sig$sig $sig $p
        check status_watch_to_a_file_has_no_terminal_codes sh -c "! grep -q \$(printf '\\033') '$TMP/watch.out'"
        check status_watch_to_a_file_has_tables sh -c "[ \$(grep -cxF \"\$(head -1 '$TMP/watch.out')\" '$TMP/watch.out') -ge 2 ]"
    fi

    # The control endpoint itself.
    if [ $sig = TERM ]; then stops_within serve_sig$sig $sig $spid; fi
done

# Python: pull(timeout=30) waiting for a version raises KeyboardInterrupt
# at Ctrl-C (SIGINT) within a second, and the receiver can pull again.
PY=/usr/bin/python3
if nm -D "${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" 2>/dev/null | grep -q ' U __asan_init'; then
    # Python loads an AddressSanitizer libwsync.so only with the runtime preloaded.
    skip python_pull_sigint "libwsync.so is an AddressSanitizer build (make asan): Python runs in make test"
elif ! $PY -c 'import torch' 2>/dev/null; then
    skip python_pull_sigint "no torch for $PY (make deps installs python3-torch)"
else
    port=$(free_port); url=http://127.0.0.1:$port
    bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve2.log" 2>&1
    wait_http "$url/healthz" 10 || { fail serve2_started "$(tail -3 "$TMP/serve2.log")"; exit 0; }
    cat >"$TMP/pull.py" <<PYEOF
import signal, sys, time, wsync
# A background job of a script starts with SIGINT ignored: take the usual Ctrl-C.
signal.signal(signal.SIGINT, signal.default_int_handler)
r = wsync.Receiver("$url", "py$$", 0, 1)
p = r.progress()  # the C library's wsync_receiver_progress (26.9)
if p["phase"] == "idle" and set(p) == {"phase", "version", "done", "total", "elapsed_s", "last_setup_s"}:
    print("progress idle", flush=True)
print("waiting", flush=True)
t0 = time.monotonic()
try:
    r.pull(timeout=30)
    print("pulled?!", flush=True)
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - t0), flush=True)
try:
    r.pull(timeout=0.2)
except wsync.TimeoutError:
    print("pulls again", flush=True)
r.close()
PYEOF
    PYTHONPATH="$WSYNC_ROOT/python" WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so \
        bg $PY "$TMP/pull.py" >"$TMP/pull.log" 2>&1
    p=$!
    for _ in $(seq 200); do grep -q waiting "$TMP/pull.log" && break; sleep 0.05; done
    sleep 1
    # KeyboardInterrupt within LIMIT s of the signal (the interpreter's own
    # exit, torch loaded, may take longer on a loaded machine: 10 s for it).
    kill -INT $p
    for i in $(seq $((LIMIT * 50))); do grep -q 'interrupted after' "$TMP/pull.log" && break; sleep 0.02; done
    check python_pull_raised_keyboardinterrupt grep -q 'interrupted after' "$TMP/pull.log"
    for i in $(seq 500); do kill -0 $p 2>/dev/null || break; sleep 0.02; done
    check python_exits_after_the_interrupt sh -c "! kill -0 $p 2>/dev/null"
    check python_receiver_pulls_after_an_interrupt grep -q 'pulls again' "$TMP/pull.log"
    check python_receiver_progress grep -q 'progress idle' "$TMP/pull.log"
    grep -q 'pulls again' "$TMP/pull.log" || cat "$TMP/pull.log" >&2

    # Python: constructing a Receiver that waits -- for a control endpoint
    # that is down (rank 0 registers the node, retrying), for a local rank
    # 0 that never comes (rank 1 of 2 waits for its board) -- raises
    # KeyboardInterrupt at SIGINT within a second, and the process exits
    # (it waited up to the endpoint's grace period, 30 s for rank 0, before).
    dead=$(free_port)
    for c in "endpoint_down http://127.0.0.1:$dead 0" "rank0_never_comes $url 1"; do
        set -- $c
        cat >"$TMP/ctor_$1.py" <<PYEOF
import signal, sys, time, wsync
signal.signal(signal.SIGINT, signal.default_int_handler)
print("constructing", flush=True)
t0 = time.monotonic()
try:
    wsync.Receiver("$2", "ctor-$1-$$", $3, 2)
    print("constructed?!", flush=True)
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - t0), flush=True)
PYEOF
        PYTHONPATH="$WSYNC_ROOT/python" WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so \
            bg $PY "$TMP/ctor_$1.py" >"$TMP/ctor_$1.log" 2>&1
        p=$!
        for _ in $(seq 200); do grep -q constructing "$TMP/ctor_$1.log" && break; sleep 0.05; done
        sleep 1.5
        t0=$(date +%s%N)
        kill -INT $p
        for i in $(seq $((LIMIT * 50))); do grep -q 'interrupted after' "$TMP/ctor_$1.log" && break; sleep 0.02; done
        t1=$(date +%s%N)
        echo "  python_receiver_construction_$1: KeyboardInterrupt $(( (t1 - t0) / 1000000 )) ms after SIGINT" >&2
        check python_receiver_construction_${1}_raised_keyboardinterrupt grep -q 'interrupted after' "$TMP/ctor_$1.log"
        for i in $(seq 500); do kill -0 $p 2>/dev/null || break; sleep 0.02; done
        check python_receiver_construction_${1}_exits sh -c "! kill -0 $p 2>/dev/null"
        grep -q 'interrupted after' "$TMP/ctor_$1.log" || cat "$TMP/ctor_$1.log" >&2
        kill -9 $p 2>/dev/null; wait $p 2>/dev/null
    done
fi

sleep 0.2
shm_after=$(ls /dev/shm 2>/dev/null | sort)
new=$(comm -13 <(echo "$shm_before") <(echo "$shm_after") | grep -i wsync || true)
check no_dev_shm_leftovers [ -z "$new" ]
