#!/usr/bin/env bash
# delta_auto_test.sh: delta=auto chooses delta or full per version and link
# by the cost model (docs/DELTA.md), through real processes. Versions from
# real AdamW steps (tests/tools/adamw_versions.py), published by 2 trainer
# ranks over tcp to two engine nodes of the same control endpoint, each with
# its own links file (the links setting):
#   - a fast link (tcp at 50 GB/s, the delta encoder and apply at 1 GB/s):
#     a full copy beats encode + apply, every version comes full;
#   - a thin link (tcp at 50 MB/s, the same rates otherwise): every version
#     after the first comes as deltas, the second and later costed at the
#     wire fraction the previous delta pull measured;
#   - plan auto (the cost model, counting deltas) chains the two nodes: the
#     thin node gets its deltas from the fast node's relay;
# every tensor of every version on both nodes torch.equal to the file it was
# published from. `wsync plan --predict --delta auto` on the same files
# shows both costs and makes the same choices. Then (root, network
# namespaces) a link shaped to 1 Gbit/s with tbf, measured by `wsync
# calibrate --peer` into the links file the node pulls with: deltas.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/versions_lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip delta_auto_fast_link_pulls_full "no python3 with torch and numpy at $PY"
    exit 0
fi
make_versions 3 || { fail delta_auto_fast_link_pulls_full "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
NV=4
export WSYNC_LOG=info

# Two machines that differ only in the link the pull crosses.
cat >"$TMP/fast.json" <<'JSON'
{"machine": "delta_auto_test: a fast link", "source": "written by hand for the test",
 "host": {"gpus": 0, "nics": 1},
 "links": {
  "tcp": {"alpha_us": 10, "gbps": 50},
  "host_memcpy": {"gbps": 20},
  "digest_host": {"gbps": 20},
  "delta_encode_host": {"gbps": 1},
  "delta_apply_host": {"gbps": 1},
  "control": {"alpha_us": 100}
 }}
JSON
sed 's/"gbps": 50}/"gbps": 0.05}/; s/a fast link/a thin link/' "$TMP/fast.json" >"$TMP/thin.json"

# The prediction: both costs, and the choice each node makes below.
for k in fast thin; do
    "$WSYNC" plan --synthetic 7M --trainers 2 --engines 1 --local-ranks 1 --chunk 256K --links "$TMP/$k.json" \
        --predict --memory host --transport tcp --publish slot --delta auto --delta-density 0.02 \
        >"$TMP/plan-$k.txt" 2>&1
done
if grep -q '^delta       auto chooses full pieces: [0-9.]* ms as deltas against [0-9.]* ms full' "$TMP/plan-fast.txt" &&
    grep -q '^delta       auto chooses deltas: [0-9.]* ms as deltas against [0-9.]* ms full' "$TMP/plan-thin.txt"; then
    pass delta_auto_plan_predict_shows_both_costs
else
    fail delta_auto_plan_predict_shows_both_costs "$(tail -1 "$TMP/plan-fast.txt") / $(tail -1 "$TMP/plan-thin.txt")"
fi

serve_local auto
# plan auto (the default) with these links files chains the nodes (relay:1):
# the thin node pulls through the fast one's relay, which serves it deltas
# (docs/DELTA.md item 9) while the fast node itself pulls full pieces.
for k in fast thin; do
    WSYNC_TRACE=1 WSYNC_LINKS="$TMP/$k.json" bg "$WSYNC" engine --control "$URL" --engine "e$k" --local-rank 0 --local-world 1 \
        --mode staged --transport tcp --versions $NV --timeout-ms 60000 --dump "$TMP/d" >"$TMP/e-$k.log" 2>&1
    eval E$k=$!
done
wait_registered "$URL" efast
wait_registered "$URL" ethin
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" --versions $NV --chunk 256K \
        --interval-ms 400 --wait-engines 2 >"$TMP/t-$r.log" 2>&1
done
wait $Efast
efast=$?
wait $Ethin
ethin=$?

# counts FILE PATTERN: lines matching
counts() { grep -c "$2" "$1" || true; }
if [ $efast = 0 ] && dumps_equal "$TMP/d/efast" 1 $(seq 1 $NV) &&
    [ "$(counts "$TMP/e-fast.log" 'version [2-4]: delta auto chose full pieces: the cost model (delta_auto_test: a fast link)')" = 3 ] &&
    [ "$(counts "$TMP/e-fast.log" 'engine efast rank 0: version [0-9]*: [0-9]* pieces as deltas')" = 0 ]; then
    pass delta_auto_fast_link_pulls_full
else
    fail delta_auto_fast_link_pulls_full "rc=$efast: $(grep -h 'delta' "$TMP/e-fast.log" | head -3)"
fi
if [ $ethin = 0 ] && dumps_equal "$TMP/d/ethin" 1 $(seq 1 $NV) &&
    [ "$(counts "$TMP/e-thin.log" 'version [2-4]: delta auto chose deltas: the cost model (delta_auto_test: a thin link)')" = 3 ] &&
    [ "$(counts "$TMP/e-thin.log" 'version [2-4]: [1-9][0-9]* pieces as deltas from version [1-3]')" = 3 ] &&
    grep -q 'version 2: delta auto chose deltas: .* at the delta_density setting' "$TMP/e-thin.log" &&
    grep -q 'version 4: delta auto chose deltas: .* as the last delta pull measured' "$TMP/e-thin.log"; then
    pass delta_auto_thin_link_pulls_deltas
else
    fail delta_auto_thin_link_pulls_deltas "rc=$ethin: $(grep -h 'delta' "$TMP/e-thin.log" | head -3)"
fi
# plan auto chains them (the fast node first, by id): the thin node's deltas
# came from the fast node's relay.
if [ "$(counts "$TMP/e-thin.log" 'engine ethin rank 0: version [2-4] from the relay of engine efast')" = 3 ] &&
    [ "$(counts "$TMP/e-fast.log" "engine efast's relay: version [2-4] to engine ethin rank 0: [1-9][0-9]* pieces as deltas")" = 3 ]; then
    pass delta_auto_plan_auto_relay_serves_the_thin_node_deltas
else
    fail delta_auto_plan_auto_relay_serves_the_thin_node_deltas "$(grep -h 'plan auto\|relay' "$TMP/e-fast.log" "$TMP/e-thin.log" | head -3)"
fi

# --- a tc-shaped link, measured: the trainer host's link limited to 1 Gbit/s
# with tbf (network namespaces, as bench/delta_netns_bench.sh), `wsync
# calibrate --peer` measures tcp across it from the engine host into a links
# file (with this machine's delta encode and apply rates), and the engine
# node pulling with that file takes deltas from version 2 on.
source "$WSYNC_ROOT/tests/integration/netns.sh"
if ! netns_begin "wda$$"; then
    skip delta_auto_shaped_link_calibrated_pulls_deltas "$NETNS_WHY"
    exit 0
fi
NET="10.$((($$ >> 8) & 255)).$((($$ & 255) ^ 170))"
CNS=wac$$ TNS=wat$$ ENS=wae$$ CIP=$NET.1 TIP=$NET.2 EIP=$NET.10
if ! { netns_host "$CNS" "$CIP" && netns_host "$TNS" "$TIP" &&
    nsx "$TNS" tc qdisc replace dev eth0 root tbf rate 1gbit burst 256kb latency 200ms &&
    nsx "$NETNS_HUB" tc qdisc replace dev "p$((${#NETNS[@]} - 1))" root tbf rate 1gbit burst 256kb latency 200ms &&
    netns_host "$ENS" "$EIP"; }; then
    skip delta_auto_shaped_link_calibrated_pulls_deltas "cannot build the namespaces or shape the link"
    exit 0
fi
CPORT=$(free_port)
bg nsx "$TNS" "$WSYNC" calibrate --serve "$TIP:$CPORT" >"$TMP/calib-serve.log" 2>&1
sleep 0.5
nsx "$ENS" "$WSYNC" calibrate --peer "$TIP:$CPORT" --reps 3 --size 16M --out "$TMP/shaped.json" \
    >"$TMP/calib.log" 2>&1
PORT=$(free_port)
URL=http://$CIP:$PORT
bg nsx "$CNS" "$WSYNC" serve --listen "$CIP:$PORT" >"$TMP/serve-shaped.log" 2>&1
nsx "$CNS" bash -c "$(declare -f wait_http); wait_http $URL/healthz"
nsx "$ENS" env WSYNC_PLAN=direct WSYNC_LINKS="$TMP/shaped.json" "$WSYNC" engine --control "$URL" --engine eshaped \
    --local-rank 0 --local-world 1 --mode staged --transport tcp --bind "$EIP" --versions $NV --timeout-ms 60000 \
    --dump "$TMP/d" >"$TMP/e-shaped.log" 2>&1 &
ES=$!
WSYNC_PIDS+=($ES)
for r in 0 1; do
    bg nsx "$TNS" "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" --versions $NV \
        --chunk 256K --wait-engines 1 --listen "$TIP:0" --advertise "$TIP" >"$TMP/t-shaped-$r.log" 2>&1
done
wait $ES
eshaped=$?
# The file says tcp at about 1 Gbit/s (0.05-0.2 GB/s: tbf's rate, whatever this host's loopback does).
if [ $eshaped = 0 ] && dumps_equal "$TMP/d/eshaped" 1 $(seq 1 $NV) &&
    $PY -c 'import json, sys; g = json.load(open(sys.argv[1]))["links"]["tcp"]["gbps"]; assert 0.05 < g < 0.2, g' \
        "$TMP/shaped.json" &&
    [ "$(counts "$TMP/e-shaped.log" 'version [2-4]: delta auto chose deltas: the cost model')" = 3 ] &&
    [ "$(counts "$TMP/e-shaped.log" 'version [2-4]: [1-9][0-9]* pieces as deltas from version [1-3]')" = 3 ]; then
    pass delta_auto_shaped_link_calibrated_pulls_deltas
else
    fail delta_auto_shaped_link_calibrated_pulls_deltas "rc=$eshaped: $(grep -h 'gbps' "$TMP/shaped.json" | head -2) $(grep -h 'delta' "$TMP/e-shaped.log" | head -2)"
fi
