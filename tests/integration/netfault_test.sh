#!/usr/bin/env bash
# Network faults for real, in network namespaces joined by a bridge
# (tests/integration/netns.sh): the control endpoint on one host, two trainer
# ranks on another, two engine nodes on two more, node 0 attached through a
# middle namespace. This kernel has no netem, so:
#   "50 ms delay and 1% loss" is tests/tools/delay_link in node 0's middle
#   namespace: a user-space Ethernet bridge between node 0's link and the hub
#   that sends every frame on 50 ms after it arrived, each way (100 ms round
#   trip), and drops 1% of them at random (seeded), as netem's delay and loss
#   would; the test first checks that the round trip across it is >= 100 ms;
#   a cut link is `ip link set eth0 down` (a tbf qdisc first slows node 1's
#   pull to about 8 s, so the cut lands mid-pull);
#   a partition is an nftables drop rule between two addresses, added and
#   then removed.
# Each case checks that the affected node fails within its timeout with a
# clear error (or rides through), the others finish, and it catches up.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"

NAME=netfault
if ! command -v tc >/dev/null; then skip "$NAME" "needs tc (iproute2, make deps)"; exit 0; fi
HUB=wfh$$; CNS=wfc$$; TNS=wft$$; ENS=(wfe0-$$ wfe1-$$); MID0=wfm$$
NET="10.$(( (($$ >> 8) & 127) + 128 )).$(( $$ & 255 ))"
CIP=$NET.1; TIP=$NET.2; EIP=("$NET.10" "$NET.11")
if ! netns_begin "$HUB"; then skip "$NAME" "$NETNS_WHY"; exit 0; fi
[ -n "${NETFAULT_DEBUG:-}" ] && trap 'cp -r "$TMP" /tmp/netfault-debug.$$; netns_cleanup' EXIT
if ! { netns_host "$CNS" "$CIP" && netns_host "$TNS" "$TIP" && netns_host_via "${ENS[0]}" "${EIP[0]}" "$MID0" &&
       netns_host "${ENS[1]}" "${EIP[1]}"; } 2>"$TMP/setup.err"; then
    fail "$NAME"_setup "cannot build the namespaces: $(cat "$TMP/setup.err")"; exit 1
fi
# The bridge port of node 1 (netns_host names it p<index>), shaped in case 2.
PORT1=p$(( ${#NETNS[@]} - 1 ))

port=$(free_port)
URL="http://$CIP:$port"
bg nsx "$CNS" "$WSYNC" serve --listen "$CIP:$port" --state "$TMP/state.json" >"$TMP/serve.log" 2>&1
nsx "$TNS" bash -c "$(declare -f wait_http); wait_http $URL/healthz 20" || { fail "$NAME"_control_up "no endpoint"; exit 1; }
for r in 0 1; do
    bg nsx "$TNS" "$WSYNC" trainer --control "$URL" --rank $r --world 2 --synthetic 8M --chunk 512K --versions 100000 \
        --interval-ms 1500 --listen "$TIP:0" --advertise "$TIP" >"$TMP/t$r.log" 2>&1; T[$r]=$!
done
for e in 0 1; do
    # WSYNC_TRACE: node 1's log says when its requests went out (case 2 cuts then).
    WSYNC_TRACE=$e bg nsx "${ENS[$e]}" "$WSYNC" engine --control "$URL" --engine node$e-$$ --local-rank 0 --local-world 1 --follow \
        --transport tcp --bind "${EIP[$e]}" --timeout-ms 6000 --dump "$TMP/dump" >"$TMP/e$e.log" 2>&1
done
status_py() { nsx "$TNS" curl -fsS --max-time 5 "$URL/v1/status" 2>/dev/null | python3 -c "import json,sys; s=json.load(sys.stdin); $1" 2>/dev/null; }
latest() { status_py 'print(s.get("latest_version", 0))'; }
field() { status_py "print(next((e['$2'] for e in s['engines'] if e['id']=='node$1-$$'), ''))"; }
wait_until() { local end=$((SECONDS + $1)); shift; while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.3; done; "$@"; }
is_state() { [ "$(field "$1" state)" = "$2" ]; }
latest_at_least() { local v; v=$(latest); [ "${v:-0}" -ge "$1" ]; }
# more_failures LOG N: LOG has more than N pull failures naming a trainer rank.
more_failures() { [ "$(grep -c 'pull failed.*trainer rank' "$1")" -gt "$2" ]; }
holds_at_least() { local v; v=$(field "$1" version); [ -n "$v" ] && [ "$v" -ge "$2" ]; }
# dumps_ok NODE FROM [LAST]: every dump of NODE newer than version FROM (only
# the newest with LAST) equals the trainers' synthetic content, and there is one.
dumps_ok() {
    /usr/bin/python3 - "$WSYNC_ROOT/tests/chaos" "$TMP/dump/node$1-$$/rank0" "$2" "${3:-all}" <<'PY'
import glob, os, sys
sys.path.insert(0, sys.argv[1]); import chaos
dumps = sorted((int(os.path.basename(f)[1:].split(".")[0]), f) for f in glob.glob(sys.argv[2] + "/v*.safetensors"))
dumps = [d for d in dumps if d[0] > int(sys.argv[3])][-1 if sys.argv[4] == "last" else 0:]
bad = [(v, why) for v, why in ((v, chaos.check_dump(f, v)) for v, f in dumps) if why]
print("%s: %d dumps after v%s checked, %s" % (sys.argv[2], len(dumps), sys.argv[3],
      "; ".join("v%d: %s" % b for b in bad) or "all equal the source"), file=sys.stderr)
sys.exit(1 if bad or not dumps else 0)
PY
}
dump_ok() { dumps_ok "$1" 0 last; }
if ! wait_until 60 holds_at_least 0 1 || ! wait_until 30 holds_at_least 1 1; then
    fail "$NAME"_deployment_up "nodes hold $(field 0 version) and $(field 1 version)"; exit 1
fi

# --- 1. node 0's link: 50 ms each way and 1% random loss (the delay line).
netns_delay_on "$MID0" 50 0.01 "${NETFAULT_SEED:-14}"
# The fault tool itself: a TCP connect (one round trip) from node 0 to the
# control host takes >= 100 ms now (the least of 5, as a lost SYN is resent).
rtt=$(for i in 1 2 3 4 5; do nsx "${ENS[0]}" curl -s -o /dev/null --max-time 5 -w '%{time_connect}\n' "$URL/healthz"; done |
      sort -n | head -1)
echo "delay line: TCP connect across it, least of 5: $rtt s" >&2
check netfault_delay_line_round_trip_at_least_100ms awk -v t="$rtt" 'BEGIN { exit !(t >= 0.100) }'
v_from=$(field 0 version)
target=$(( $(latest) + 2 ))
if wait_until 90 holds_at_least 0 "$target"; then pass netfault_delay_loss_sync_completes
else fail netfault_delay_loss_sync_completes "node0 holds $(field 0 version), wanted $target"; fi
netns_delay_off "$MID0"
grep '^delay_link: .* -> ' "$TMP/delay-$MID0.log" >&2
# About 1% of the frames it received were dropped (the fault tool again: 0.5%
# to 2% of some 20,000 frames is more than 5 standard deviations either way).
loss_ok() {
    awk '/^delay_link: .* -> / { for (i = 1; i < NF; i++) { if ($i == "received") r += $(i + 1); if ($i == "lost") l += $(i + 1) } }
         END { printf "delay line: %d of %d frames lost (%.2f%%)\n", l, r, r ? 100 * l / r : 0 > "/dev/stderr"
               exit !(r > 0 && l >= 0.005 * r && l <= 0.02 * r) }' "$TMP/delay-$MID0.log"
}
check netfault_delay_line_drops_about_1_percent loss_ok
check netfault_delay_loss_every_version_verified dumps_ok 0 "$v_from"

# --- 2. node 1's link cut mid-pull: it fails within its timeout naming the
#        trainer rank it lost; node 0 keeps syncing; back up, node 1 catches up.
nsx "$HUB" tc qdisc add dev "$PORT1" root tbf rate 8mbit burst 16kb latency 200ms   # a pull: ~8 s
n1=$(grep -c 'pull failed.*trainer rank' "$TMP/e1.log")
sent=$(grep -c 'requests sent' "$TMP/e1.log")
wait_until 30 eval '[ $(grep -c "requests sent" "$TMP/e1.log") -gt $sent ]'
sleep 0.5                                  # the transfer runs at 8 Mbit/s now
nsx "${ENS[1]}" ip link set eth0 down
v0=$(field 0 version)
if wait_until 40 more_failures "$TMP/e1.log" "$n1"; then
    pass netfault_cut_link_pull_fails_naming_trainer_rank
else fail netfault_cut_link_pull_fails_naming_trainer_rank "node1 log: $(tail -2 "$TMP/e1.log")"
    [ -n "${NETFAULT_DEBUG:-}" ] && for p in $(ip netns pids "${ENS[1]}"); do gdb -p $p -batch -ex "thread apply all bt 10" >"$TMP/gdb.$p" 2>&1; done; fi
grep 'pull failed' "$TMP/e1.log" | tail -1 >&2
if wait_until 40 holds_at_least 0 $((v0 + 1)); then pass netfault_cut_link_other_node_finishes
else fail netfault_cut_link_other_node_finishes "node0 stays at $(field 0 version)"; fi
nsx "$HUB" tc qdisc del dev "$PORT1" root
nsx "${ENS[1]}" ip link set eth0 up
target=$(latest)
if wait_until 60 holds_at_least 1 "$target"; then pass netfault_cut_link_back_node_catches_up
else fail netfault_cut_link_back_node_catches_up "node1 holds $(field 1 version), latest was $target"; fi
check netfault_cut_link_dump_matches_source dump_ok 1

# --- 3. the trainers' host partitioned from node 1 only.
nsx "$TNS" nft add table inet wsyncpart
nsx "$TNS" nft add chain inet wsyncpart in '{ type filter hook input priority 0; }'
nsx "$TNS" nft add chain inet wsyncpart out '{ type filter hook output priority 0; }'
nsx "$TNS" nft add rule inet wsyncpart in ip saddr "${EIP[1]}" drop
nsx "$TNS" nft add rule inet wsyncpart out ip daddr "${EIP[1]}" drop
n1=$(grep -c 'pull failed' "$TMP/e1.log")
v0=$(field 0 version)
if wait_until 40 more_failures "$TMP/e1.log" "$n1"; then
    pass netfault_partition_node_pull_fails_naming_trainer_rank
else fail netfault_partition_node_pull_fails_naming_trainer_rank "node1 log: $(tail -2 "$TMP/e1.log")"; fi
if wait_until 40 holds_at_least 0 $((v0 + 2)); then pass netfault_partition_other_node_keeps_syncing
else fail netfault_partition_other_node_keeps_syncing "node0 stays at $(field 0 version)"; fi
nsx "$TNS" nft delete table inet wsyncpart
target=$(latest)
if wait_until 60 holds_at_least 1 "$target"; then pass netfault_partition_healed_node_catches_up
else fail netfault_partition_healed_node_catches_up "node1 holds $(field 1 version), latest was $target"; fi

# --- 4. the control endpoint's host partitioned from everyone for 8 s: the
#        trainers ride through (no exit), the nodes keep their version, and
#        all converge once it is reachable again.
before=$(latest)
nsx "$CNS" nft add table inet wsyncctl
nsx "$CNS" nft add chain inet wsyncctl in '{ type filter hook input priority 0; }'
nsx "$CNS" nft add rule inet wsyncctl in iifname eth0 drop
sleep 8
check netfault_control_partitioned_trainers_alive kill -0 ${T[0]} ${T[1]}
nsx "$CNS" nft delete table inet wsyncctl
if wait_until 60 latest_at_least $((before + 2)); then
    pass netfault_control_partition_healed_versions_continue
else fail netfault_control_partition_healed_versions_continue "latest $(latest), was $before"; fi
target=$(latest)
if wait_until 60 holds_at_least 0 "$target" && wait_until 30 holds_at_least 1 "$target"; then
    pass netfault_control_partition_healed_nodes_converge
else fail netfault_control_partition_healed_nodes_converge "nodes $(field 0 version) $(field 1 version), latest $target"; fi
check netfault_trainers_never_failed bash -c "! grep -q 'publish failed' '$TMP/t0.log' '$TMP/t1.log'"
