#!/usr/bin/env bash
# Engine layouts on one GPU: a TP=2 group whose two ranks share GPU 0 (CUDA
# IPC windows between them, digests on the GPU), fed by trainer ranks that
# hold their shards in GPU memory (column slices packed by the GPU gather
# kernel) and, beside them, in host memory; staged and in place. Every dumped
# rank is compared with the slices tests/integration/tp_tool.py computes from
# the source file in Python. Skips without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"
PY=/usr/bin/python3
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"
CASES="tp2_one_gpu_gpu_trainers_staged tp2_one_gpu_host_trainers_in_place tp2_one_gpu_corrupted_column_slice
    tp2_one_gpu_packed_stage_in_place"

ngpu=$(cuda_devices)
if [ "$ngpu" = 0 ]; then
    for c in $CASES; do skip "$c" "no CUDA device"; done
    exit 0
fi

$PY "$TOOL" qwen "$TMP/q1.safetensors" 11 && $PY "$TOOL" qwen "$TMP/q2.safetensors" 12 || {
    for c in $CASES; do fail "$c" "tp_tool.py could not write the models"; done; exit 0; }
QWEN="$TMP/q1.safetensors,$TMP/q2.safetensors"

# run NAME TRAINER_DEVICE MODE [ENV...]: 2 trainer ranks (fsdp) on
# TRAINER_DEVICE, one node of 2 ranks on cuda:0 with --tp 2; sets $rc.
run() {
    local name=$1 tdev=$2 mode=$3 port url r pids=(); shift 3
    port=$(free_port); url="http://127.0.0.1:$port"
    bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/$name.serve.log"
    wait_http "$url/healthz" 30 || { rc=99; return; }
    for r in 0 1; do
        env "$@" timeout 240 "$WSYNC" engine --control "$url" --engine "e-$name" --local-rank $r --local-world 2 \
            --tp 2 --mode "$mode" --device cuda:0 --versions 2 --max-failures 1 --timeout-ms 60000 \
            --dump "$TMP/$name" >"$TMP/$name.engine$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    for r in 0 1; do
        env "$@" timeout 240 "$WSYNC" trainer --control "$url" --rank $r --world 2 --layout fsdp \
            --safetensors "$QWEN" --versions 2 --wait-engines 1 --chunk 64K --device "$tdev" \
            >"$TMP/$name.trainer$r.log" 2>&1 &
        WSYNC_PIDS+=($!)
    done
    rc=0
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
}

dumps_ok() { # NAME
    local r v ok=1
    for r in 0 1; do for v in 1 2; do
        $PY "$TOOL" check "$TMP/q$v.safetensors" "$TMP/$1/e-$1/rank$r/v$v.safetensors" 2 $r || ok=0
    done; done
    [ $ok = 1 ]
}

# direct_pack (the default): the GPU trainers gather the column slices
# straight into the engine ranks' windows (local transport, summing as they
# write), no stage; the trace says how many puts went so.
run tp2_one_gpu_gpu_trainers_staged cuda:0 staged WSYNC_TRACE=1
if [ $rc = 0 ] && dumps_ok tp2_one_gpu_gpu_trainers_staged && grep -qE 'puts handed \([1-9][0-9]* of them gathered' \
        "$TMP"/tp2_one_gpu_gpu_trainers_staged.trainer*.log; then
    pass tp2_one_gpu_gpu_trainers_staged
else
    fail tp2_one_gpu_gpu_trainers_staged "rc=$rc: $(grep -h 'puts handed' "$TMP"/tp2_one_gpu_gpu_trainers_staged.trainer*.log | head -2) $(tail -n 3 "$TMP"/tp2_one_gpu_gpu_trainers_staged.engine*.log)"
fi

run tp2_one_gpu_host_trainers_in_place host in-place
if [ $rc = 0 ] && dumps_ok tp2_one_gpu_host_trainers_in_place; then pass tp2_one_gpu_host_trainers_in_place
else fail tp2_one_gpu_host_trainers_in_place "rc=$rc: $(tail -n 3 "$TMP"/tp2_one_gpu_host_trainers_in_place.engine*.log)"; fi

# A byte flipped in a column slice after the GPU pack (test hook): caught on the GPU, named.
run tp2_one_gpu_corrupted_column_slice cuda:0 staged WSYNC_TEST_CORRUPT_PACKED=1
if [ $rc != 0 ] && grep -qE 'tensor model\.layers\.[0-9]+\.(self_attn\.o_proj|mlp\.down_proj)\.weight .*failed verification' \
        "$TMP"/tp2_one_gpu_corrupted_column_slice.engine*.log; then
    pass tp2_one_gpu_corrupted_column_slice
else
    fail tp2_one_gpu_corrupted_column_slice "rc=$rc: $(tail -n 3 "$TMP"/tp2_one_gpu_corrupted_column_slice.engine*.log)"
fi

# direct_pack off: the column slices are packed into the trainer's stage on
# the GPU and put from there (the path before direct_pack, and the one a
# receiver on another GPU gets).
run tp2_one_gpu_packed_stage_in_place cuda:0 in-place WSYNC_DIRECT_PACK=0 WSYNC_TRACE=1
if [ $rc = 0 ] && dumps_ok tp2_one_gpu_packed_stage_in_place && grep -qE 'puts handed \(0 of them gathered' \
        "$TMP"/tp2_one_gpu_packed_stage_in_place.trainer*.log; then
    pass tp2_one_gpu_packed_stage_in_place
else
    fail tp2_one_gpu_packed_stage_in_place "rc=$rc: $(grep -h 'puts handed' "$TMP"/tp2_one_gpu_packed_stage_in_place.trainer*.log | head -2) $(tail -n 3 "$TMP"/tp2_one_gpu_packed_stage_in_place.engine*.log)"
fi
