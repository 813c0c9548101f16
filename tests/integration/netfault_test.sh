#!/usr/bin/env bash
# Network faults for real, in network namespaces joined by a bridge (as the
# multi-host test does): the control endpoint on one host, two trainer ranks
# on another, two engine nodes on two more. This kernel has no netem, so:
#   "50 ms delay and 1% loss" is emulated with a tbf qdisc (rate 20 Mbit,
#   queue up to 50 ms: a bottlenecked link whose queueing delay reaches 50 ms
#   under load) plus an nftables rule dropping 1% of packets at random;
#   a cut link is `ip link set eth0 down`; a partition is an nftables drop
#   rule between two addresses, added and then removed.
# Each case checks that the affected node fails within its timeout with a
# clear error (or rides through), the others finish, and it catches up.
source "$(dirname "$0")/lib.sh"

NAME=netfault
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v nft >/dev/null || ! command -v tc >/dev/null; then
    skip "$NAME" "needs root, ip, tc and nft (make deps) for network namespaces"; exit 0
fi
HUB=wfh$$; CNS=wfc$$; TNS=wft$$; ENS=(wfe0-$$ wfe1-$$)
NETNS=()
NET="10.$(( (($$ >> 8) & 127) + 128 )).$(( $$ & 255 ))"
CIP=$NET.1; TIP=$NET.2; EIP=("$NET.10" "$NET.11")
netns_cleanup() {
    local ns
    # The ranks run under `ip netns exec` in subshells: end them by namespace
    # first, then what lib.sh started, then the namespaces.
    for ns in "${NETNS[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    sleep 0.2
    cleanup
    for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
}
trap netns_cleanup EXIT
[ -n "${NETFAULT_DEBUG:-}" ] && trap 'cp -r "$TMP" /tmp/netfault-debug.$$; netns_cleanup' EXIT
trap "exit 143" TERM; trap "exit 130" INT
declare -A HUBPORT                       # namespace -> its port on the bridge
add_host() {
    local ns=$1 ip=$2 port=p${#NETNS[@]}
    HUBPORT[$ns]=$port
    ip netns add "$ns" && NETNS+=("$ns") && ip -n "$ns" link set lo up &&
    ip -n "$ns" link add name eth0 type veth peer name "$port" netns "$HUB" &&
    ip -n "$HUB" link set "$port" master br0 up && ip -n "$ns" addr add "$ip/24" dev eth0 &&
    ip -n "$ns" link set eth0 up
}
if ! ip netns add "$HUB" 2>"$TMP/setup.err"; then
    skip "$NAME" "cannot add a network namespace ($(head -1 "$TMP/setup.err"))"; exit 0
fi
NETNS+=("$HUB")
if ! { ip -n "$HUB" link set lo up && ip -n "$HUB" link add name br0 type bridge && ip -n "$HUB" link set br0 up &&
       add_host "$CNS" "$CIP" && add_host "$TNS" "$TIP" && add_host "${ENS[0]}" "${EIP[0]}" &&
       add_host "${ENS[1]}" "${EIP[1]}"; } 2>"$TMP/setup.err"; then
    fail "$NAME"_setup "cannot build the namespaces: $(cat "$TMP/setup.err")"; exit 1
fi
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

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
# dump_ok NODE: the newest dump of NODE equals the trainers' synthetic content.
dump_ok() {
    local f; f=$(ls "$TMP/dump/node$1-$$/rank0/" 2>/dev/null | sort -V | tail -1)
    [ -n "$f" ] && /usr/bin/python3 -c '
import sys; sys.path.insert(0, sys.argv[1]); import chaos
v = int(sys.argv[3].split("/")[-1][1:].split(".")[0]); why = chaos.check_dump(sys.argv[3], v)
print(why, file=sys.stderr); sys.exit(1 if why else 0)' "$WSYNC_ROOT/tests/chaos" x "$TMP/dump/node$1-$$/rank0/$f"
}
if ! wait_until 60 holds_at_least 0 1 || ! wait_until 30 holds_at_least 1 1; then
    fail "$NAME"_deployment_up "nodes hold $(field 0 version) and $(field 1 version)"; exit 1
fi

# --- 1. node 0's link: tbf (20 Mbit, <= 50 ms of queue) + 1% random loss.
# Shaped on the bridge's port towards node 0 (what node 0 receives: the data).
nsx "$HUB" tc qdisc add dev "${HUBPORT[${ENS[0]}]}" root tbf rate 20mbit burst 32kb latency 50ms
nsx "${ENS[0]}" nft add table inet wsyncloss
nsx "${ENS[0]}" nft add chain inet wsyncloss in '{ type filter hook input priority 0; }'
nsx "${ENS[0]}" nft add chain inet wsyncloss out '{ type filter hook output priority 0; }'
nsx "${ENS[0]}" nft add rule inet wsyncloss in numgen random mod 100 \< 1 counter drop
nsx "${ENS[0]}" nft add rule inet wsyncloss out numgen random mod 100 \< 1 counter drop
target=$(( $(latest) + 2 ))
if wait_until 90 holds_at_least 0 "$target"; then pass netfault_delay_loss_sync_completes
else fail netfault_delay_loss_sync_completes "node0 holds $(field 0 version), wanted $target"; fi
check netfault_delay_loss_dump_matches_source dump_ok 0
dropped=$(nsx "${ENS[0]}" nft list table inet wsyncloss | grep -o 'packets [0-9]*' | head -1)
echo "delay+loss on node 0: tbf $(nsx "$HUB" tc -s qdisc show dev "${HUBPORT[${ENS[0]}]}" | grep -o 'dropped [0-9]*, overlimits [0-9]*' | head -1); nft: ${dropped:-no} dropped" >&2
nsx "${ENS[0]}" nft delete table inet wsyncloss
nsx "$HUB" tc qdisc del dev "${HUBPORT[${ENS[0]}]}" root

# --- 2. node 1's link cut mid-pull: it fails within its timeout naming the
#        trainer rank it lost; node 0 keeps syncing; back up, node 1 catches up.
nsx "$HUB" tc qdisc add dev "${HUBPORT[${ENS[1]}]}" root tbf rate 8mbit burst 16kb latency 200ms   # a pull: ~8 s
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
nsx "$HUB" tc qdisc del dev "${HUBPORT[${ENS[1]}]}" root
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
