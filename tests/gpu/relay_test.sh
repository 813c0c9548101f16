#!/usr/bin/env bash
# Relays between GPU engine nodes (plan relay:1): one trainer rank with its
# shard in GPU memory and three engine nodes whose images are GPU memory,
# each node a host of its own (host ids), all on GPU 0 and over tcp (a
# relay puts out of its GPU image through the tcp transport's bounce
# buffers). The chain g0 -> g1 -> g2: g1 and g2 say they got each version
# from their parent's relay, every node is ready with dumps equal to the
# safetensors files they came from, staged and in place. Then two nodes of
# two ranks each as one TP=2 group (engine layouts: a Qwen2-shaped file),
# the second below the first: its ranks get their puts from the first
# node's relay (out of the GPU windows of the ranks they landed on) and
# every rank's dump equals the slices tests/integration/tp_tool.py computes
# from the source. Skips without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
CASES="relay_gpu_staged_chain_ready relay_gpu_staged_from_parents relay_gpu_staged_dumps_match
       relay_gpu_in_place_chain_ready relay_gpu_in_place_from_parents relay_gpu_in_place_dumps_match
       relay_gpu_tp2_chain_ready relay_gpu_tp2_from_parent relay_gpu_tp2_dumps_are_the_rules_slices"
ngpu=$(cuda_devices)
if [ "$ngpu" = 0 ]; then
    for c in $CASES; do skip "$c" "no CUDA device"; done
    exit 0
fi

python3 "$ST" make "$TMP/m" 2 >/dev/null
files="$TMP/m0.safetensors,$TMP/m1.safetensors"
relays() { # URL: how many engine nodes registered a relay address
    curl -fsS "$1/v1/status" | python3 -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["engines"] if (e.get("endpoint") or {}).get("relay")))'
}

# chain NAME MODE: the trainer, three nodes; checks and logs under $TMP/NAME.
chain() {
    local name=$1 mode=$2 port url i pids=() ok=0 v
    port=$(free_port); url="http://127.0.0.1:$port"
    bg "$WSYNC" serve --listen "127.0.0.1:$port" >"$TMP/$name.serve.log" 2>&1
    wait_http "$url/healthz" 30 || { fail "${name}_chain_ready" "control endpoint did not come up"; return; }
    for i in 0 1 2; do
        WSYNC_TRACE=1 timeout 200 "$WSYNC" engine --control "$url" --engine "g$i" --local-rank 0 --local-world 1 \
            --versions 2 --mode "$mode" --plan relay:1 --transport tcp --device cuda:0 --host-id "h-g$i" \
            --timeout-ms 120000 --dump "$TMP/$name" >"$TMP/$name.g$i.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    for i in $(seq 1 600); do [ "$(relays "$url")" = 3 ] && break; sleep 0.05; done
    timeout 200 "$WSYNC" trainer --control "$url" --rank 0 --world 1 --safetensors "$files" --versions 2 \
        --wait-engines 3 --chunk 1M --device cuda:0 --host-id h-rt --exit-after-publish \
        >"$TMP/$name.trainer.log" 2>&1 &
    WSYNC_PIDS+=($!)
    for i in "${pids[@]}"; do wait "$i" || ok=1; done
    if [ $ok = 0 ]; then pass "${name}_chain_ready"
    else fail "${name}_chain_ready" "$(tail -n 2 "$TMP/$name".g*.log | tr '\n' ' ')"; fi
    ok=0
    for i in 1 2; do for v in 1 2; do
        grep -q "version $v from the relay of engine g$((i - 1))" "$TMP/$name.g$i.log" || ok=1
    done; done
    check "${name}_from_parents" [ $ok = 0 ]
    ok=0
    for i in 0 1 2; do for v in 1 2; do
        python3 "$ST" compare "$TMP/m$(( (v - 1) % 2 )).safetensors" "$TMP/$name/g$i/rank0/v$v.safetensors" \
            2>>"$TMP/$name.cmp.err" || ok=1
    done; done
    if [ $ok = 0 ]; then pass "${name}_dumps_match"; else fail "${name}_dumps_match" "$(head -3 "$TMP/$name.cmp.err")"; fi
}

chain relay_gpu_staged staged
chain relay_gpu_in_place in-place

# Engine layouts: the chain t0 -> t1 of TP=2 nodes (two ranks each, all on GPU 0).
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"
python3 "$TOOL" qwen "$TMP/q1.safetensors" 1 && python3 "$TOOL" qwen "$TMP/q2.safetensors" 2 || {
    fail relay_gpu_tp2_chain_ready "tp_tool.py could not write the models"; exit 0; }
port=$(free_port); url="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" >"$TMP/tp2.serve.log" 2>&1
wait_http "$url/healthz" 30 || { fail relay_gpu_tp2_chain_ready "control endpoint did not come up"; exit 0; }
pids=()
for n in 0 1; do for r in 0 1; do
    WSYNC_TRACE=1 timeout 200 "$WSYNC" engine --control "$url" --engine "t$n" --local-rank $r --local-world 2 --tp 2 \
        --versions 2 --plan relay:1 --transport tcp --device cuda:0 --host-id "h-t$n" --timeout-ms 120000 \
        --dump "$TMP/tp2" >"$TMP/tp2.t$n.r$r.log" 2>&1 &
    pids+=($!); WSYNC_PIDS+=($!)
done; done
for i in $(seq 1 600); do [ "$(relays "$url")" = 2 ] && break; sleep 0.05; done
timeout 200 "$WSYNC" trainer --control "$url" --rank 0 --world 1 --safetensors "$TMP/q1.safetensors,$TMP/q2.safetensors" \
    --versions 2 --wait-engines 2 --chunk 64K --device cuda:0 --host-id h-rt --exit-after-publish \
    >"$TMP/tp2.trainer.log" 2>&1 &
WSYNC_PIDS+=($!)
ok=0
for i in "${pids[@]}"; do wait "$i" || ok=1; done
if [ $ok = 0 ]; then pass relay_gpu_tp2_chain_ready
else fail relay_gpu_tp2_chain_ready "$(tail -n 2 "$TMP"/tp2.t*.log | tr '\n' ' ')"; fi
ok=0
for r in 0 1; do for v in 1 2; do
    grep -q "version $v from the relay of engine t0" "$TMP/tp2.t1.r$r.log" || ok=1
done; done
check relay_gpu_tp2_from_parent [ $ok = 0 ]
ok=0
for n in 0 1; do for r in 0 1; do for v in 1 2; do
    python3 "$TOOL" check "$TMP/q$v.safetensors" "$TMP/tp2/t$n/rank$r/v$v.safetensors" 2 $r 2>>"$TMP/tp2.cmp.err" || ok=1
done; done; done
if [ $ok = 0 ]; then pass relay_gpu_tp2_dumps_are_the_rules_slices
else fail relay_gpu_tp2_dumps_are_the_rules_slices "$(head -3 "$TMP/tp2.cmp.err")"; fi
exit 0
