#!/usr/bin/env bash
# Status tells the truth (issues 25.7, 25.13, 26.6), with real processes:
#  1. a trainer rank killed: status says it is gone (with when), the version
#     rank 0 reported waits as pending naming who has not reported it, rank 0
#     logs "reported version N", never "published version N" for it;
#     /metrics has the ranks' and engines' state;
#  2. an idle two-rank follower logs no "pull failed" while nothing is wrong;
#  3. an engine node that exited shows as exited, one killed as gone; past
#     --forget-after a node is removed (and stays removed across a restart);
#  4. a failed in-place pull that overwrote the only image: status shows the
#     node holds nothing, not the version it held before;
#  5. the same engine id from a second host is refused (409, saying why)
#     while the first runs, and status keeps one true entry.
source "$(dirname "$0")/lib.sh"
export WSYNC_HEARTBEAT_MS=300 # the engines' and trainers' heartbeats; the endpoint's lease is 2 s below

# wait_until SECONDS CMD...: until CMD succeeds.
wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 10; i++)); do "$@" && return 0; sleep 0.1; done; return 1; }
# jq_status URL PYEXPR: PYEXPR over d = GET URL/v1/status, printed.
jq_status() { curl -fsS "$1/v1/status" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }
engine_field() { jq_status "$1" "[e.get('$3') for e in d['engines'] if e['id']=='$2'] or ['absent']"; }
# field_is URL ID FIELD VALUE: engine ID's FIELD is VALUE now (as engine_field prints it).
field_is() { [ "$(engine_field "$1" "$2" "$3")" = "$4" ]; }
start_serve() { # start_serve NAME ARGS...: sets $U
    local port; port=$(free_port); U=http://127.0.0.1:$port
    bg "$WSYNC" serve --listen 127.0.0.1:$port "${@:2}" 2>"$TMP/$1.log" >/dev/null
    wait_http "$U/healthz" 10 || { fail "$1_started" "$(tail -3 "$TMP/$1.log")"; exit 1; }
}

# --- 1. a trainer rank killed after version 1 ---------------------------------
start_serve serve1 --lease 2s
U1=$U
for r in 0 1; do
    bg "$WSYNC" trainer --control "$U1" --rank $r --world 2 --synthetic 4M --chunk 256K --versions 3 \
        --interval-ms 2500 >"$TMP/t$r.log" 2>&1
    TPID[$r]=$!
done
for r in 0 1; do
    bg "$WSYNC" engine --control "$U1" --engine pair --local-rank $r --local-world 2 --follow --timeout-ms 1500 \
        >"$TMP/pair$r.log" 2>&1
    EPID[$r]=$!
done
wait_until 30 grep -q 'published version 1' "$TMP/t1.log" || fail version_1_published "$(tail -2 "$TMP/t1.log")"
wait_until 60 field_is "$U1" pair version "[1]" || fail pair_ready "$(tail -2 "$TMP/pair0.log")"
kill -9 "${TPID[1]}"
wait_until 30 grep -q 'reported version 2' "$TMP/t0.log" || fail rank0_reports_version_2 "$(tail -2 "$TMP/t0.log")"
gone() { [ "$(jq_status "$U1" "d['trainers'][1]['presence']")" = gone ]; }
if wait_until 15 gone; then pass killed_trainer_rank_shows_gone
else fail killed_trainer_rank_shows_gone "$(jq_status "$U1" "d['trainers']")"; fi
"$WSYNC" status --control "$U1" >"$TMP/table1" 2>&1
check table_trainer_ranks_live_and_gone_with_when grep -qE 'trainer ranks 1/2 live, gone: rank 1 \(.*last seen [0-9]+s ago\)' "$TMP/table1"
check table_pending_version_and_who_has_not_reported grep -q 'version 2 pending: reported by rank 0; not yet by rank 1' "$TMP/table1"
check json_pending_versions test "$(jq_status "$U1" "d['pending_versions'][0]['missing']")" = "[1]"
check rank0_never_says_published_for_a_pending_version bash -c "! grep -q 'published version 2' '$TMP/t0.log'"
curl -fsS "$U1/metrics" >"$TMP/metrics1"
check metrics_trainer_rank_down grep -q '^wsync_trainer_rank_up{rank="1"} 0' "$TMP/metrics1"
check metrics_versions_pending grep -q '^wsync_versions_pending 1' "$TMP/metrics1"
check metrics_engine_state grep -q '^wsync_engine_state{engine="pair",state="ready"} 1' "$TMP/metrics1"
check metrics_engine_last_sync grep -qE '^wsync_engine_last_sync_seconds\{engine="pair"\} [0-9.e-]+$' "$TMP/metrics1"
check metrics_engine_failures grep -q '^wsync_engine_failures_total{engine="pair"} 0' "$TMP/metrics1"
check metrics_engine_up grep -q '^wsync_engine_up{engine="pair"} 1' "$TMP/metrics1"

# --- 2. idle followers: several pull timeouts passed with nothing to pull -----
sleep 4
if ! grep -q 'pull failed' "$TMP/pair0.log" "$TMP/pair1.log"; then pass idle_two_rank_follower_no_false_failures
else fail idle_two_rank_follower_no_false_failures "$(grep -h 'pull failed' "$TMP"/pair*.log | head -2)"; fi

# --- 3. an engine that exited, one killed, one forgotten ----------------------
kill -TERM "${EPID[0]}" "${EPID[1]}"; wait "${EPID[0]}" "${EPID[1]}" 2>/dev/null
check exited_engine_not_live test "$(engine_field "$U1" pair presence)" = "['gone']"
check exited_engine_says_exited test "$(engine_field "$U1" pair exited)" = "[True]"
"$WSYNC" status --control "$U1" >"$TMP/table2" 2>&1
check table_exited_engine grep -qE '^pair +exited .*last seen' "$TMP/table2"
check metrics_exited_engine_down bash -c "curl -fsS '$U1/metrics' | grep -q '^wsync_engine_up{engine=\"pair\"} 0'"
bg "$WSYNC" engine --control "$U1" --engine solo --local-rank 0 --local-world 1 --follow --timeout-ms 1500 \
    >"$TMP/solo.log" 2>&1
SOLO=$!
# (It cannot get version 1: trainer rank 1 is dead. Its heartbeats keep it live.)
wait_until 20 field_is "$U1" solo presence "['live']"
sleep 3
check live_engine_stays_live field_is "$U1" solo presence "['live']"
kill -9 $SOLO
if wait_until 15 field_is "$U1" solo presence "['gone']"; then pass killed_engine_shows_gone
else fail killed_engine_shows_gone "$(engine_field "$U1" solo presence)"; fi
check killed_engine_not_exited test "$(engine_field "$U1" solo exited)" = "[False]"

start_serve serve2 --lease 2s --forget-after 5s --state "$TMP/st2/state.json"
S2=$!
for id in keep drop; do
    bg "$WSYNC" engine --control "$U" --engine $id --local-rank 0 --local-world 1 --follow --timeout-ms 1500 \
        >"$TMP/$id.log" 2>&1
done
DROP=$!
wait_until 20 field_is "$U" drop presence "['live']"
kill -9 $DROP
wait_until 40 field_is "$U" drop presence "['absent']"
check forget_after_removes_the_silent_node field_is "$U" drop presence "['absent']"
check forget_after_keeps_the_live_node field_is "$U" keep presence "['live']"
check forget_logged grep -q 'engine drop: forgotten' "$TMP/serve2.log"
kill -9 $S2; wait $S2 2>/dev/null
start_serve serve2b --state "$TMP/st2/state.json"
check forgotten_node_stays_forgotten_after_restart field_is "$U" drop presence "['absent']"
check kept_node_kept_after_restart field_is "$U" keep presence "['live']"

# --- 4. a failed in-place pull: the node holds nothing ------------------------
start_serve serve3
U3=$U
"$WSYNC" trainer --control "$U3" --rank 0 --world 1 --synthetic 4M --chunk 256K --versions 1 >"$TMP/ta.log" 2>&1 &
TA=$!; WSYNC_PIDS+=($TA)
timeout 60 "$WSYNC" engine --control "$U3" --engine ip --local-rank 0 --local-world 1 --mode in-place --versions 1 \
    --timeout-ms 10000 >"$TMP/ip1.log" 2>&1
check in_place_engine_held_version_1 field_is "$U3" ip version "[1]"
kill $TA; wait $TA 2>/dev/null
WSYNC_TEST_CORRUPT_PIECE=0 "$WSYNC" trainer --control "$U3" --rank 0 --world 1 --synthetic 4M --chunk 256K \
    --versions 1 >"$TMP/tb.log" 2>&1 &
TB=$!; WSYNC_PIDS+=($TB)
wait_until 30 grep -q 'published version 2' "$TMP/tb.log"
timeout 60 "$WSYNC" engine --control "$U3" --engine ip --local-rank 0 --local-world 1 --mode in-place --versions 1 \
    --max-failures 1 --timeout-ms 10000 >"$TMP/ip2.log" 2>&1
check in_place_pull_failed grep -q 'failed verification' "$TMP/ip2.log"
check failed_in_place_status_holds_nothing field_is "$U3" ip version "[0]"
"$WSYNC" status --control "$U3" >"$TMP/table3" 2>&1
check failed_in_place_table_holds_none grep -qE '^ip +exited +none +2 ' "$TMP/table3"
check failed_in_place_table_names_the_piece grep -qE '^ip .*piece 0 .*failed verification' "$TMP/table3"

# --- 5. one engine id from two hosts -------------------------------------------
bg "$WSYNC" engine --control "$U3" --engine twin --local-rank 0 --local-world 1 --follow --timeout-ms 1500 \
    >"$TMP/twin.log" 2>&1
wait_until 20 field_is "$U3" twin presence "['live']"
if unshare -u true 2>/dev/null; then
    out=$(timeout 30 unshare -u bash -c "hostname other-host-$$ && exec '$WSYNC' engine --control '$U3' --engine twin \
          --local-rank 0 --local-world 1 --versions 1 --timeout-ms 3000" 2>&1); rc=$?
    if [ $rc != 0 ] && grep -q "engine id 'twin' is registered from host $(hostname)" <<<"$out" &&
       grep -q 'give each node its own --engine id' <<<"$out"; then pass same_id_second_host_refused
    else fail same_id_second_host_refused "rc=$rc: $(tail -2 <<<"$out")"; fi
else
    code=$(curl -s -o "$TMP/dup" -w '%{http_code}' -X POST "$U3/v1/engines/register" \
           -d '{"id":"twin","host":"other-host","local_ranks":1}')
    if [ "$code" = 409 ] && grep -q 'give each node its own --engine id' "$TMP/dup"; then pass same_id_second_host_refused
    else fail same_id_second_host_refused "HTTP $code: $(cat "$TMP/dup")"; fi
fi
check same_id_one_true_entry test "$(engine_field "$U3" twin host)" = "['$(hostname)']"
check same_id_first_still_live test "$(engine_field "$U3" twin presence)" = "['live']"

# --- 6. a node that lost a rank says so, and says when it runs again -----------
bg "$WSYNC" engine --control "$U3" --engine half --local-rank 0 --local-world 2 --follow --timeout-ms 1500 \
    >"$TMP/half0.log" 2>&1
node_says_rank1() { engine_field "$U3" half node | grep -q 'local rank 1 .*not'; }
if wait_until 30 node_says_rank1; then pass node_lost_rank_in_status
else fail node_lost_rank_in_status "$(engine_field "$U3" half node)"; fi
"$WSYNC" status --control "$U3" >"$TMP/table6" 2>&1
check node_lost_rank_in_table grep -qE '^half .*NODE: .*local rank 1 .*not' "$TMP/table6"
bg "$WSYNC" engine --control "$U3" --engine half --local-rank 1 --local-world 2 --follow --timeout-ms 1500 \
    >"$TMP/half1.log" 2>&1
if wait_until 30 field_is "$U3" half node "[None]"; then pass node_rank_back_clears_the_note
else fail node_rank_back_clears_the_note "$(engine_field "$U3" half node)"; fi
