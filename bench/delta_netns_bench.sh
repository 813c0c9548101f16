#!/usr/bin/env bash
# delta_netns_bench.sh: delta pulls against full ones on a thin link
# (docs/DELTA.md). Versions from real AdamW steps (tests/tools/adamw_versions.py,
# Debian's torch on the CPU), published by two trainer ranks on a host whose
# link is limited with tbf (both ways), pulled over tcp by one engine node on
# a host of its own; the control endpoint on a third. The same versions run
# twice, WSYNC_DELTA=off then on; per version: publish -> ready (trainer rank
# 0's "publish started" to the node's ready report, WSYNC_TRACE lines on one
# clock) and the bytes on the wire (the engine's per-version line with
# deltas; the image without). Prints both and the ratios. With --tp T the
# node holds TP slices (targets: the vLLM rules over its local ranks), and
# its deltas go by put; "of the image" is then of the node's puts. With
# --relay, a chain under plan relay:1: node n0 pulls from the trainer ranks,
# node n1 (timed) from n0's relay, n0's host link limited the same way
# (docs/DELTA.md item 9: relays serve deltas).
#
#   bash bench/delta_netns_bench.sh [--rate 1gbit] [--versions 11] [--chunk 4M] [--local-ranks 1] [--tp T] [--relay]
#        [--hidden 768] [--intermediate 2048] [--layers 6] [--vocab 16384] [--lr 1e-6]
#        [--dir DIR]   (versions already written by adamw_versions.py: reused)
#
# As root (network namespaces). WSYNC_BIN (default build/wsync) is the binary.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/tests/integration/lib.sh"
source "$ROOT/tests/integration/netns.sh"

RATE=1gbit V=11 CHUNK=4M L=1 TP=() HID=768 INTER=2048 LAYERS=6 VOCAB=16384 LR=1e-6 DIR= RELAY=0
while [ $# -gt 0 ]; do
    case $1 in
    --rate) RATE=$2; shift 2 ;;
    --versions) V=$2; shift 2 ;;
    --chunk) CHUNK=$2; shift 2 ;;
    --local-ranks) L=$2; shift 2 ;;
    --tp) TP=(--tp "$2"); shift 2 ;;
    --hidden) HID=$2; shift 2 ;;
    --intermediate) INTER=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --vocab) VOCAB=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --relay) RELAY=1; shift ;;
    *) echo "usage: $0 [--rate R] [--versions V] [--chunk SIZE] [--local-ranks L] [--tp T] [--relay] [--hidden H] [--intermediate I] [--layers N] [--vocab N] [--lr LR] [--dir DIR]" >&2
       exit 2 ;;
    esac
done
PY=/usr/bin/python3
if [ -z "$DIR" ]; then
    DIR=$TMP/v
    echo "delta_netns_bench: writing $V versions (AdamW at lr $LR) ..."
    $PY "$ROOT/tests/tools/adamw_versions.py" "$DIR" --steps $((V - 1)) --hidden "$HID" --intermediate "$INTER" \
        --layers "$LAYERS" --heads 8 --kv-heads 2 --vocab "$VOCAB" --lr "$LR" --batch 2 --seq 64 --check \
        >"$TMP/gen.log" 2>&1 || { echo "$0: adamw_versions.py failed: $(tail -3 "$TMP/gen.log")" >&2; exit 1; }
    grep -E "parameters|changed" "$TMP/gen.log"
fi
FILES=$(ls "$DIR"/v*.safetensors | head -n "$V" | tr '\n' ',' | sed 's/,$//')
if ! netns_begin "wdh$$"; then echo "$0: $NETNS_WHY" >&2; exit 1; fi
NET="10.$(( ($$ >> 8) & 255 )).$(( ($$ & 255) ^ 85 ))"
CNS=wdc$$; TNS=wdt$$; ENS=wde$$; CIP=$NET.1; TIP=$NET.2; EIP=$NET.10
netns_host "$CNS" "$CIP" && netns_host "$TNS" "$TIP" || { echo "$0: cannot build the namespaces" >&2; exit 1; }
ip netns exec "$TNS" tc qdisc replace dev eth0 root tbf rate "$RATE" burst 256kb latency 200ms &&
    ip netns exec "$NETNS_HUB" tc qdisc replace dev "p$((${#NETNS[@]} - 1))" root tbf rate "$RATE" burst 256kb latency 200ms ||
    { echo "$0: cannot shape the trainer host's link" >&2; exit 1; }
netns_host "$ENS" "$EIP" || { echo "$0: cannot add the engine host" >&2; exit 1; }
NODES=(n0) HOSTS=("$ENS") IPS=("$EIP") PLAN=direct
if [ $RELAY = 1 ]; then # n1 below n0's relay, n0's link shaped as the trainers'
    NODES=(n0 n1) HOSTS=("$ENS" "wdf$$") IPS=("$EIP" "$NET.11") PLAN=relay:1
    ip netns exec "$ENS" tc qdisc replace dev eth0 root tbf rate "$RATE" burst 256kb latency 200ms &&
        ip netns exec "$NETNS_HUB" tc qdisc replace dev "p$((${#NETNS[@]} - 1))" root tbf rate "$RATE" burst 256kb latency 200ms &&
        netns_host "${HOSTS[1]}" "${IPS[1]}" || { echo "$0: cannot add the relayed node's host" >&2; exit 1; }
fi

# run off|on: per version 2..V, "seconds wire_bytes image_bytes".
run() {
    local mode=$1 port url r k pids=()
    port=$(free_port); url="http://$CIP:$port"
    bg ip netns exec "$CNS" "$WSYNC" serve --listen "$CIP:$port" >"$TMP/$mode-serve.log" 2>&1
    ip netns exec "$CNS" bash -c "$(declare -f wait_http); wait_http $url/healthz" || { echo "no control endpoint" >&2; return 1; }
    for ((k = 0; k < ${#NODES[@]}; k++)); do for ((r = 0; r < L; r++)); do
        ip netns exec "${HOSTS[$k]}" env WSYNC_TRACE=1 WSYNC_LOG=info WSYNC_DELTA=$mode WSYNC_PLAN=$PLAN "$WSYNC" \
            engine --control "$url" --engine "${NODES[$k]}" --local-rank $r --local-world "$L" "${TP[@]}" \
            --versions "$V" --transport tcp --bind "${IPS[$k]}" --timeout-ms 600000 >"$TMP/$mode-${NODES[$k]}-e$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done; done
    # every node registered before the first version, so each derives its parent from the same list
    for k in "${NODES[@]}"; do
        ip netns exec "$CNS" bash -c "$(declare -f wait_registered); wait_registered $url $k" || return 1
    done
    for r in 0 1; do
        bg ip netns exec "$TNS" env WSYNC_TRACE=1 "$WSYNC" trainer --control "$url" --rank $r --world 2 \
            --safetensors "$FILES" --chunk "$CHUNK" --versions "$V" --wait-engines "${#NODES[@]}" --listen "$TIP:0" \
            --advertise "$TIP" >"$TMP/$mode-t$r.log" 2>&1
    done
    for r in "${pids[@]}"; do wait "$r" || echo "$mode: an engine rank failed: $(tail -q -n 2 "$TMP/$mode"-*-e*.log)" >&2; done
    "$PY" "$ROOT/tests/tools/trace_times.py" "$V" "$TMP/$mode-t0.log" "$TMP/$mode-${NODES[-1]}"-e*.log
    ip netns pids "$TNS" | xargs -r kill; ip netns pids "$CNS" | xargs -r kill
    sleep 0.5
}

echo "delta_netns_bench: trainer host (2 ranks) on a $RATE link, ${#NODES[@]} engine node(s) of $L rank(s) ${TP[*]} (plan $PLAN, ${NODES[-1]} timed), chunks of $CHUNK, versions 2..$V timed"
run off >"$TMP/off.txt"
run auto >"$TMP/on.txt"
"$PY" - "$TMP/off.txt" "$TMP/on.txt" <<'PY'
import statistics, sys
def load(p):
    return {int(f[0]): (float(f[1]), int(f[2]), int(f[3])) for f in (l.split() for l in open(p)) if f}
off, on = load(sys.argv[1]), load(sys.argv[2])
print("version  full: s     delta: s   speed-up   delta wire bytes   of the image")
for v in sorted(set(off) & set(on)):
    print("%7d  %8.3f  %9.3f  %8.1fx  %17d  %11.1f%%" % (v, off[v][0], on[v][0], off[v][0] / on[v][0], on[v][1],
                                                        100.0 * on[v][1] / max(on[v][2], 1)))
vs = sorted(set(off) & set(on))
if vs:
    mo, md = statistics.median(off[v][0] for v in vs), statistics.median(on[v][0] for v in vs)
    print("median publish->ready: full %.3f s, delta %.3f s (%.1fx); wire bytes: %.1f%% of the image (median)" %
          (mo, md, mo / md, statistics.median(100.0 * on[v][1] / max(on[v][2], 1) for v in vs)))
PY
