#!/usr/bin/env bash
# Issue 29's model test on the GPU host: a transformers Qwen2.5-0.5B-shaped
# model (random init, BF16; tests/gpu/qwen_fp8.py) published by 2 fsdp
# trainer ranks holding their shards on cuda:0 (q/k/v/o and down_proj split
# off the 128-row grid: those bands quantized in parts with the block maxima
# the two ranks exchange), received as FP8 + scales by a node of 2 ranks on
# cuda:0 (tests/gpu/qwen_fp8_rules.json: every attention and MLP weight in
# FP8, each rank holding them whole), staged. Every FP8 tensor and scale of
# both ranks against torch's float8_e4m3fn of each block, every BF16 tensor
# against the source; rank 0's weights dequantized into a BF16 copy of the
# model and the largest logit difference to the BF16 model on a fixed batch
# printed. Skips without a CUDA device or a python with torch's float8 and
# transformers.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
CASES="qwen_fp8_every_fp8_tensor_equals_torch qwen_fp8_logits_finite"
why=
if [ "$(cuda_devices)" = 0 ]; then why="no CUDA device"
elif [ -z "$PY" ] || ! $PY -c 'import torch, transformers, safetensors; torch.float8_e4m3fn' 2>/dev/null; then
    why="no python with torch.float8_e4m3fn, transformers and safetensors"
elif ! grep -q cuda <<<"$("$WSYNC" --version)"; then why="libwsync built without CUDA"; fi
if [ -n "$why" ]; then
    for c in $CASES; do skip "$c" "$why"; done
    exit 0
fi
T=$WSYNC_ROOT/tests/gpu
$PY "$T/qwen_fp8.py" gen "$TMP/qwen.safetensors" || { for c in $CASES; do fail "$c" "the model generator failed"; done; exit 0; }

port=$(free_port); url="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve.log"
wait_http "$url/healthz" 30 || { for c in $CASES; do fail "$c" "no control endpoint"; done; exit 0; }
pids=()
for r in 0 1; do
    timeout 300 "$WSYNC" engine --control "$url" --engine qwen --local-rank $r --local-world 2 --tp 2 \
        --rules "$T/qwen_fp8_rules.json" --mode staged --device cuda:0 --versions 1 --max-failures 1 \
        --timeout-ms 120000 --dump "$TMP/d" >"$TMP/engine$r.log" 2>&1 &
    pids+=($!); WSYNC_PIDS+=($!)
done
for r in 0 1; do
    timeout 300 "$WSYNC" trainer --control "$url" --rank $r --world 2 --layout fsdp \
        --safetensors "$TMP/qwen.safetensors" --versions 1 --wait-engines 1 --device cuda:0 \
        >"$TMP/trainer$r.log" 2>&1 &
    WSYNC_PIDS+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
grep -h "ready on" "$TMP"/engine*.log | head -2
if [ $rc != 0 ]; then
    for c in $CASES; do fail "$c" "the pull failed: $(tail -n 3 "$TMP"/engine*.log "$TMP"/trainer*.log | tr '\n' ' ')"; done
    exit 0
fi
$PY "$T/qwen_fp8.py" check "$TMP/qwen.safetensors" "$TMP/d/qwen" 2 2>&1 | grep -v "^$"
