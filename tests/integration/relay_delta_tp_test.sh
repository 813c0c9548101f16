#!/usr/bin/env bash
# relay_delta_tp_test.sh: relays serve deltas to nodes of targets (docs/DELTA.md,
# item 9), across hosts in network namespaces: the control endpoint, two
# trainer ranks (fsdp shards), and TP=2 engine nodes (two local ranks each,
# tp_tool.py's rules) on hosts of their own, plan relay:1 (a chain), staged.
# Versions made by real AdamW steps (tests/tools/adamw_versions.py, as
# relay_delta_test and delta_pull_test).
#   (a) trainer ranks -> n0 -> n1: n0 takes every version after the first as
#       deltas from the trainer ranks, n1 as deltas from n0's relay (its
#       other image slots keep the version before, verified on both ranks);
#       every TP slice of every version on both nodes equal to tp_tool.py's
#       (stdlib Python, not wsync); n1's log puts the bytes on the wire of
#       each version below a quarter of its puts, and n0's relay logs its
#       puts as deltas per version and rank;
#   (b) n1's held version is corrupted once by the fault hook (put 40 of
#       its node plan) before its first delta pull: the put fails the
#       digest the relay's answer gives, its chunk is re-fetched in full
#       from its trainer rank, and the version is ready with the right
#       bytes; the node's status counts the re-fetch;
#   (c) a late joiner (zzz, below n1 in the chain) holds no base: its first
#       version comes in full puts from n1's relay, its slices right;
#   (d) the relay stopped (SIGSTOP, its node's local rank 0) after the first
#       version: each rank of its child gives it up after relay_stall_ms and
#       gets the next version as deltas from the trainer ranks, slices right.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"

NAME=relay_delta_tp
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then skip "$NAME" "no python3 with torch and numpy at $PY"; exit 0; fi
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/versions_lib.sh"
netns_deploy "$NAME" wp 85 3 || exit $(($? - 1)) # 1: skipped, 2: failed

make_versions 5 || { fail "$NAME"_versions "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
NV=6

# tpnode E ID VERSIONS [ENV...]: a TP=2 node (two local ranks) on host E; pids in TP_PIDS.
tpnode() {
    local e=$1 id=$2 nv=$3 r
    shift 3
    for r in 0 1; do
        ip netns exec "${ENS[$e]}" env WSYNC_LOG=info WSYNC_TRACE=1 WSYNC_RELAY_STALL_MS=30000 "$@" "$WSYNC" engine \
            --control "$URL" --engine "$id" --local-rank $r --local-world 2 --tp 2 --mode staged --plan relay:1 \
            --versions "$nv" --transport tcp --bind "${EIP[$e]}" --timeout-ms 60000 --dump "$TMP/d" \
            >"$TMP/$id-r$r.log" 2>&1 &
        WSYNC_PIDS+=($!); TP_PIDS+=($!)
    done
}

# trainers TAG VERSIONS INTERVAL_MS: two trainer ranks (fsdp shards), each next version once both nodes
# hold the last (and INTERVAL_MS passed).
trainers() {
    local r
    TRAINERS=()
    for r in 0 1; do
        bg ip netns exec "$TNS" "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp \
            --safetensors "$FILES" --versions "$2" --wait-engines 2 --interval-ms "$3" --chunk 256K --listen "$TIP:0" \
            --advertise "$TIP" >"$TMP/$1-t$r.log" 2>&1
        TRAINERS+=($!)
    done
}

serve chain || exit 1
TP_PIDS=()
tpnode 0 n0 $NV
tpnode 1 n1 $NV WSYNC_TEST_CORRUPT_HELD=40
wait_until 30 registered 2 || { fail "$NAME"_nodes_registered "not 2 relays registered"; exit 1; }
trainers chain $NV 0
# (c) the late joiner, once n1 holds version 3: it hangs below n1 (its id sorts last).
wait_until 90 test -s "$TMP/d/n1/rank1/v3.safetensors"
NODES=("${TP_PIDS[@]}")
TP_PIDS=()
tpnode 2 zzz 1
if wait_all 180 "${NODES[@]}" "${TP_PIDS[@]}"; then pass tp_chain_every_node_holds_every_version
else fail tp_chain_every_node_holds_every_version "$(tail -n 2 "$TMP"/n*-r*.log "$TMP"/zzz-r*.log | tr '\n' ' ')"; fi
check tp_chain_every_slice_equal_at_every_version tp_equal "$TMP/d/n0" $(seq 1 $NV)
check tp_chain_child_every_slice_equal_at_every_version tp_equal "$TMP/d/n1" $(seq 1 $NV)

# (a) every version after the first as deltas on both nodes (n1's through n0's relay), below a quarter.
ok=0
for v in $(seq 1 $NV); do # n1 pulled every version through n0's relay, on both ranks
    for r in 0 1; do grep -q "version $v from the relay of engine n0 " "$TMP/n1-r$r.log" || ok=1; done
done
if $PY "$WSYNC_ROOT/tests/tools/wire_check.py" $NV puts "$TMP"/n1-r*.log &&
    $PY "$WSYNC_ROOT/tests/tools/wire_check.py" $NV puts "$TMP"/n0-r*.log && [ $ok = 0 ]; then
    pass tp_chain_child_gets_deltas_from_the_relay
else
    fail tp_chain_child_gets_deltas_from_the_relay "$(grep -h 'puts as deltas\|delta base\|given up' "$TMP"/n1-r*.log | head -4)"
fi
relayed=$(cat "$TMP"/n0-r0.log | grep -c "engine n0's relay: version [2-6] to engine n1 rank [01]: [1-9][0-9]* puts as deltas from version [1-5]")
if [ "$relayed" = $((2 * (NV - 1))) ]; then pass tp_chain_relay_logs_its_deltas
else fail tp_chain_relay_logs_its_deltas "$relayed relay lines, want $((2 * (NV - 1))): $(grep -h "relay:" "$TMP"/n0-r0.log | head -3)"; fi

# (b) n1's corrupted base: caught by the relay's digest of the put, re-fetched in full from its trainer rank.
ip netns exec "$CNS" curl -fsS "$URL/v1/status" >"$TMP/status.json"
if grep -qh "put 40 (trainer rank [01]) applied as a delta from version 1 through the relay of engine n0 failed verification against version 2.s digests (tensor '.*'): re-fetching it in full" \
    "$TMP"/n1-r*.log && grep -qh 'version 2: .*; 1 re-fetched in full after a failed check' "$TMP"/n1-r*.log &&
    $PY -c 'import json, sys
e = {e["id"]: e.get("delta") or {} for e in json.load(open(sys.argv[1]))["engines"]}
assert e["n1"]["refetched_total"] == 1 and e["n1"]["pieces"] > 0, e["n1"]' "$TMP/status.json"; then
    pass tp_chain_corrupted_base_refetched_in_full
else
    fail tp_chain_corrupted_base_refetched_in_full "$(grep -h 'hook\|re-fetch\|version 2:' "$TMP"/n1-r*.log | head -4)"
fi

# (c) the late joiner: its first (only) version in full puts from n1's relay.
zv=$(ls "$TMP/d/zzz/rank0/" 2>/dev/null | sed -n 's/^v\([0-9]*\)\.safetensors$/\1/p' | head -1)
if [ -n "$zv" ] && tp_equal "$TMP/d/zzz" "$zv" && grep -q "version $zv from the relay of engine n1 " "$TMP/zzz-r0.log" &&
    ! grep -qh "puts as deltas" "$TMP"/zzz-r*.log; then
    pass tp_chain_late_joiner_gets_full_puts_from_the_relay
else
    fail tp_chain_late_joiner_gets_full_puts_from_the_relay "version '$zv': $(grep -h 'relay\|deltas' "$TMP"/zzz-r0.log | head -3)"
fi
undeploy

# (d) a stalled relay holding the base (its node's local rank 0 stopped after the first version): each rank of
# the child gives it up after relay_stall_ms and gets the next version as deltas from the trainer ranks.
serve stop || exit 1
TP_PIDS=()
tpnode 0 s0 2
S0=("${TP_PIDS[@]}")
TP_PIDS=()
tpnode 1 s1 2 WSYNC_RELAY_STALL_MS=2000
S1=("${TP_PIDS[@]}")
wait_until 30 registered 2 || { fail "$NAME"_stop_nodes_registered "not 2 relays registered"; exit 1; }
trainers stop 2 6000
wait_until 60 test -s "$TMP/d/s0/rank1/v1.safetensors" && wait_until 60 test -s "$TMP/d/s1/rank1/v1.safetensors"
kill -STOP "${S0[0]}"
ok=0
wait_all 90 "${S1[@]}" && tp_equal "$TMP/d/s1" 1 2 || ok=1
for r in 0 1; do
    grep -q "relay of engine s0 at .* given up" "$TMP/s1-r$r.log" &&
        grep -q "version 2: [1-9][0-9]* puts as deltas from version 1 " "$TMP/s1-r$r.log" || ok=1
done
if [ $ok = 0 ]; then pass tp_stop_child_falls_back_to_the_trainers_as_deltas
else fail tp_stop_child_falls_back_to_the_trainers_as_deltas "$(grep -h 'given up\|version 2' "$TMP"/s1-r*.log | head -4)"; fi
kill -CONT "${S0[0]}"
if wait_all 60 "${S0[@]}" && tp_equal "$TMP/d/s0" 1 2; then pass tp_stop_stopped_relay_resumes_and_is_ready
else fail tp_stop_stopped_relay_resumes_and_is_ready "$(tail -n 2 "$TMP"/s0-r*.log | tr '\n' ' ')"; fi
undeploy
exit 0
