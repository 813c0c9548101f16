#!/usr/bin/env bash
# A local rank that starts while local rank 0 is being restarted joins the new
# rank 0 instead of exiting (found by the chaos campaign: rank 1 exited with
# "cannot start: ... closed the connection inside its handshake challenge"
# when rank 0 was killed during rank 1's join). Rank 0 is stopped so that the
# join waits inside the handshake, then killed and started again.
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
