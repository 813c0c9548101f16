#!/usr/bin/env bash
# A node's local ranks when local rank 0 goes, or a rank is started twice
# (issue 25 items 7 and 8):
#
# --- 1. Rank 0 comes back with another --local-world: rank 1 says so and
#        keeps running (it died of SIGSEGV on a NULL board), and joins again
#        once rank 0 runs with the right one.
# --- 2. A second process as local rank 1 while the first runs is refused,
#        naming the rank, and the node keeps pulling (it was let in; when it
#        exited the node was stuck, rank 0 saying rank 1 was not running).
# --- 3. A rank killed while the node is idle: the node's report says it is
#        degraded (status said ready); the rank restarted, the node holds
#        its version on every rank again and is ready without a new version
#        (26 item 4), and pulls the next version.
# --- 4. Rank 0 down past rank 1's rejoin timeout (30 s; 5 s here, the restarted
#        rank 1 runs with WSYNC_TEST_REJOIN_MS=5000): rank 1 says what to
#        do and keeps running (SIGSEGV), and joins when rank 0 is back.
source "$(dirname "$0")/lib.sh"

port=$(free_port); URL=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$URL/healthz" || { fail rejoin_control_up "$(tail -2 "$TMP/serve.log")"; exit 1; }
TRAINER=(trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 256K)
bg "$WSYNC" "${TRAINER[@]}" --versions 100000 --interval-ms 500 >"$TMP/t.log" 2>&1; T=$!
ENGINE=(engine --control "$URL" --engine rj$$ --follow --timeout-ms 5000)
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 --local-world 2 >"$TMP/e0.log" 2>&1; R0=$!
bg "$WSYNC" "${ENGINE[@]}" --local-rank 1 --local-world 2 >"$TMP/e1.log" 2>&1; R1=$!

# node_at: "VERSION STATE LAST_ERROR" of the node at the endpoint.
node_at() {
    curl -fsS "$URL/v1/status" 2>/dev/null | python3 -c "
import json, sys
e = next((e for e in json.load(sys.stdin)['engines'] if e['id'] == 'rj$$'), {})
print(e.get('version', 0), e.get('state', '-'), e.get('last_error', ''))" 2>/dev/null
}
# ready_after V [SECONDS]: until the node is ready at a version newer than V.
ready_after() {
    local i n=$((${2:-20} * 10))
    for ((i = 0; i < n; i++)); do
        set -- "$1" $(node_at)
        [ "${2:-0}" -gt "$1" ] && [ "${3:-}" = ready ] && return 0
        sleep 0.1
    done
    return 1
}
version_now() { set -- $(node_at); echo "${1:-0}"; }

ready_after 0 30 || { fail rejoin_node_ready "node: $(node_at); rank 0: $(tail -2 "$TMP/e0.log")"; exit 1; }

# --- 1 ------------------------------------------------------------------
kill -9 $R0; wait $R0 2>/dev/null
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 --local-world 3 >"$TMP/e0w3.log" 2>&1; R0=$!
for i in $(seq 1 100); do grep -q 'local-world 3' "$TMP/e1.log" && break; sleep 0.1; done
sleep 1
check rejoin_other_world_rank1_survives kill -0 $R1
if grep -q 'local rank 0 runs with --local-world 3, this rank was started with 2' "$TMP/e1.log" &&
    grep -q 'same --local-world' "$TMP/e1.log"; then pass rejoin_other_world_says_what_to_do
else fail rejoin_other_world_says_what_to_do "rank 1: $(tail -3 "$TMP/e1.log")"; fi
kill -9 $R0; wait $R0 2>/dev/null
v=$(version_now)
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 --local-world 2 >"$TMP/e0b.log" 2>&1; R0=$!
if ready_after "$v" 30; then pass rejoin_other_world_then_right_world_pulls
else fail rejoin_other_world_then_right_world_pulls "node: $(node_at); rank 1: $(tail -2 "$TMP/e1.log")"; fi

# --- 2 ------------------------------------------------------------------
bg "$WSYNC" "${ENGINE[@]}" --local-rank 1 --local-world 2 >"$TMP/dup.log" 2>&1; D=$!
for i in $(seq 1 150); do kill -0 $D 2>/dev/null || break; sleep 0.1; done
if kill -0 $D 2>/dev/null; then
    fail rejoin_duplicate_rank_refused "a second local rank 1 still runs after 15 s: $(tail -2 "$TMP/dup.log")"
    kill $D 2>/dev/null; wait $D 2>/dev/null
else
    wait $D; rc=$?
    if [ $rc != 0 ] && grep -q "local rank 1 is already running (pid $R1)" "$TMP/dup.log"; then
        pass rejoin_duplicate_rank_refused
    else fail rejoin_duplicate_rank_refused "exit $rc: $(tail -2 "$TMP/dup.log")"; fi
fi
v=$(version_now)
if ready_after "$v" 20; then pass rejoin_duplicate_node_keeps_pulling
else fail rejoin_duplicate_node_keeps_pulling "node: $(node_at); rank 0: $(tail -2 "$TMP/e0b.log")"; fi

# --- 3 ------------------------------------------------------------------
kill $T; wait $T 2>/dev/null
# One more version, then the trainer idles, serving it: the node is idle, ready.
v=$(version_now)
bg "$WSYNC" "${TRAINER[@]}" --versions 1 >"$TMP/t1.log" 2>&1; T=$!
ready_after "$v" 30 || fail rejoin_idle_version_ready "node: $(node_at)"
sleep 1
v=$(version_now)
kill -9 $R1; wait $R1 2>/dev/null
ok=0
for i in $(seq 1 50); do node_at | grep -q "^$v failed node degraded: local rank 1 (pid $R1) is gone" && { ok=1; break; }; sleep 0.1; done
if [ $ok = 1 ]; then pass rejoin_lost_rank_node_reports_degraded
else fail rejoin_lost_rank_node_reports_degraded "5 s after rank 1 was killed the node says: $(node_at)"; fi
bg env WSYNC_TEST_REJOIN_MS=5000 "$WSYNC" "${ENGINE[@]}" --local-rank 1 --local-world 2 >"$TMP/e1b.log" 2>&1; R1=$!
ok=0
for i in $(seq 1 100); do grep -q "node degraded: local rank 1 was replaced" "$TMP/e0b.log" && { ok=1; break; }; sleep 0.1; done
if [ $ok = 1 ]; then pass rejoin_replaced_rank_node_says_so
else fail rejoin_replaced_rank_node_says_so "node: $(node_at); rank 0: $(tail -2 "$TMP/e0b.log")"; fi
# The restarted rank joined the idle node: the node pulls the version it
# holds again, so every rank holds it, and is ready at that same version
# (no new one is published; it stayed "node degraded" until the next).
ok=0
for i in $(seq 1 200); do set -- $(node_at); [ "${1:-}" = "$v" ] && [ "${2:-}" = ready ] && { ok=1; break; }; sleep 0.1; done
latest=$(curl -fsS "$URL/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["latest_version"])')
if [ $ok = 1 ] && [ "$latest" = "$v" ]; then pass rejoin_restarted_rank_idle_node_ready_without_a_new_version
else fail rejoin_restarted_rank_idle_node_ready_without_a_new_version "node: $(node_at) (latest $latest, held $v)"; fi
kill $T; wait $T 2>/dev/null
bg "$WSYNC" "${TRAINER[@]}" --versions 100000 --interval-ms 500 >"$TMP/t2.log" 2>&1; T=$!
if ready_after "$v" 30; then pass rejoin_restarted_rank_node_ready_again
else fail rejoin_restarted_rank_node_ready_again "node: $(node_at)"; fi

# --- 4 ------------------------------------------------------------------
kill -9 $R0; wait $R0 2>/dev/null
for i in $(seq 1 450); do grep -q 'could not rejoin' "$TMP/e1b.log" && break; sleep 0.1; done
sleep 2                                   # the next pull starts another rejoin (it crashed here)
check rejoin_rank0_down_rank1_survives kill -0 $R1
if grep -q 'could not rejoin the node: .*restart local rank 0' "$TMP/e1b.log"; then pass rejoin_rank0_down_says_what_to_do
else fail rejoin_rank0_down_says_what_to_do "rank 1: $(tail -2 "$TMP/e1b.log")"; fi
v=$(version_now)
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 --local-world 2 >"$TMP/e0c.log" 2>&1; R0=$!
if ready_after "$v" 45; then pass rejoin_rank0_back_node_pulls
else fail rejoin_rank0_back_node_pulls "node: $(node_at); rank 1: $(tail -2 "$TMP/e1b.log")"; fi
