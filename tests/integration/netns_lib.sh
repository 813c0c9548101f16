# netns_lib.sh: helpers of the tests whose control endpoint runs in a network
# namespace (relay_netns, relay_delta, relay_delta_tp, multihost_netns), sourced
# after lib.sh and netns.sh. netns_deploy builds the hosts; the others read CNS
# (the endpoint's namespace), CIP (its address), PY, TRAINERS and SERVE when
# called.

# netns_deploy NAME P SALT N: the hosts of a deployment, each a namespace on netns.sh's bridge (hub P h$$):
# the control endpoint's (CNS at CIP), the trainer ranks' (TNS at TIP) and N engine hosts (ENS[i] at EIP[i]),
# named from P and $$, in 10.x.y.0/24 with x and y from $$ and SALT (so that tests running at once differ).
# 0 when built; else the test's line is printed: 1 when this machine cannot (NAME skipped), 2 when building
# failed (NAME_setup failed).
netns_deploy() {
    local name=$1 p=$2 salt=$3 n=$4 i ok=0
    if ! netns_begin "${p}h$$"; then skip "$name" "$NETNS_WHY"; return 1; fi
    NET="10.$(( ($$ >> 8) & 255 )).$(( ($$ & 255) ^ salt ))"
    CNS=${p}c$$; TNS=${p}t$$; CIP=$NET.1; TIP=$NET.2; ENS=(); EIP=()
    for ((i = 0; i < n; i++)); do ENS+=("${p}e$i-$$"); EIP+=("$NET.$((10 + i))"); done
    {
        netns_host "$CNS" "$CIP" && netns_host "$TNS" "$TIP" || ok=1
        for ((i = 0; ok == 0 && i < n; i++)); do netns_host "${ENS[$i]}" "${EIP[$i]}" || ok=1; done
    } 2>"$TMP/setup.err"
    [ $ok = 0 ] || { fail "$name"_setup "cannot build the namespaces: $(cat "$TMP/setup.err")"; return 2; }
}
# wait_until SECONDS CMD...: 0 once CMD succeeds (polled every 50 ms), else 1.
wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 20; i++)); do "$@" && return 0; sleep 0.05; done; return 1; }
# wait_all SECONDS PID...: 0 when every one exited 0 in time (the rest are killed).
wait_all() {
    local t=$1 ok=0 p end; shift
    end=$((SECONDS + t))
    for p in "$@"; do
        while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
        if kill -0 "$p" 2>/dev/null; then kill -9 "$p"; ok=1; fi
        wait "$p" || ok=1
    done
    return $ok
}
# serve TAG [TOKEN]: a control endpoint in CNS (URL, SERVE), with WSYNC_TOKEN=TOKEN when one is given;
# TAG_control_up fails if it does not come up.
serve() {
    local tag=$1 tok=${2:-} port
    port=$(free_port)
    URL="http://$CIP:$port"
    bg ip netns exec "$CNS" env ${tok:+WSYNC_TOKEN=$tok} "$WSYNC" serve --listen "$CIP:$port" 2>"$TMP/$tag-serve.log"
    SERVE=$!
    ip netns exec "$CNS" bash -c "$(declare -f wait_http); wait_http $URL/healthz" ||
        { fail "$tag"_control_up "$(tail -3 "$TMP/$tag-serve.log")"; return 1; }
}
# undeploy: ends the trainer ranks (TRAINERS) and the control endpoint (SERVE).
undeploy() { local p; for p in "${TRAINERS[@]}" "$SERVE"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
# bytes NS rx|tx: the bytes NS's eth0 received or sent so far (its veth counter).
bytes() { ip -n "$1" -s -j link show dev eth0 | "$PY" -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['$2']['bytes'])"; }
# registered N: exactly N engine nodes registered a relay.
registered() {
    [ "$(ip netns exec "$CNS" curl -fsS "$URL/v1/status" | "$PY" -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["engines"] if (e.get("endpoint") or {}).get("relay")))')" = "$1" ]
}
