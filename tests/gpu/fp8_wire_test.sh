#!/usr/bin/env bash
# FP8 over the wire on one GPU (issue 29, docs/FP8.md "On the wire"): the
# DeepSeek-shaped MoE of tests/integration/fp8_tool.py published by 2 fsdp
# trainer ranks holding their shards in GPU memory (bands quantized by the
# CUDA kernel straight from the slot, their codes packed beside the prepared
# GPU pack) and, beside them, in host memory, to a node of 2 ranks on cuda:0
# with FP8 + TP=2 rules (boundary bands quantized on the GPU after they
# verified), staged and in place; every FP8 tensor and scale bit for bit
# against fp8_tool.py's quantizer; a NaN in a band a GPU trainer quantizes
# refused naming the tensor; a flipped FP8 byte caught; 4 GPU trainer ranks
# whose thin shards share bands (their parts' maxima and codes by the parts
# kernels, one launch for all) bit for bit, and a NaN in a shared band named.
# Skips without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"
PY=/usr/bin/python3
TOOL="$WSYNC_ROOT/tests/integration/fp8_tool.py"
CASES="fp8_gpu_trainers_fp32_staged fp8_host_trainers_ue8m0_in_place fp8_gpu_nan_named fp8_gpu_corrupted_byte
       fp8_gpu_thin_shards fp8_gpu_nan_in_shared_band_named"

ngpu=$(cuda_devices)
if [ "$ngpu" = 0 ]; then
    for c in $CASES; do skip "$c" "no CUDA device"; done
    exit 0
fi
$PY "$TOOL" gen "$TMP" || { for c in $CASES; do fail "$c" "fp8_tool.py gen failed"; done; exit 0; }

# run NAME FILE TRAINER_DEVICE MODE RULES [ENV...]: sets $rc. TRAINERS: trainer ranks (2).
run() {
    local name=$1 file=$2 tdev=$3 mode=$4 rules=$5 port url r pids=() world=${TRAINERS:-2}; shift 5
    port=$(free_port); url="http://127.0.0.1:$port"
    bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/$name.serve.log"
    wait_http "$url/healthz" 30 || { rc=99; return; }
    for r in 0 1; do
        env "$@" timeout 240 "$WSYNC" engine --control "$url" --engine "e-$name" --local-rank $r --local-world 2 \
            --tp 2 --rules "$rules" --mode "$mode" --device cuda:0 --versions 1 --max-failures 1 \
            --timeout-ms 60000 --dump "$TMP/$name" >"$TMP/$name.engine$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    for r in $(seq 0 $((world - 1))); do
        env "$@" timeout 240 "$WSYNC" trainer --control "$url" --rank $r --world $world --layout fsdp \
            --safetensors "$file" --versions 1 --wait-engines 1 --chunk 64K --device "$tdev" \
            >"$TMP/$name.trainer$r.log" 2>&1 &
        WSYNC_PIDS+=($!)
    done
    rc=0
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
}
F32=$WSYNC_ROOT/configs/rules/deepseek-fp8.json
UE=$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json

run fp8_gpu_trainers_fp32_staged "$TMP/ds.safetensors" cuda:0 staged "$F32"
if [ $rc = 0 ] && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/fp8_gpu_trainers_fp32_staged/e-fp8_gpu_trainers_fp32_staged" fp32 2>&1); then
    pass fp8_gpu_trainers_fp32_staged
else fail fp8_gpu_trainers_fp32_staged "rc=$rc: ${out:-} $(tail -n 3 "$TMP"/fp8_gpu_trainers_fp32_staged.engine*.log)"; fi

run fp8_host_trainers_ue8m0_in_place "$TMP/ds.safetensors" host in-place "$UE"
if [ $rc = 0 ] && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/fp8_host_trainers_ue8m0_in_place/e-fp8_host_trainers_ue8m0_in_place" ue8m0 2>&1); then
    pass fp8_host_trainers_ue8m0_in_place
else fail fp8_host_trainers_ue8m0_in_place "rc=$rc: ${out:-} $(tail -n 3 "$TMP"/fp8_host_trainers_ue8m0_in_place.engine*.log)"; fi

# with_nan OUT TENSOR ROW COL: ds.safetensors with a BF16 NaN at (ROW, COL) of TENSOR, written to OUT.
with_nan() { $PY "$TOOL" nan "$TMP/ds.safetensors" "$@"; }

# NaN at row 200, column 5 of down_proj (rank 1 holds rows 128..255 whole: its GPU kernel finds it)
with_nan "$TMP/nan.safetensors" model.layers.0.mlp.down_proj.weight 200 5
run fp8_gpu_nan_named "$TMP/nan.safetensors" cuda:0 staged "$F32"
if [ $rc != 0 ] && grep -q "tensor 'model.layers.0.mlp.down_proj.weight' holds NaN or an infinity at row 72, column 5" \
        "$TMP"/fp8_gpu_nan_named.engine*.log; then pass fp8_gpu_nan_named
else fail fp8_gpu_nan_named "rc=$rc: $(grep -h -i nan "$TMP"/fp8_gpu_nan_named.engine*.log | head -2)"; fi

run fp8_gpu_corrupted_byte "$TMP/ds.safetensors" cuda:0 staged "$F32" WSYNC_TEST_CORRUPT_PACKED=1
if [ $rc != 0 ] && grep -qE 'tensor model\.layers\.[01]\.(self_attn\.o_proj|mlp\.down_proj)\.weight .*failed verification' \
        "$TMP"/fp8_gpu_corrupted_byte.engine*.log; then pass fp8_gpu_corrupted_byte
else fail fp8_gpu_corrupted_byte "rc=$rc: $(tail -n 3 "$TMP"/fp8_gpu_corrupted_byte.engine*.log)"; fi

# 4 GPU trainer ranks: 128-row experts in 32-row shards, bands shared 4 ways.
TRAINERS=4 run fp8_gpu_thin_shards "$TMP/ds.safetensors" cuda:0 staged "$F32"
if [ $rc = 0 ] && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/fp8_gpu_thin_shards/e-fp8_gpu_thin_shards" fp32 2>&1); then
    pass fp8_gpu_thin_shards
else fail fp8_gpu_thin_shards "rc=$rc: ${out:-} $(tail -n 3 "$TMP"/fp8_gpu_thin_shards.engine*.log "$TMP"/fp8_gpu_thin_shards.trainer*.log)"; fi

# NaN at row 17, column 42 of an expert whose band ranks 0 and 1 share (split at row 64)
with_nan "$TMP/nan2.safetensors" model.layers.1.mlp.experts.3.up_proj.weight 17 42
run fp8_gpu_nan_in_shared_band_named "$TMP/nan2.safetensors" cuda:0 staged "$F32"
want="trainer rank 0: fp8: tensor 'model.layers.1.mlp.experts.3.up_proj.weight' holds NaN or an infinity at row 17, column 42.*rows counted from row 0 of matrix 0"
if [ $rc != 0 ] && grep -q "$want" "$TMP"/fp8_gpu_nan_in_shared_band_named.*.log; then pass fp8_gpu_nan_in_shared_band_named
else fail fp8_gpu_nan_in_shared_band_named "rc=$rc: $(grep -h -i nan "$TMP"/fp8_gpu_nan_in_shared_band_named.*.log | head -3)"; fi
