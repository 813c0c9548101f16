#!/usr/bin/env bash
# The CPU data path across hosts: the control endpoint and two trainer ranks in
# one network namespace, each of two engine nodes (two local ranks each) in its
# own, joined through a bridge in a hub namespace, so every byte of every
# version crosses a veth. Dumps must equal the safetensors files they came
# from, and the engines' veth counters must have grown by at least the image.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"
source "$(dirname "$0")/netns_lib.sh"

NAME=multihost_netns
PY=python3
if ! netns_begin "wsh$$"; then skip "$NAME" "$NETNS_WHY"; exit 0; fi
NET="10.$(( ($$ >> 8) & 255 )).$(( $$ & 255 ))"   # a /24 of its own per run
# The control endpoint runs on the trainers' host: CNS is TNS.
TNS=wst$$; ENS=(wse0-$$ wse1-$$); TIP=$NET.1; EIP=("$NET.10" "$NET.11")
CNS=$TNS; CIP=$TIP
if ! { netns_host "$TNS" "$TIP" && netns_host "${ENS[0]}" "${EIP[0]}" && netns_host "${ENS[1]}" "${EIP[1]}"; } \
    2>"$TMP/setup.err"; then
    fail "$NAME"_setup "cannot build the namespaces: $(cat "$TMP/setup.err")"; exit 1
fi

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
python3 "$ST" make "$TMP/m" 2 >/dev/null
files="$TMP/m0.safetensors,$TMP/m1.safetensors"
# The image is the tensors' bytes of one version (both files have the same shapes).
image=$(python3 - "$ST" "$TMP/m0.safetensors" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("st", sys.argv[1]); st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)
print(sum(len(d) for _, _, d in st.read(sys.argv[2])[0].values()))
PY
)
VERSIONS=2

rx0=(); for i in 0 1; do rx0+=("$(bytes "${ENS[$i]}" rx)"); done
tx0=$(bytes "$TNS" tx)

serve "$NAME" || exit 1
for r in 0 1; do
    bg ip netns exec "$TNS" "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$files" \
        --versions $VERSIONS --wait-engines 2 --chunk 16K --listen "$TIP:0" --advertise "$TIP" \
        >"$TMP/t$r.log" 2>&1
done
# The trainers registered pull addresses of their own host, not a loopback one.
pulls() {
    ip netns exec "$TNS" curl -fsS "$URL/v1/status" | python3 -c '
import json, sys
print(" ".join(sorted((t.get("endpoint") or {}).get("pull", "") for t in json.load(sys.stdin).get("trainers", []))))'
}
for i in $(seq 1 200); do [ "$(pulls | wc -w)" = 2 ] && break; sleep 0.05; done
check netns_trainers_advertise_their_host_address grep -Eq "^${TIP//./\\.}:[0-9]+ ${TIP//./\\.}:[0-9]+\$" <(pulls)
# Another host reaches the control endpoint over the bridge.
check netns_engine_host_reaches_control ip netns exec "${ENS[1]}" curl -fsS -o /dev/null "$URL/healthz"
EPIDS=()
for e in 0 1; do for r in 0 1; do
    ip netns exec "${ENS[$e]}" "$WSYNC" engine --control "$URL" --engine node$e-$$ --local-rank $r --local-world 2 \
        --versions $VERSIONS --transport tcp --bind "${EIP[$e]}" --timeout-ms 20000 --dump "$TMP/dump" \
        >"$TMP/e$e-$r.log" 2>&1 &
    WSYNC_PIDS+=($!); EPIDS+=($!)
done; done

# Engines end on their own after holding every version; bound the wait.
ok=1
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
    alive=0; for p in "${EPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.05
done
for p in "${EPIDS[@]}"; do
    # A hung rank may sit in a pull until its timeout; do not wait for it.
    if kill -0 "$p" 2>/dev/null; then ok=0; kill -9 "$p"; fi
    wait "$p" || ok=0
done
if [ $ok = 1 ]; then pass netns_engines_hold_every_version
else
    fail netns_engines_hold_every_version "an engine rank failed or hung: $(tail -n 3 "$TMP"/e*.log | tr '\n' ' ')"
fi

ok=1
for e in 0 1; do for r in 0 1; do for v in $(seq 1 $VERSIONS); do
    src="$TMP/m$(( (v - 1) % 2 )).safetensors"
    dst="$TMP/dump/node$e-$$/rank$r/v$v.safetensors"
    if [ ! -f "$dst" ]; then ok=0; echo "node$e rank$r v$v: no dump" >&2
    elif ! python3 "$ST" compare "$src" "$dst" 2>"$TMP/cmp.err"; then
        ok=0; echo "node$e rank$r v$v differs from $src: $(tail -1 "$TMP/cmp.err")" >&2
    fi
done; done; done
check netns_dumps_match_sources [ $ok = 1 ]

# Every version crossed each engine node's veth, and left the trainers' one.
ok=1; why=
for i in 0 1; do
    got=$(( $(bytes "${ENS[$i]}" rx) - rx0[i] ))
    [ "$got" -ge $((VERSIONS * image)) ] || { ok=0; why+="node$i rx grew $got; "; }
done
sent=$(( $(bytes "$TNS" tx) - tx0 ))
[ "$sent" -ge $((2 * VERSIONS * image)) ] || { ok=0; why+="trainer tx grew $sent; "; }
echo "image $image bytes x $VERSIONS versions; rx node0 $(( $(bytes "${ENS[0]}" rx) - rx0[0] )), node1 $(( $(bytes "${ENS[1]}" rx) - rx0[1] )), trainers tx $sent" >&2
if [ $ok = 1 ]; then pass netns_bytes_crossed_veths
else fail netns_bytes_crossed_veths "${why}want >= $VERSIONS x $image bytes per node"; fi
