#!/usr/bin/env bash
# relay_delta_test.sh: relays serve deltas (docs/DELTA.md, "Relays"), across
# hosts in network namespaces: the control endpoint, two trainer ranks, and
# engine nodes of one rank each on hosts of their own, plan relay:1 (a chain).
# Versions made by real AdamW steps (tests/tools/adamw_versions.py, as
# delta_pull_test).
#   (a) trainer ranks -> n0 -> n1, staged: n0 takes every version after the
#       first as deltas from the trainer ranks, n1 as deltas from n0's relay
#       (which keeps the version before in its other image slot); every
#       tensor of every version on both nodes torch.equal to the file it was
#       published from; n1's log puts the bytes on the wire of each version
#       below a quarter of the image, and n0's host sent less than 1.5
#       images in all (its veth counter; full pieces: one per version);
#   (b) a late joiner (zzz, below n1 in the chain) starts while they pull:
#       its first version comes in full pieces from n1's relay (it holds no
#       base), every tensor equal;
#   (c) n1's held version is corrupted once by the fault hook before its
#       first delta pull: the piece fails verification, is re-fetched in full
#       from its trainer rank, and the version is ready with the right bytes;
#       and n0's relay breaks one piece's wire in every version (the other
#       fault hook): n1 refuses it, naming the relay, and re-fetches it in full;
#       the node's status and /metrics count n1's deltas and re-fetches;
#   (d) the relay stopped (SIGSTOP) after the first version: its child
#       gives it up after relay_stall_ms and gets the next version as deltas
#       from the trainer ranks, every tensor equal;
#   (e) a chain of two nodes of identity targets (--target whole_image): the
#       child asks the trainer ranks nothing (the record holds its digests)
#       and the trainers plan no segments of the target;
#   (f) a relay whose node keeps no delta base (delta_bases 0) serves its
#       child full pieces, and the child says so.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"

NAME=relay_delta
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then skip "$NAME" "no python3 with torch and numpy at $PY"; exit 0; fi
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/versions_lib.sh"
netns_deploy "$NAME" wd 170 3 || exit $(($? - 1)) # 1: skipped, 2: failed

make_versions 5 || { fail "$NAME"_versions "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
NV=6
image=$($PY - "$TMP/v/v0000.safetensors" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read(); print(len(raw) - 8 - struct.unpack("<Q", raw[:8])[0])
PY
)

# trainers TAG VERSIONS ENGINES: two trainer ranks, each next version once ENGINES nodes hold the last
# (and TINTERVAL ms passed).
trainers() {
    local r
    TRAINERS=()
    for r in 0 1; do
        bg ip netns exec "$TNS" env WSYNC_TRACE=1 "$WSYNC" trainer --control "$URL" --rank $r --world 2 \
            --safetensors "$FILES" --versions "$2" --wait-engines "$3" --interval-ms "${TINTERVAL:-0}" --chunk 256K --listen "$TIP:0" \
            --advertise "$TIP" >"$TMP/$1-t$r.log" 2>&1
        TRAINERS+=($!)
    done
}
# engine TAG E ID VERSIONS [ENV...] [-- ARGS...]: one engine node on host E, in the background ($!).
engine() {
    local tag=$1 e=$2 id=$3 versions=$4 envs=() args=()
    shift 4
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ "${1:-}" = -- ] && { shift; args=("$@"); }
    ip netns exec "${ENS[$e]}" env WSYNC_LOG=info WSYNC_TRACE=1 WSYNC_RELAY_STALL_MS=5000 "${envs[@]}" "$WSYNC" \
        engine --control "$URL" --engine "$id" --local-rank 0 --local-world 1 --plan relay:1 --mode staged \
        --versions "$versions" --transport tcp --bind "${EIP[$e]}" --timeout-ms 60000 --dump "$TMP/$tag" \
        "${args[@]}" >"$TMP/$tag-$id.log" 2>&1 &
    WSYNC_PIDS+=($!)
}

# (a)-(c) a chain n0 -> n1 of delta versions, a late joiner below it, n1's base corrupted once.
serve chain || exit 1
# (relay_stall_ms 30 s: on a loaded machine no relay of the chain is given up for being slow)
engine chain 0 n0 $NV WSYNC_TEST_CORRUPT_WIRE=5 WSYNC_RELAY_STALL_MS=30000; N0=$!
engine chain 1 n1 $NV WSYNC_TEST_CORRUPT_HELD=3 WSYNC_RELAY_STALL_MS=30000; N1=$!
wait_until 30 registered 2 || { fail chain_nodes_registered "not 2 relays registered"; exit 1; }
tx0=$(bytes "${ENS[0]}" tx)
trainers chain $NV 2
# The late joiner, once n1 holds version 3: it hangs below n1 (its id sorts last).
wait_until 90 test -s "$TMP/chain/n1/rank0/v3.safetensors"
engine chain 2 zzz 1; NZ=$!
if wait_all 180 $N0 $N1 $NZ; then pass chain_every_node_holds_every_version
else fail chain_every_node_holds_every_version "$(tail -n 2 "$TMP"/chain-n*.log "$TMP"/chain-zzz.log | tr '\n' ' ')"; fi
sent=$(( $(bytes "${ENS[0]}" tx) - tx0 ))
check chain_every_tensor_equal_at_every_version dumps_equal "$TMP/chain/n0" 1 $(seq 1 $NV)
check chain_child_every_tensor_equal_at_every_version dumps_equal "$TMP/chain/n1" 1 $(seq 1 $NV)
# n0 from the trainer ranks, n1 from n0's relay, every version after the first as deltas from the one before.
ok=0
for v in $(seq 1 $NV); do grep -q "version $v from the relay of engine n0 " "$TMP/chain-n1.log" || ok=1; done
if $PY "$WSYNC_ROOT/tests/tools/wire_check.py" $NV pieces --each "$TMP/chain-n0.log" "$TMP/chain-n1.log" && [ $ok = 0 ]; then
    pass chain_child_gets_deltas_from_the_relay
else
    fail chain_child_gets_deltas_from_the_relay "$(grep -h 'pieces as deltas\|delta base\|given up' "$TMP"/chain-n[01].log | head -4)"
fi
relayed=$(grep -c "engine n0's relay: version [0-9]* to engine n1 rank 0: [1-9][0-9]* pieces as deltas from version" "$TMP/chain-n0.log")
if [ "$relayed" = $((NV - 1)) ]; then pass chain_relay_logs_its_deltas
else fail chain_relay_logs_its_deltas "$relayed relay lines: $(grep -h 'given up\|failed' "$TMP/chain-n1.log" | head -3)"; fi
echo "chain: n0's host sent $sent bytes to n1 for $NV versions of $image bytes (full pieces: $((NV * image)))" >&2
check chain_relay_link_carries_about_one_image [ "$sent" -lt $((image * 3 / 2)) ]
# (b) the late joiner: its first (only) version in full pieces, from n1's relay.
zv=$(ls "$TMP/chain/zzz/rank0/" 2>/dev/null | sed -n 's/^v\([0-9]*\)\.safetensors$/\1/p' | head -1)
if [ -n "$zv" ] && dumps_equal "$TMP/chain/zzz" 1 "$zv" && grep -q "version $zv from the relay of engine n1 " \
    "$TMP/chain-zzz.log" && ! grep -q "pieces as deltas" "$TMP/chain-zzz.log"; then
    pass chain_late_joiner_gets_full_pieces_from_the_relay
else
    fail chain_late_joiner_gets_full_pieces_from_the_relay "version '$zv': $(grep -h 'relay\|deltas' "$TMP/chain-zzz.log" | head -3)"
fi
# (c) n1's corrupted base and n0's broken wires: caught, re-fetched in full from the trainer rank.
refused=$(grep -c "piece 5 (trainer rank [01]) of version [2-6]: its delta wire from version [1-5] through the relay of engine n0 was refused (.*magic" \
    "$TMP/chain-n1.log")
if grep -q 'piece 3 (trainer rank [01]) applied as a delta from version 1 through the relay of engine n0 failed verification against version 2.s digests (tensor .*): re-fetching it in full' \
    "$TMP/chain-n1.log" && grep -q 'version 2: .*; 2 re-fetched in full after a failed check' "$TMP/chain-n1.log" &&
    [ "$refused" = $((NV - 1)) ] && [ "$(grep -c 'version [3-6]: .*; 1 re-fetched in full after a failed check' "$TMP/chain-n1.log")" = $((NV - 2)) ]; then
    pass chain_corrupted_base_and_broken_wire_refetched_in_full
else
    fail chain_corrupted_base_and_broken_wire_refetched_in_full "refused wires: $refused; $(grep -h 'hook\|re-fetch\|version 2' "$TMP/chain-n1.log" | head -4)"
fi
# The control endpoint counts the relayed node's deltas as a trainer-fed node's: status and /metrics.
ip netns exec "$CNS" curl -fsS "$URL/v1/status" >"$TMP/status.json"
ip netns exec "$CNS" curl -fsS "$URL/metrics" >"$TMP/metrics.txt"
if $PY -c 'import json, sys
e = {e["id"]: e.get("delta") or {} for e in json.load(open(sys.argv[1]))["engines"]}
n1 = e["n1"]
assert n1["refetched_total"] == 6 and n1["pieces"] > 0 and 0 < n1["wire_bytes"] < n1["saved_bytes"], n1' "$TMP/status.json" &&
    grep -q '^wsync_delta_refetches_total 6$' "$TMP/metrics.txt" && grep -q '^wsync_delta_pieces_total [1-9]' "$TMP/metrics.txt"; then
    pass chain_status_and_metrics_count_the_relayed_deltas
else
    fail chain_status_and_metrics_count_the_relayed_deltas "$(grep wsync_delta "$TMP/metrics.txt" | tr '\n' ' ')"
fi
undeploy

# (d) a stalled relay holding the base: the child falls back to the trainer ranks, still as deltas.
serve stop || exit 1
engine stop 0 s0 2; S0=$!
engine stop 1 s1 2 WSYNC_RELAY_STALL_MS=2000; S1=$!
wait_until 30 registered 2 || { fail stop_nodes_registered "not 2 relays registered"; exit 1; }
TINTERVAL=6000 trainers stop 2 2
wait_until 60 test -s "$TMP/stop/s0/rank0/v1.safetensors" && wait_until 60 test -s "$TMP/stop/s1/rank0/v1.safetensors"
kill -STOP $S0
if wait_all 90 $S1 && dumps_equal "$TMP/stop/s1" 1 1 2 && grep -q "relay of engine s0 at .* given up" "$TMP/stop-s1.log" &&
    grep -q "version 2: [1-9][0-9]* pieces as deltas from version 1 " "$TMP/stop-s1.log"; then
    pass stop_child_falls_back_to_the_trainers_as_deltas
else
    fail stop_child_falls_back_to_the_trainers_as_deltas "$(grep -h 'given up\|version 2' "$TMP/stop-s1.log" | head -3)"
fi
kill -CONT $S0
if wait_all 60 $S0 && dumps_equal "$TMP/stop/s0" 1 1 2; then pass stop_stopped_relay_resumes_and_is_ready
else fail stop_stopped_relay_resumes_and_is_ready "$(tail -n 2 "$TMP/stop-s0.log" | tr '\n' ' ')"; fi
undeploy

# (e) identity targets under a relay: the child asks the trainer ranks nothing.
echo '{"version": 1, "whole_image": true}' >"$TMP/whole.json"
serve ident || exit 1
engine ident 0 c0 2 -- --target "$TMP/whole.json"; C0=$!
engine ident 1 c1 2 -- --target "$TMP/whole.json"; C1=$!
wait_until 30 registered 2 || { fail ident_nodes_registered "not 2 relays registered"; exit 1; }
trainers ident 2 2
if wait_all 120 $C0 $C1 && dumps_equal "$TMP/ident/c0" 1 1 2 && dumps_equal "$TMP/ident/c1" 1 1 2; then
    pass identity_targets_relayed_every_tensor_equal
else
    fail identity_targets_relayed_every_tensor_equal "$(tail -n 2 "$TMP"/ident-c*.log | tr '\n' ' ')"
fi
asked=$(cat "$TMP"/ident-t*.log | grep -c "engine c1 rank 0, version")
planned=$(cat "$TMP"/ident-t*.log | grep -c "segments of target .* planned")
relayed=$(grep -c "version [12] from the relay of engine c0 " "$TMP/ident-c1.log")
if [ "$asked" = 0 ] && [ "$planned" = 0 ] && [ "$relayed" = 2 ]; then
    pass identity_targets_relayed_child_asks_the_trainers_nothing
else
    fail identity_targets_relayed_child_asks_the_trainers_nothing \
        "trainer lines naming c1: $asked, segment plans: $planned, versions through c0's relay: $relayed"
fi
undeploy

# (f) delta_bases 0 on the relaying node: full pieces, said so.
serve nob || exit 1
engine nob 0 b0 2 WSYNC_DELTA_BASES=0; B0=$!
engine nob 1 b1 2; B1=$!
wait_until 30 registered 2 || { fail nob_nodes_registered "not 2 relays registered"; exit 1; }
trainers nob 2 2
if wait_all 120 $B0 $B1 && dumps_equal "$TMP/nob/b1" 1 1 2 &&
    grep -q "version 2 from the relay of engine b0 " "$TMP/nob-b1.log" &&
    grep -q "version 2: no relay keeps version 1 as a delta base (their answers said so): every piece came full" \
        "$TMP/nob-b1.log"; then
    pass relay_without_delta_bases_serves_full_pieces
else
    fail relay_without_delta_bases_serves_full_pieces "$(grep -h 'version 2' "$TMP/nob-b1.log" | head -3)"
fi
undeploy
exit 0
