# netns.sh: the hosts of a test deployment as network namespaces joined by a
# bridge, and the network faults the tests put between them (sourced after
# lib.sh; root only). Also runs as a command, `bash netns.sh FUNCTION ARGS...`,
# for tests/chaos/chaos.py, which draws the same faults at random.
#
#   netns_begin HUB             checks what is needed, adds the hub namespace
#                               (bridge br0) and the clean-up trap; 1 with the
#                               reason in $NETNS_WHY when this machine cannot
#   netns_host NS IP            a host: NS with eth0 (IP/24) on the bridge
#   netns_host_via NS IP MID    the same through a middle namespace MID, where
#                               a plain bridge joins the host's link to the hub
#                               until netns_delay_on puts the delay line there
#   netns_delay_on MID MS LOSS SEED   tests/tools/delay_link between the two
#                               links of MID: every frame delayed MS ms each
#                               way, a fraction LOSS dropped at random
#   netns_delay_off MID         stops it (its counters go to MID's log) and
#                               puts the plain bridge back
#   netns_link NS up|down       the host's eth0 up or down (a cut cable)
#   netns_block NS TABLE ADDR   NS drops everything to and from ADDR (nftables
#                               table TABLE): a partition between two hosts
#   netns_isolate NS TABLE      NS drops everything arriving on eth0: the host
#                               is partitioned from all others
#   netns_unblock NS TABLE      removes TABLE: the partition heals
#
# Names of namespaces should carry $$ so concurrent runs do not clash; the hub
# holds the bridge, so nothing is added to the root namespace, and deleting
# the namespaces removes every link. The delay line's pid and log live in
# $NETNS_RUN (default $TMP), so the command form finds what the sourced one
# started.

NETNS=()                               # every namespace made, the hub first
NETNS_HUB=
NETNS_RUN=${NETNS_RUN:-${TMP:-/tmp}}
DELAY_LINK=${DELAY_LINK:-${WSYNC_BUILD:-$(dirname "${WSYNC_BIN:-${WSYNC:-build/wsync}}")}/tests/tools/delay_link}

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

netns_cleanup() {
    local ns
    # Ranks run under `ip netns exec`: end what runs in each namespace by its
    # pid first, then what lib.sh started, then the namespaces.
    for ns in "${NETNS[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    sleep 0.2
    cleanup
    for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
}

netns_begin() {
    local hub=$1 t
    NETNS_WHY=
    if [ "$(id -u)" != 0 ]; then NETNS_WHY="needs root for network namespaces (uid $(id -u))"; return 1; fi
    for t in ip nft ethtool; do
        command -v $t >/dev/null || { NETNS_WHY="needs $t for network faults (make deps)"; return 1; }
    done
    if [ ! -x "$DELAY_LINK" ]; then NETNS_WHY="$DELAY_LINK is not built (make all-tests)"; return 1; fi
    # Root without CAP_NET_ADMIN (an unprivileged container) cannot either.
    if ! ip netns add "$hub" 2>"$NETNS_RUN/netns.err"; then
        NETNS_WHY="cannot add a network namespace ($(head -1 "$NETNS_RUN/netns.err"))"; return 1
    fi
    NETNS_HUB=$hub; NETNS+=("$hub")
    trap netns_cleanup EXIT
    trap "exit 143" TERM; trap "exit 130" INT   # so the EXIT trap runs on a signal too
    # `ip netns exec` makes / a slave mount in a mount namespace of its own; in
    # a chroot whose / is not a mount point that fails ("mount --make-rslave /").
    if ! ip netns exec "$hub" true 2>"$NETNS_RUN/netns.err"; then
        NETNS_WHY="ip netns exec fails here (a chroot? $(head -1 "$NETNS_RUN/netns.err"))"; return 1
    fi
    ip -n "$hub" link set lo up && ip -n "$hub" link add name br0 type bridge && ip -n "$hub" link set br0 up
}

# no_offloads NS DEV: frames leave DEV no bigger than its MTU and with their
# checksums filled in, as the delay line, which reads raw frames, needs.
no_offloads() { ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off >/dev/null 2>&1; }

# new_ns NS: a namespace with lo up and no IPv6 (no router solicitations).
new_ns() {
    ip netns add "$1" && NETNS+=("$1") && ip -n "$1" link set lo up &&
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

netns_host() {
    local ns=$1 ip=$2 port=p${#NETNS[@]}
    new_ns "$ns" &&
    ip -n "$ns" link add name eth0 type veth peer name "$port" netns "$NETNS_HUB" &&
    ip -n "$NETNS_HUB" link set "$port" master br0 up && ip -n "$ns" addr add "$ip/24" dev eth0 &&
    ip -n "$ns" link set eth0 up
}

# In MID: "host" is the far end of the host's eth0, "hub" the far end of its
# port on the hub's bridge; br0 joins them while no delay line runs.
netns_host_via() {
    local ns=$1 ip=$2 mid=$3 port=p${#NETNS[@]}
    new_ns "$mid" && new_ns "$ns" &&
    ip -n "$ns" link add name eth0 type veth peer name host netns "$mid" &&
    ip -n "$mid" link add name hub type veth peer name "$port" netns "$NETNS_HUB" &&
    ip -n "$mid" link add name br0 type bridge && ip -n "$mid" link set br0 up &&
    ip -n "$mid" link set host master br0 up && ip -n "$mid" link set hub master br0 up &&
    ip -n "$NETNS_HUB" link set "$port" master br0 up &&
    no_offloads "$ns" eth0 && no_offloads "$NETNS_HUB" "$port" && no_offloads "$mid" host && no_offloads "$mid" hub &&
    ip -n "$ns" addr add "$ip/24" dev eth0 && ip -n "$ns" link set eth0 up
}

netns_delay_on() {
    local mid=$1 ms=$2 loss=$3 seed=$4 log=$NETNS_RUN/delay-$1.log i
    [ -e "$NETNS_RUN/delay-$mid.pid" ] && { echo "netns_delay_on: a delay line already runs in $mid" >&2; return 1; }
    ip -n "$mid" link set host nomaster && ip -n "$mid" link set hub nomaster || return 1
    echo "=== $(date +%T.%N) delay $ms ms, loss $loss, seed $seed" >>"$log"
    ip netns exec "$mid" "$DELAY_LINK" --if-a host --if-b hub --delay-ms "$ms" --loss "$loss" --seed "$seed" \
        >>"$log" 2>&1 </dev/null &
    echo $! >"$NETNS_RUN/delay-$mid.pid"
    for ((i = 0; i < 100; i++)); do
        [ "$(grep -c 'forwarding' "$log")" -ge "$(grep -c '^===' "$log")" ] && return 0
        kill -0 $! 2>/dev/null || break
        sleep 0.05
    done
    echo "netns_delay_on: the delay line did not start in $mid: $(tail -2 "$log")" >&2
    return 1
}

netns_delay_off() {
    local mid=$1 pidf=$NETNS_RUN/delay-$1.pid pid i
    [ -e "$pidf" ] || { echo "netns_delay_off: no delay line runs in $mid" >&2; return 1; }
    pid=$(cat "$pidf")
    rm -f "$pidf"
    if ! kill -TERM "$pid" 2>/dev/null; then   # it ended on its own: the fault was not what it said
        ip -n "$mid" link set host master br0; ip -n "$mid" link set hub master br0
        echo "netns_delay_off: the delay line in $mid had exited: $(tail -2 "$NETNS_RUN/delay-$mid.log")" >&2
        return 1
    fi
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    ip -n "$mid" link set host master br0 && ip -n "$mid" link set hub master br0
}

netns_link() { ip -n "$1" link set eth0 "$2"; }

netns_block() {
    local ns=$1 t=$2 addr=$3
    ip netns exec "$ns" nft -f - <<EOF
table inet $t {
    chain in { type filter hook input priority 0; ip saddr $addr drop; }
    chain out { type filter hook output priority 0; ip daddr $addr drop; }
}
EOF
}

netns_isolate() {
    ip netns exec "$1" nft -f - <<EOF
table inet $2 {
    chain in { type filter hook input priority 0; iifname "eth0" drop; }
}
EOF
}

netns_unblock() { ip netns exec "$1" nft delete table inet "$2"; }

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case ${1:-} in
    netns_delay_on | netns_delay_off | netns_link | netns_block | netns_isolate | netns_unblock) "$@" ;;
    *) echo "usage: bash netns.sh netns_delay_on|netns_delay_off|netns_link|netns_block|netns_isolate|netns_unblock ARGS" >&2
       exit 2 ;;
    esac
fi
