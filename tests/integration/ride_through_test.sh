#!/usr/bin/env bash
# Riding through the control endpoint, with real processes: `wsync serve` is
# killed with SIGKILL mid-run and restarted on the same port with the same
# --state; the trainer ranks keep going (no exit, every version published),
# the engines keep their held version and converge on the latest once it is
# back. A report the restart lost is sent again; an endpoint away past the
# grace period fails publish() naming the endpoint and how long it tried.
source "$(dirname "$0")/lib.sh"

port=$(free_port)
URL="http://127.0.0.1:$port"
STATE="$TMP/state.json"
start_serve() { bg "$WSYNC" serve --listen "127.0.0.1:$port" --state "$STATE" >>"$TMP/serve.log" 2>&1; SERVE=$!; }
start_serve
wait_http "$URL/healthz" || { fail ride_serve_started "control endpoint did not come up"; exit 1; }

status_py() { curl -fsS --max-time 5 "$URL/v1/status" 2>/dev/null | python3 -c "import json,sys; s=json.load(sys.stdin); $1" 2>/dev/null; }
latest() { status_py 'print(s.get("latest_version", 0))'; }
engine_version() { status_py "print(next((e['version'] for e in s['engines'] if e['id']=='$1'), 0))"; }
wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 10; i++)); do "$@" && return 0; sleep 0.1; done; return 1; }
at_least() { local v; v=$($1); [ -n "$v" ] && [ "$v" -ge "$2" ]; }
engines_at() { local e; for e in node-a-$$ node-b-$$; do [ "$(engine_version $e)" = "$1" ] || return 1; done; }

# --- 1. SIGKILL the endpoint mid-run, twice; restart it from its state file.
N=14
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --synthetic 4M --chunk 256K --versions $N \
        --interval-ms 150 >"$TMP/t$r.log" 2>&1; T[$r]=$!
done
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine node-a-$$ --local-rank $r --local-world 2 --follow \
        --timeout-ms 20000 >"$TMP/a$r.log" 2>&1; EA[$r]=$!
done
bg "$WSYNC" engine --control "$URL" --engine node-b-$$ --local-rank 0 --local-world 1 --follow --timeout-ms 20000 \
    >"$TMP/b0.log" 2>&1; EB=$!
for round in 1 2; do
    wait_until 60 at_least latest $((round * 4)) || fail ride_progress_before_kill_$round "latest=$(latest)"
    kill -9 $SERVE; wait $SERVE 2>/dev/null
    echo "round $round: endpoint killed at version $(grep -c 'published version' "$TMP/t0.log") of rank 0" >&2
    sleep 3                       # down for 3 s: everyone retries meanwhile
    alive=1
    for p in ${T[0]} ${T[1]} ${EA[0]} ${EA[1]} $EB; do kill -0 $p 2>/dev/null || alive=0; done
    check ride_everyone_alive_while_endpoint_down_$round [ $alive = 1 ]
    start_serve
    wait_http "$URL/healthz" || fail ride_serve_restarted_$round "no /healthz after restart"
done
if wait_until 90 at_least latest $N; then pass ride_trainers_publish_every_version
else fail ride_trainers_publish_every_version "latest=$(latest), want $N; $(tail -2 "$TMP/t0.log")"; fi
check ride_trainers_never_failed bash -c "! grep -q 'publish failed\|waiting for the other ranks' '$TMP/t0.log' '$TMP/t1.log'"
if wait_until 60 engines_at "$N"; then pass ride_engines_converge_after_restarts
else fail ride_engines_converge_after_restarts "node-a=$(engine_version node-a-$$) node-b=$(engine_version node-b-$$) want $N"; fi
check ride_no_verification_failure bash -c "! grep -q 'failed verification' '$TMP'/a*.log '$TMP'/b0.log"
check ride_retries_were_logged grep -q 'retrying for up to' "$TMP/t0.log" "$TMP/t1.log" "$TMP/a0.log"
check ride_trainers_still_running kill -0 ${T[0]} ${T[1]}
kill ${T[0]} ${T[1]} ${EA[0]} ${EA[1]} $EB 2>/dev/null; wait ${T[0]} ${T[1]} ${EA[0]} ${EA[1]} $EB 2>/dev/null

# --- 2. A report the restart lost: rank 0 reports version N+1 (world 2, so it
#        waits for rank 1), the endpoint dies before rank 1 reports and comes
#        back from its state file without rank 0's report; rank 0 sends it
#        again, and the version is published once rank 1 reports.
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 2 --synthetic 4M --chunk 256K --versions 1 \
    >"$TMP/l0.log" 2>&1; L0=$!
# Until the endpoint holds rank 0's report (rank 0 never logs "published"
# alone: it waits for rank 1; waiting for that line ran out after 30 s).
pending_is_1() { [ "$(status_py 'print(s.get("pending", 0))')" = 1 ]; }
wait_until 30 pending_is_1
pending=$(status_py 'print(s.get("pending", 0))')
kill -9 $SERVE; wait $SERVE 2>/dev/null
start_serve
wait_http "$URL/healthz" || fail ride_lost_report_restart "no /healthz"
check ride_lost_report_pending_before_kill [ "$pending" = 1 ]
bg "$WSYNC" trainer --control "$URL" --rank 1 --world 2 --synthetic 4M --chunk 256K --versions 1 \
    >"$TMP/l1.log" 2>&1; L1=$!
if wait_until 30 at_least latest $((N + 1)); then pass ride_lost_report_sent_again_version_published
else fail ride_lost_report_sent_again_version_published "latest=$(latest), want $((N + 1))"; fi
check ride_lost_report_logged grep -q 'lost this rank.s report' "$TMP/l0.log"
kill $L0 $L1 2>/dev/null; wait $L0 $L1 2>/dev/null

# --- 3. Away past the grace period: publish() fails, naming the endpoint and
#        how long it tried (grace 3 s here).
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 1000 \
    --interval-ms 300 >"$TMP/g.log" 2>&1; G=$!
wait_until 30 grep -q 'published version' "$TMP/g.log"
kill $G; wait $G 2>/dev/null
WSYNC_CONTROL_GRACE_MS=3000 bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 256K \
    --versions 1000 --interval-ms 300 >"$TMP/g2.log" 2>&1; G=$!
wait_until 30 grep -q 'published version' "$TMP/g2.log"
kill -9 $SERVE; wait $SERVE 2>/dev/null
t0=$SECONDS
for ((i = 0; i < 300; i++)); do kill -0 $G 2>/dev/null || break; sleep 0.1; done
wait $G; rc=$?
check ride_past_grace_trainer_exits_with_error [ "$rc" != 0 ]
check ride_past_grace_error_names_endpoint grep -q "127.0.0.1:$port" "$TMP/g2.log"
check ride_past_grace_error_says_how_long grep -Eq 'no answer for [0-9.]+ s' "$TMP/g2.log"
echo "past grace: exited $((SECONDS - t0)) s after the endpoint died: $(grep -E 'no answer for' "$TMP/g2.log" | tail -1)" >&2
