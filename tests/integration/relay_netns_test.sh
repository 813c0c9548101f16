#!/usr/bin/env bash
# Relays through engine nodes (plan relay:F), across hosts in network
# namespaces: the control endpoint on a host of its own, two trainer ranks on
# another, four engine nodes (one local rank each) on four more.
#   (a) relay:1 (a chain) and relay:2 (a tree): every node holds every
#       version, each dump equals the safetensors file it came from (compared
#       by st_tool.py, in Python), and the trainer host's eth0 sent about one
#       image per version instead of one per node (its veth counter);
#   (b) with the trainer uplink rate-limited (tbf), the middle node of a
#       chain is killed (-9) while its child pulls from it: the child gives
#       the relay up, naming it, gets the rest from the trainer ranks and is
#       ready with a dump equal to the source;
#   (c) a late joiner (an id that sorts first) catches up from a node that
#       holds the version: the trainer host sends far less than an image;
#   (d) a pull request without the token is refused by a relay before a
#       byte moves, and the relay names whom it refused;
#   (e) the middle node of a chain is stopped (SIGSTOP) mid-pull: after
#       relay_stall_ms without a piece its child gives it up, naming it, and
#       is ready from the trainer ranks;
#   (f) nodes that receive into tensors of their own (Python `into`, in
#       place and staged) relay and are relayed to;
#   (g) nodes of two ranks as one TP=2 group (engine layouts, a Qwen2-shaped
#       file from 2 fsdp trainer ranks) relay to nodes of the same targets:
#       each rank's dump equals the slices tp_tool.py computes from the source
#       (not wsync's code), the children say they got the puts from their
#       parent's relay, and the trainers' uplink carries the model ~once;
#   (h) a TP=2 node whose parent holds the whole image: the relay refuses
#       (other targets), the child names it, falls back to the trainer ranks
#       and is ready with the right slices;
#   (i) the middle node of a chain of TP=2 nodes is killed (-9, both ranks)
#       while its child pulls from it: the child names the relay, gets the
#       missing chunks from the trainer ranks and is ready with the right
#       slices.
# Every process of (b)-(d) proves a token.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"

NAME=relay_netns
source "$(dirname "$0")/netns_lib.sh"
netns_deploy "$NAME" wr 85 4 || exit $(($? - 1)) # 1: skipped, 2: failed

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
PY=/usr/bin/python3
# Two 8 MiB models of random bytes, same tensors (version v is file (v-1) mod 2).
image=$("$PY" - "$ST" "$TMP/m" <<'PY'
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("st", sys.argv[1]); st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)
for i in range(2):
    ts = [(f"model.layers.{k}.weight", "BF16", [1024, 1024], os.urandom(2 << 20)) for k in range(4)]
    st.write(f"{sys.argv[2]}{i}.safetensors", ts, {"format": "pt"})
print(4 * (2 << 20))
PY
)
files="$TMP/m0.safetensors,$TMP/m1.safetensors"

# engine_field URL ID FIELD
engine_field() {
    ip netns exec "$CNS" curl -fsS "$1/v1/status" | "$PY" -c '
import json, sys
for e in json.load(sys.stdin).get("engines", []):
    if e.get("id") == sys.argv[1]:
        v = e.get(sys.argv[2]); print("" if v is None else json.dumps(v) if isinstance(v, dict) else v); break' "$2" "$3"
}
field_is() { [ "$(engine_field "$1" "$2" "$3")" = "$4" ]; }

# trainers TAG VERSIONS ENGINES NODES [TOKEN]: once NODES engine nodes are
# registered (so every node derives its parent from the same list), two
# trainer ranks, each next version once ENGINES nodes hold the last.
# TFILES and TLAYOUT (--layout L), when set, replace the model and layout.
trainers() {
    local tag=$1 versions=$2 engines=$3 nodes=$4 tok=${5:-} r
    wait_until 30 registered "$nodes" || { fail "$tag"_nodes_registered "not $nodes relays registered"; return 1; }
    TRAINERS=()
    for r in 0 1; do
        bg ip netns exec "$TNS" env ${tok:+WSYNC_TOKEN=$tok} "$WSYNC" trainer --control "$URL" --rank $r --world 2 \
            --safetensors "${TFILES:-$files}" ${TLAYOUT:+--layout $TLAYOUT} --versions "$versions" \
            --wait-engines "$engines" --chunk "${TCHUNK:-256K}" \
            --listen "$TIP:0" --advertise "$TIP" >"$TMP/$tag-t$r.log" 2>&1
        TRAINERS+=($!)
    done
}

# engine TAG E ID PLAN VERSIONS|follow [TOKEN]: one engine node on host E, in the background ($!).
engine() {
    local tag=$1 e=$2 id=$3 plan=$4 versions=$5 tok=${6:-} how
    how=(--versions "$versions"); [ "$versions" = follow ] && how=(--follow)
    ip netns exec "${ENS[$e]}" env ${tok:+WSYNC_TOKEN=$tok} WSYNC_RELAY_STALL_MS=2000 "$WSYNC" engine \
        --control "$URL" --engine "$id" --local-rank 0 --local-world 1 --plan "$plan" "${how[@]}" \
        --transport tcp --bind "${EIP[$e]}" --timeout-ms 40000 --dump "$TMP/$tag" >"$TMP/$tag-$id.log" 2>&1 &
    WSYNC_PIDS+=($!)
}

# uplink_once TAG SENT IMAGE VERSIONS: the trainers' host sent the model
# about once: at least IMAGE x VERSIONS bytes, under 1.5 times that plus one
# image for each relay a child gave up on (relay_stall_ms: its missing bytes
# then come from the trainers; a loaded machine can stall a relay that
# long), as the children's logs name them.
uplink_once() {
    local tag=$1 sent=$2 image=$3 versions=$4 falls
    falls=$(cat "$TMP/$tag"-*.log 2>/dev/null | grep -c 'relay of engine .* given up')
    [ "$falls" -gt 0 ] && echo "$tag: $falls relay fallbacks to the trainer ranks" >&2
    [ "$sent" -ge $((versions * image)) ] && [ "$sent" -lt $((versions * image * 3 / 2 + falls * image)) ]
}

# dumps_match TAG VERSIONS ID...: every node's dump of every version equals its source.
dumps_match() {
    local tag=$1 versions=$2 id v ok=0; shift 2
    for id in "$@"; do for v in $(seq 1 "$versions"); do
        if ! "$PY" "$ST" compare "$TMP/m$(( (v - 1) % 2 )).safetensors" "$TMP/$tag/$id/rank0/v$v.safetensors" \
            2>>"$TMP/$tag-cmp.err"; then ok=1; echo "$tag: $id v$v differs or is missing" >&2; fi
    done; done
    return $ok
}

# (a) a chain and a tree: every node ready, dumps equal, the model crosses
# the trainers' uplink about once per version.
VERSIONS=2
for plan in relay:1 relay:2; do
    tag=${plan/:/}
    serve "$tag" || exit 1
    tx0=$(bytes "$TNS" tx)
    pids=()
    for e in 0 1 2 3; do engine "$tag" $e "n$e-$$" "$plan" $VERSIONS; pids+=($!); done
    trainers "$tag" $VERSIONS 4 4 || exit 1
    if wait_all 90 "${pids[@]}"; then pass "${tag}_every_node_holds_every_version"
    else fail "${tag}_every_node_holds_every_version" "$(tail -n 2 "$TMP/$tag"-n*.log | tr '\n' ' ')"; fi
    check "${tag}_dumps_match_sources" dumps_match "$tag" $VERSIONS n0-$$ n1-$$ n2-$$ n3-$$
    sent=$(( $(bytes "$TNS" tx) - tx0 ))
    echo "$plan: image $image bytes x $VERSIONS versions, 4 nodes; trainer host sent $sent bytes (direct: >= $((4 * VERSIONS * image)))" >&2
    if uplink_once "$tag" "$sent" "$image" $VERSIONS; then
        pass "${tag}_trainer_uplink_carries_the_model_about_once"
    else
        fail "${tag}_trainer_uplink_carries_the_model_about_once" "sent $sent, want ~$((VERSIONS * image)) (1 to 1.5x, plus an image per relay fallback)"
    fi
    relayed=$(cat "$TMP/$tag"-n*.log | grep -c 'ready' )
    check "${tag}_nodes_report_ready" [ "$relayed" -ge $((4 * VERSIONS)) ]
    undeploy
done

# (b) a relay killed mid-pull: its child falls back to the trainer ranks.
# These nodes follow (keep serving what they hold) so that (c) and (d) find
# live relays.
TOKEN=relay-test-token-$$
ip netns exec "$TNS" tc qdisc replace dev eth0 root tbf rate 8mbit burst 64kb latency 200ms
serve kill "$TOKEN" || exit 1
tx0=$(bytes "$TNS" tx)
engine kill 0 n0-$$ relay:1 follow "$TOKEN"
engine kill 1 n1-$$ relay:1 follow "$TOKEN"; P1=$!
engine kill 2 n2-$$ relay:1 follow "$TOKEN"
trainers kill 1 0 3 "$TOKEN" || exit 1
# The chain n0 -> n1 -> n2 pipelines at the uplink's rate (~9 s for 8 MiB):
# once n2 holds some bytes verified, but less than half, n1 goes.
landed() { local p; p=$(engine_field "$URL" "$1" progress); [ -n "$p" ] && "$PY" -c '
import json, sys; p = json.loads(sys.argv[1]); sys.exit(0 if 0 < p.get("bytes", 0) < p.get("total", 0) / 2 else 1)' "$p"; }
if wait_until 30 landed n2-$$ && ! field_is "$URL" n2-$$ state ready; then
    pass kill_relay_killed_while_its_child_pulls
else
    fail kill_relay_killed_while_its_child_pulls "n2 was not pulling when n1 was killed: $(tail -2 "$TMP/kill-n2-$$.log")"
fi
relay1=$(engine_field "$URL" n1-$$ endpoint | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["relay"])')
kill -9 $P1; wait $P1 2>/dev/null
ready() { field_is "$URL" "$1" state ready && field_is "$URL" "$1" version 1; }
if wait_until 60 ready n2-$$ && wait_until 20 ready n0-$$; then pass kill_downstream_falls_back_and_is_ready
else fail kill_downstream_falls_back_and_is_ready "$(tail -n 3 "$TMP"/kill-n[02]-$$.log | tr '\n' ' ')"; fi
check kill_log_names_the_relay grep -q "relay of engine n1-$$ at $relay1 given up" "$TMP/kill-n2-$$.log"
wait_until 10 test -s "$TMP/kill/n2-$$/rank0/v1.safetensors"
check kill_dumps_match_sources dumps_match kill 1 n0-$$ n2-$$
echo "kill: trainer host sent $(( $(bytes "$TNS" tx) - tx0 )) bytes for 3 nodes of $image" >&2

# (c) a late joiner, its id first in order, catches up from a node holding
# the version (n0 or n2), not from the trainer ranks.
tx0=$(bytes "$TNS" tx)
engine kill 3 aaa-late-$$ relay:1 1 "$TOKEN"; PL=$!
if wait_all 60 $PL; then pass late_joiner_is_ready
else fail late_joiner_is_ready "$(tail -n 3 "$TMP/kill-aaa-late-$$.log" | tr '\n' ' ')"; fi
check late_joiner_dump_matches_source dumps_match kill 1 aaa-late-$$
sent=$(( $(bytes "$TNS" tx) - tx0 ))
echo "late joiner: trainer host sent $sent bytes (image $image)" >&2
check late_joiner_not_served_by_the_trainers [ "$sent" -lt $((image / 4)) ]

# (d) no token, no bytes: a raw client asks n0's relay for the weights.
relay0=$(engine_field "$URL" n0-$$ endpoint | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["relay"])')
digest=$(ip netns exec "$CNS" curl -fsS "$URL/v1/versions/1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["layout_digest"])')
out=$(ip netns exec "${ENS[3]}" "$PY" "$WSYNC_ROOT/tests/integration/auth_attack.py" pull noproof "$relay0" "$digest" 2>&1)
if echo "$out" | "$PY" -c 'import json,sys; o = json.loads(sys.stdin.read().strip().splitlines()[-1])
sys.exit(0 if o["sink_conns"] == 0 and o["sink_bytes"] == 0 and o["status"] == -16 and "no proof" in o["why"] else 1)'; then
    pass relay_refuses_a_pull_without_the_token
else
    fail relay_refuses_a_pull_without_the_token "$out"
fi
check relay_names_whom_it_refused grep -Eq "engine n0-$$'s relay: (relay )?pull request from .* refused" "$TMP/kill-n0-$$.log"

# (e) a stalled relay: stopped, not dead (its connections stay open).
serve stall "$TOKEN" || exit 1
engine stall 0 s0-$$ relay:1 1 "$TOKEN"; S0=$!
engine stall 1 s1-$$ relay:1 1 "$TOKEN"; S1=$!
engine stall 2 s2-$$ relay:1 1 "$TOKEN"; S2=$!
trainers stall 1 0 3 "$TOKEN" || exit 1
wait_until 30 landed s2-$$ || fail stall_child_pulls_from_the_relay "s2 landed nothing in 30 s"
relay1=$(engine_field "$URL" s1-$$ endpoint | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["relay"])')
kill -STOP $S1
if wait_all 60 $S0 $S2; then pass stall_downstream_falls_back_and_is_ready
else fail stall_downstream_falls_back_and_is_ready "$(tail -n 3 "$TMP"/stall-s[02]-$$.log | tr '\n' ' ')"; fi
kill -CONT $S1
check stall_log_names_the_relay grep -q "relay of engine s1-$$ at $relay1 given up (no piece landed for 2000 ms" \
    "$TMP/stall-s2-$$.log"
check stall_dumps_match_sources dumps_match stall 1 s0-$$ s2-$$
if wait_all 60 $S1; then pass stall_stopped_relay_resumes_and_is_ready
else fail stall_stopped_relay_resumes_and_is_ready "$(tail -n 3 "$TMP/stall-s1-$$.log" | tr '\n' ' ')"; fi
check stall_resumed_relay_dump_matches_source dumps_match stall 1 s1-$$
# (f) nodes that receive into tensors of their own (Python, `into`: the
# caller's destination tensors): the chain f0 (the CLI) -> f1 (in place: it
# relays out of its image while its tensors are written) -> f2 (staged);
# every dump, written from the tensors torch holds, equals its source, and
# the model crosses the trainers' uplink about once per version.
LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so
if nm -D "$LIB" 2>/dev/null | grep -q ' U __asan_init'; then
    skip own_tensors_relay "libwsync.so is an AddressSanitizer build (make asan): Python runs in make test"
elif ! "$PY" -c 'import torch' 2>/dev/null; then
    skip own_tensors_relay "no torch for $PY (make deps installs python3-torch)"
else
    # pyengine TAG E ID MODE VERSIONS: a Python node on host E, in the background ($!).
    pyengine() {
        ip netns exec "${ENS[$2]}" env WSYNC_PLAN=relay:1 WSYNC_RELAY_STALL_MS=2000 WSYNC_LIB="$LIB" \
            WSYNC_ROOT="$WSYNC_ROOT" "$PY" "$WSYNC_ROOT/tests/python/relay_engine.py" "$URL" "$3" "$4" "$5" \
            "${EIP[$2]}" "$TMP/$1" 4 1024 1024 >"$TMP/$1-$3.log" 2>&1 &
        WSYNC_PIDS+=($!)
    }
    serve own || exit 1
    tx0=$(bytes "$TNS" tx)
    engine own 0 f0-$$ relay:1 $VERSIONS; F0=$!
    pyengine own 1 f1-$$ in-place $VERSIONS; F1=$!
    pyengine own 2 f2-$$ staged $VERSIONS; F2=$!
    trainers own $VERSIONS 3 3 || exit 1
    if wait_all 120 $F0 $F1 $F2; then pass own_tensors_every_node_holds_every_version
    else fail own_tensors_every_node_holds_every_version "$(tail -n 2 "$TMP"/own-f*.log | tr '\n' ' ')"; fi
    check own_tensors_dumps_match_sources dumps_match own $VERSIONS f0-$$ f1-$$ f2-$$
    sent=$(( $(bytes "$TNS" tx) - tx0 ))
    echo "own tensors, relay:1: trainer host sent $sent bytes for 3 nodes, image $image x $VERSIONS versions" >&2
    if uplink_once own "$sent" "$image" $VERSIONS; then
        pass own_tensors_trainer_uplink_carries_the_model_about_once
    else
        fail own_tensors_trainer_uplink_carries_the_model_about_once "sent $sent, want ~$((VERSIONS * image)) (1 to 1.5x, plus an image per relay fallback)"
    fi
    undeploy
fi
# (g) engine layouts: a chain of three TP=2 nodes, staged, in place, staged.
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"
"$PY" "$TOOL" qwen "$TMP/q1.safetensors" 1 && "$PY" "$TOOL" qwen "$TMP/q2.safetensors" 2 ||
    { fail tp_relay_models "tp_tool.py could not write the models"; exit 1; }
qbytes=$("$PY" - "$TMP/q1.safetensors" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read(); print(len(raw) - 8 - struct.unpack("<Q", raw[:8])[0])
PY
)
# tpnode TAG E ID MODE [VERSIONS|follow]: two local ranks, one TP=2 group, on host E;
# pids in TP_PIDS.
tpnode() {
    local tag=$1 e=$2 id=$3 mode=$4 nv=${5:-2} r how
    how=(--versions "$nv"); [ "$nv" = follow ] && how=(--follow)
    for r in 0 1; do
        ip netns exec "${ENS[$e]}" env WSYNC_RELAY_STALL_MS=2000 WSYNC_TRACE=1 "$WSYNC" engine --control "$URL" \
            --engine "$id" --local-rank $r --local-world 2 --tp 2 --mode "$mode" --plan relay:1 "${how[@]}" \
            --transport tcp --bind "${EIP[$e]}" --timeout-ms 40000 --dump "$TMP/$tag" >"$TMP/$tag-$id-r$r.log" 2>&1 &
        WSYNC_PIDS+=($!); TP_PIDS+=($!)
    done
}
# tp_dumps_match TAG ID...: both ranks of every node, versions 1 to TPV
# (default 2), by tp_tool.py.
tp_dumps_match() {
    local tag=$1 id r v ok=0; shift
    for id in "$@"; do for r in 0 1; do for v in $(seq 1 "${TPV:-2}"); do
        "$PY" "$TOOL" check "$TMP/q$v.safetensors" "$TMP/$tag/$id/rank$r/v$v.safetensors" 2 $r \
            2>>"$TMP/$tag-cmp.err" || { ok=1; echo "$tag: $id rank$r v$v differs or is missing" >&2; }
    done; done; done
    return $ok
}
TFILES="$TMP/q1.safetensors,$TMP/q2.safetensors" TLAYOUT=fsdp TCHUNK=64K
export TFILES TLAYOUT TCHUNK
serve tpr || exit 1
tx0=$(bytes "$TNS" tx)
TP_PIDS=()
tpnode tpr 0 t0-$$ staged; tpnode tpr 1 t1-$$ in-place; tpnode tpr 2 t2-$$ staged
trainers tpr 2 3 3 || exit 1
if wait_all 120 "${TP_PIDS[@]}"; then pass tp_relay_every_node_holds_every_version
else fail tp_relay_every_node_holds_every_version "$(tail -n 2 "$TMP"/tpr-t*.log | tr '\n' ' ')"; fi
check tp_relay_dumps_are_the_rules_slices tp_dumps_match tpr t0-$$ t1-$$ t2-$$
ok=0
for n in 1 2; do for r in 0 1; do for v in 1 2; do
    grep -q "version $v from the relay of engine t$((n - 1))-$$" "$TMP/tpr-t$n-$$-r$r.log" || ok=1
done; done; done
check tp_relay_children_get_the_puts_from_their_parent [ $ok = 0 ]
sent=$(( $(bytes "$TNS" tx) - tx0 ))
echo "tp relay:1: trainer host sent $sent bytes for 3 TP=2 nodes, model $qbytes bytes x 2 versions" >&2
if uplink_once tpr "$sent" "$qbytes" 2; then
    pass tp_relay_trainer_uplink_carries_the_model_about_once
else
    fail tp_relay_trainer_uplink_carries_the_model_about_once "sent $sent, want ~$((2 * qbytes)) (1 to 1.5x, plus an image per relay fallback)"
fi
undeploy

# (h) a TP=2 node below a whole-image node: refused, named, ready from the trainers.
serve mix || exit 1
TP_PIDS=()
engine mix 0 u0-$$ relay:1 2; U0=$!
tpnode mix 1 u1-$$ staged
trainers mix 2 2 2 || exit 1
if wait_all 120 $U0 "${TP_PIDS[@]}"; then pass tp_relay_other_targets_fall_back_and_are_ready
else fail tp_relay_other_targets_fall_back_and_are_ready "$(tail -n 2 "$TMP"/mix-u1*.log | tr '\n' ' ')"; fi
check tp_relay_other_targets_named grep -q "relay of engine u0-$$ at .* given up (.*a relay serves nodes with the same targets only" \
    "$TMP/mix-u1-$$-r0.log"
check tp_relay_other_targets_dumps_are_the_rules_slices tp_dumps_match mix u1-$$
undeploy
# (i) a chain of TP=2 nodes, the middle one killed while its child pulls from
# it: the trainer uplink shaped to 1 Mbit/s, so the chain pipelines the
# ~1 MB model over about 8 s.
ip netns exec "$TNS" tc qdisc replace dev eth0 root tbf rate 1mbit burst 32kb latency 400ms
serve tpkill || exit 1
TP_PIDS=()
tpnode tpkill 0 i0-$$ staged follow; tpnode tpkill 1 i1-$$ staged follow; I1=("${TP_PIDS[@]:2:2}")
tpnode tpkill 2 i2-$$ in-place 1
trainers tpkill 1 0 3 || exit 1
if wait_until 30 landed i2-$$ && ! field_is "$URL" i2-$$ state ready; then pass tp_relay_killed_while_its_child_pulls
else fail tp_relay_killed_while_its_child_pulls "i2 was not pulling when i1 was killed: $(tail -2 "$TMP/tpkill-i2-$$-r0.log")"; fi
kill -9 "${I1[@]}"; wait "${I1[@]}" 2>/dev/null
if wait_until 60 ready i2-$$ && wait_until 20 ready i0-$$; then pass tp_relay_killed_child_falls_back_and_is_ready
else fail tp_relay_killed_child_falls_back_and_is_ready "$(tail -n 3 "$TMP"/tpkill-i2-$$-r*.log | tr '\n' ' ')"; fi
check tp_relay_killed_named grep -q "relay of engine i1-$$ at .* given up" "$TMP/tpkill-i2-$$-r0.log" \
    "$TMP/tpkill-i2-$$-r1.log"
wait_until 10 test -s "$TMP/tpkill/i2-$$/rank1/v1.safetensors"
TPV=1 check tp_relay_killed_dumps_are_the_rules_slices tp_dumps_match tpkill i0-$$ i2-$$
kill "${TP_PIDS[@]}" 2>/dev/null
undeploy
exit 0
