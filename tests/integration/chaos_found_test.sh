#!/usr/bin/env bash
# Races the chaos campaign (tests/chaos/chaos.py) found, each made
# deterministic here.
#
# --- 1. A local rank that starts while local rank 0 is being restarted joins
#        the new rank 0 instead of exiting (it exited with "cannot start: ...
#        closed the connection inside its handshake challenge" when rank 0 was
#        killed during its join). Rank 0 is stopped so that the join waits
#        inside the handshake, then killed and started again.
source "$(dirname "$0")/lib.sh"

port=$(free_port); URL=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$URL/healthz" || { fail board_join_control_up "$(tail -2 "$TMP/serve.log")"; exit 1; }
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 100000 \
    --interval-ms 300 >"$TMP/t.log" 2>&1
ENGINE=(engine --control "$URL" --engine bj$$ --local-world 2 --follow --timeout-ms 5000)
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 >"$TMP/e0.log" 2>&1; r0=$!
# Rank 0 serves its board on an abstract socket named after the engine.
for i in $(seq 1 200); do grep -q "@wsync/.*/bj$$\$" /proc/net/unix && break; sleep 0.05; done
kill -STOP $r0
bg "$WSYNC" "${ENGINE[@]}" --local-rank 1 >"$TMP/e1.log" 2>&1; r1=$!
sleep 1                                   # rank 1 now waits for rank 0's handshake challenge
kill -9 $r0
sleep 0.3
bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 >"$TMP/e0b.log" 2>&1
node_version() {
    curl -fsS "$URL/v1/status" 2>/dev/null | python3 -c "
import json, sys
print(next((e['version'] for e in json.load(sys.stdin)['engines'] if e['id'] == 'bj$$'), 0))" 2>/dev/null
}
ok=0
for i in $(seq 1 200); do v=$(node_version); [ "${v:-0}" -gt 0 ] && { ok=1; break; }; sleep 0.1; done
check board_join_rank1_survives_rank0_restart_during_join kill -0 $r1
if [ $ok = 1 ]; then pass board_join_node_ready_after_rank0_restart
else fail board_join_node_ready_after_rank0_restart "node holds ${v:-nothing}; rank 1: $(tail -2 "$TMP/e1.log")"; fi

# --- 2. A trainer restarted just as the control endpoint goes away numbers
#        its versions after the newest one the endpoint knows, once it
#        answers again (it took version 1 and exited on "HTTP 409: version 1
#        is not newer than the latest published"). The endpoint vanishes at
#        the exact request through drop_proxy.py: for 2 s, every request for
#        the latest version is cut off unanswered.
port=$(free_port); URL=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve2.log" 2>&1
wait_http "$URL/healthz" || { fail outage_start_control_up "$(tail -2 "$TMP/serve2.log")"; exit 1; }
TRAINER=(trainer --rank 0 --world 1 --synthetic 1M --chunk 256K)
bg "$WSYNC" "${TRAINER[@]}" --control "$URL" --versions 3 >"$TMP/t1.log" 2>&1; t1=$!
latest() { curl -fsS "$URL/v1/status" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["latest_version"])' 2>/dev/null; }
for i in $(seq 1 200); do [ "$(latest)" = 3 ] && break; sleep 0.05; done
kill $t1; wait $t1 2>/dev/null
pport=$(free_port)
bg python3 "$WSYNC_ROOT/tests/integration/drop_proxy.py" $pport $port 'GET /v1/versions/latest?after=0&timeout_ms=0' 2 \
    >"$TMP/proxy.log" 2>&1
for i in $(seq 1 100); do grep -q ready "$TMP/proxy.log" && break; sleep 0.05; done
bg "$WSYNC" "${TRAINER[@]}" --control "http://127.0.0.1:$pport" --versions 2 >"$TMP/t2.log" 2>&1; t2=$!
for i in $(seq 1 300); do [ "$(latest)" = 5 ] && break; sleep 0.05; done
grep dropped "$TMP/proxy.log" | tail -1 >&2
check outage_start_proxy_cut_the_latest_query grep -q dropped "$TMP/proxy.log"
if [ "$(latest)" = 5 ]; then pass outage_start_trainer_continues_after_latest
else fail outage_start_trainer_continues_after_latest "latest $(latest), wanted 5; trainer: $(tail -2 "$TMP/t2.log")"; fi
check outage_start_trainer_still_running kill -0 $t2
