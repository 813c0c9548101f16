#!/usr/bin/env bash
# relay_netns_bench.sh: publish -> ready of one version for the plans direct,
# relay:1 and relay:2, across hosts in network namespaces with tbf rate
# limits giving the links distinct classes: one trainer host (two trainer
# ranks) whose link is slower than the engines' aggregate, N engine hosts
# (one local rank each) with their own link rate (each host's link shaped
# both ways, as a NIC is), the control endpoint on a host of its own. For each plan, versions 2..V (the first one includes the
# engines' start) are timed from trainer rank 0's "publish started" to the
# last node's ready report (WSYNC_TRACE lines: one clock for every process
# of the machine); prints the median per plan and the ratios to direct.
#
#   bash bench/relay_netns_bench.sh [--trainer-rate 200mbit] [--engine-rate 1gbit]
#        [--engines 6] [--size 32M] [--chunk 2M] [--versions 4] [--plans "direct relay:1 relay:2"]
#        [--links FILE]   (the engines' links setting: add `auto` to --plans to time the cost model's choice)
#        [--calibrate]    (first `wsync calibrate` from the trainer host to the control host (tcp_trainer: the
#                          trainer host's link) and from engine host 1 to engine host 0 (tcp_engine: an
#                          engine host's link); that file becomes --links, and every plan's time predicted by
#                          `wsync plan --predict` on it is printed next to the measured one)
#
# As root (network namespaces). WSYNC_BIN (default build/wsync) is the binary.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/tests/integration/lib.sh"
source "$ROOT/tests/integration/netns.sh"

TRATE=200mbit ERATE=1gbit N=6 SIZE=32M CHUNK=2M V=4 LINKS= PLANS="direct relay:1 relay:2" CALIB=0
while [ $# -gt 0 ]; do
    case $1 in
    --trainer-rate) TRATE=$2; shift 2 ;;
    --engine-rate) ERATE=$2; shift 2 ;;
    --engines) N=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --chunk) CHUNK=$2; shift 2 ;;
    --versions) V=$2; shift 2 ;;
    --plans) PLANS=$2; shift 2 ;;
    --links) LINKS=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --calibrate) CALIB=1; shift ;;
    *) echo "usage: $0 [--trainer-rate R] [--engine-rate R] [--engines N] [--size SIZE] [--chunk SIZE] [--versions V] [--plans LIST] [--links FILE]" >&2
       exit 2 ;;
    esac
done
if [ "$V" -lt 2 ] || [ "$N" -lt 1 ]; then echo "$0: need --versions >= 2 and --engines >= 1" >&2; exit 2; fi
if ! netns_begin "wbh$$"; then echo "$0: $NETNS_WHY" >&2; exit 1; fi
NET="10.$(( ($$ >> 8) & 255 )).$(( ($$ & 255) ^ 170 ))"
CNS=wbc$$; TNS=wbt$$; CIP=$NET.1; TIP=$NET.2
netns_host "$CNS" "$CIP" && netns_host "$TNS" "$TIP" || { echo "$0: cannot build the namespaces" >&2; exit 1; }
# shape NS RATE: the host's link at RATE both ways: tbf on its eth0 (what it sends) and on its port of the
# hub's bridge (what it receives), the port netns_host just made for it.
shape() {
    ip netns exec "$1" tc qdisc replace dev eth0 root tbf rate "$2" burst 256kb latency 200ms &&
    ip netns exec "$NETNS_HUB" tc qdisc replace dev "p$((${#NETNS[@]} - 1))" root tbf rate "$2" burst 256kb latency 200ms
}
shape "$TNS" "$TRATE" || { echo "$0: cannot shape the trainer host's link" >&2; exit 1; }
ENS=(); EIP=()
for ((e = 0; e < N; e++)); do
    ENS+=(wbe$e-$$); EIP+=("$NET.$((10 + e))")
    netns_host "${ENS[$e]}" "${EIP[$e]}" || { echo "$0: cannot add engine host $e" >&2; exit 1; }
    shape "${ENS[$e]}" "$ERATE" || { echo "$0: cannot shape engine host $e's link" >&2; exit 1; }
done

# run PLAN: every version's publish -> ready, one per line (versions 2..V).
run() {
    local plan=$1 tag=${1/:/} port url r e pids=()
    port=$(free_port); url="http://$CIP:$port"
    bg ip netns exec "$CNS" "$WSYNC" serve --listen "$CIP:$port" >"$TMP/$tag-serve.log" 2>&1
    ip netns exec "$CNS" bash -c "$(declare -f wait_http); wait_http $url/healthz" || { echo "no control endpoint" >&2; return 1; }
    for r in 0 1; do
        bg ip netns exec "$TNS" env WSYNC_TRACE=1 "$WSYNC" trainer --control "$url" --rank $r --world 2 \
            --synthetic "$SIZE" --chunk "$CHUNK" --versions "$V" --wait-engines "$N" --listen "$TIP:0" --advertise "$TIP" \
            >"$TMP/$tag-t$r.log" 2>&1
    done
    for ((e = 0; e < N; e++)); do
        ip netns exec "${ENS[$e]}" env WSYNC_TRACE=1 ${LINKS:+WSYNC_LINKS=$LINKS} "$WSYNC" engine --control "$url" --engine "n$e" --local-rank 0 \
            --local-world 1 --plan "$plan" --versions "$V" --transport tcp --bind "${EIP[$e]}" --timeout-ms 300000 \
            >"$TMP/$tag-e$e.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    for e in "${pids[@]}"; do wait "$e" || echo "$plan: an engine failed: $(tail -2 "$TMP/$tag"-e*.log)" >&2; done
    "$PY" "$ROOT/tests/tools/trace_times.py" "$V" "$TMP/$tag-t0.log" "$TMP/$tag"-e*.log | awk '{ print $2 }'
    ip netns pids "$TNS" | xargs -r kill; ip netns pids "$CNS" | xargs -r kill
    sleep 0.5
}

PY=/usr/bin/python3
declare -A MED PRED
echo "relay_netns_bench: $N engine hosts (link $ERATE each), 1 trainer host of 2 ranks (link $TRATE), synthetic $SIZE in chunks of $CHUNK, versions 2..$V timed"
if [ "$CALIB" = 1 ]; then # tcp measured across each rate-limited link: the trainer host's, an engine host's
    # The trainer host's link against the control host (whose link is not shaped: only the trainer's limits),
    # an engine host's against another engine host.
    tport=$(free_port); cport=$(free_port)
    bg ip netns exec "$CNS" "$WSYNC" calibrate --serve "$CIP:$tport" >"$TMP/calib-serve-c.log" 2>&1
    bg ip netns exec "${ENS[0]}" "$WSYNC" calibrate --serve "${EIP[0]}:$cport" >"$TMP/calib-serve.log" 2>&1
    sleep 0.5
    LINKS=$TMP/links.json
    ip netns exec "$TNS" "$WSYNC" calibrate --peer "$CIP:$tport" --tcp-class tcp_trainer --reps 3 --size 8M \
        --out "$TMP/links-trainer.json" 2>&1 | grep -E '^tcp' || { echo "$0: calibrate (trainer host) failed" >&2; exit 1; }
    if [ "$N" -ge 2 ]; then
        ip netns exec "${ENS[1]}" "$WSYNC" calibrate --peer "${EIP[0]}:$cport" --tcp-class tcp_engine --reps 3 --size 8M \
            --base "$TMP/links-trainer.json" --out "$LINKS" 2>&1 | grep -E '^tcp_engine' || {
            echo "$0: calibrate (engine host) failed" >&2; exit 1; }
    else
        cp "$TMP/links-trainer.json" "$LINKS"
    fi
    "$WSYNC" plan --synthetic "$SIZE" --chunk "$CHUNK" --trainers 2 --trainer-hosts 1 --engines "$N" --local-ranks 1 \
        --memory host --transport tcp --links "$LINKS" --predict --json >"$TMP/predict.json" || exit 1
    while read -r name secs; do PRED[$name]=$secs; done < <("$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
for p in d["plans"]: print(p["name"], "%.3f" % p["predicted_s"])
print("auto", "%.3f" % next(p["predicted_s"] for p in d["plans"] if p["name"] == d["chosen"]))
print("chosen", d["chosen"])' "$TMP/predict.json")
    echo "calibrated links: $LINKS; plan=auto chooses ${PRED[chosen]}"
fi
for plan in $PLANS; do
    times=$(run "$plan")
    med=$(echo "$times" | "$PY" -c 'import statistics, sys; t = [float(x) for x in sys.stdin.read().split()]; print("%.3f" % statistics.median(t) if t else "nan")')
    MED[$plan]=$med
    printf '%-10s publish->ready median %s s  (versions: %s)%s\n' "$plan" "$med" "$(echo $times)" \
        "${PRED[$plan]:+  predicted ${PRED[$plan]} s, predicted/measured $("$PY" -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "${PRED[$plan]}" "$med")}"
done
if [ -n "${MED[direct]:-}" ]; then
    for plan in $PLANS; do
        [ "$plan" = direct ] && continue
        "$PY" -c 'import sys; d, r = float(sys.argv[2]), float(sys.argv[3]); print("%-10s %.2fx faster than direct (%.3f s vs %.3f s)" % (sys.argv[1], d / r, r, d))' \
            "$plan" "${MED[direct]}" "${MED[$plan]}"
    done
fi
