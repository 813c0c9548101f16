# netns_lib.sh: helpers of the tests whose control endpoint runs in a network
# namespace (relay_netns_test, relay_delta_test, relay_delta_tp_test), sourced
# after lib.sh and netns.sh. They read CNS (the endpoint's namespace), CIP (its
# address), PY, TRAINERS and SERVE when called.

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
