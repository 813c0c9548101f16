#!/usr/bin/env bash
# FP8 over the wire (issue 29, docs/FP8.md "On the wire"): a DeepSeek-shaped
# MoE file in BF16 (MLA and q/k/v attention, a dense MLP, 8 experts, a
# router), published by 2 trainer ranks with --layout fsdp (shard boundaries
# off the 128-row grid: 200-, 192- and 128-row tensors split at 100, 96, 64,
# so each rank quantizes its part of those bands with the block maxima the
# two ranks exchange; the others are quantized by the trainer rank holding
# them), pulled by a node of 2
# ranks with FP8 + TP=2 rules. Every FP8 tensor and scale of both ranks is
# compared bit for bit with a quantizer written here from the definition in
# plain Python floats (no torch, not through wsync); fp32 and UE8M0; a NaN
# refused naming the tensor (in a band one trainer rank holds, and in one
# two ranks share); a TP size that cuts a block refused naming it; a corrupted
# FP8 byte caught naming the tensor; an FP8 node, a BF16 TP node and a
# whole-image node pulling the same version side by side; a relayed FP8 node
# bit exact; 4 trainer ranks whose thin shards share bands 4 ways; delta
# versions on an FP8 node, and through an FP8 node's relay.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
RULES=$WSYNC_ROOT/configs/rules/deepseek-fp8.json

TOOL="$WSYNC_ROOT/tests/integration/fp8_tool.py"
$PY "$TOOL" gen "$TMP" || { fail fp8_wire_model "the model generator failed"; exit 0; }

demo() { # DUMP RULES [extra demo args...]
    local d=$1 r=$2; shift 2
    "$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$r" --layout fsdp \
        --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --dump "$d" --timeout-s 60 "$@" 2>&1
}

# --- 1. fp32 and UE8M0 scales, every FP8 tensor and scale bit for bit.
for form in fp32 ue8m0; do
    r=$RULES; [ $form = ue8m0 ] && r=$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json
    out=$(demo "$TMP/d_$form" "$r") && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d_$form/e0" $form 2>&1) \
        && pass fp8_wire_fsdp2_to_tp2_$form || fail fp8_wire_fsdp2_to_tp2_$form "$(tail -5 <<<"$out")"
done

# --- 1b. 3 trainer ranks of contiguous shares (--layout even: boundaries
# inside rows) to a node of 4 ranks as two TP=2 groups (each FP8 byte
# landed once and copied to the other group), UE8M0: every rank.
out=$("$WSYNC" demo --trainers 3 --engines 1 --local-ranks 4 --tp 2 --layout even \
      --rules "$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json" --safetensors "$TMP/ds.safetensors" --versions 1 \
      --chunk 64K --dump "$TMP/d_even" --timeout-s 60 2>&1) \
    && mkdir -p "$TMP/d_even2/e0" && cp -r "$TMP/d_even/e0/rank2" "$TMP/d_even2/e0/rank0" \
    && cp -r "$TMP/d_even/e0/rank3" "$TMP/d_even2/e0/rank1" \
    && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d_even/e0" ue8m0 2>&1) \
    && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d_even2/e0" ue8m0 2>&1) \
    && pass fp8_wire_even3_to_two_tp2_groups || fail fp8_wire_even3_to_two_tp2_groups "$(tail -5 <<<"$out")"

# --- 1c. Thin shards: 4 trainer ranks (fsdp: 128-row experts in 32-row
# shards, 200-row tensors in 50), so bands are shared by up to 4 ranks that
# exchange their block maxima; fp32, every rank bit for bit.
out=$("$WSYNC" demo --trainers 4 --engines 1 --local-ranks 2 --tp 2 --rules "$RULES" --layout fsdp \
      --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --dump "$TMP/d_thin" --timeout-s 60 2>&1) \
    && out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d_thin/e0" fp32 2>&1) \
    && pass fp8_wire_fsdp4_thin_shards || fail fp8_wire_fsdp4_thin_shards "$(tail -5 <<<"$out")"

# --- 2. A NaN is refused naming the tensor: in a band one trainer rank holds
# (down_proj rows 128..255: rank 1) and in one two ranks share (an expert's
# rows 0..127, split at 64: rank 0 finds it taking its part's maxima).
nan_case() { # NAME TENSOR ROW COL PATTERN
    $PY "$TOOL" nan "$TMP/ds.safetensors" "$TMP/nan.safetensors" "$2" "$3" "$4"
    out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$RULES" --layout fsdp \
        --safetensors "$TMP/nan.safetensors" --versions 1 --chunk 64K --timeout-s 20 --max-failures 1 2>&1); rc=$?
    if [ $rc != 0 ] && grep -q "$5" <<<"$out"; then pass $1; else fail $1 "rc=$rc: $(grep -i nan <<<"$out" | head -3)"; fi
}
nan_case fp8_wire_nan_in_trainer_band_named model.layers.0.mlp.down_proj.weight 200 5 \
    "tensor 'model.layers.0.mlp.down_proj.weight' holds NaN at row 72, column 5.*rows counted from row 128"
nan_case fp8_wire_nan_in_boundary_band_named model.layers.1.mlp.experts.3.up_proj.weight 17 42 \
    "trainer rank 0: fp8: tensor 'model.layers.1.mlp.experts.3.up_proj.weight' holds NaN at row 17, column 42.*rows counted from row 0 of matrix 0"

# --- 2b. A trainer rank that does not give its block maxima (a test hook
# makes rank 1 refuse): the pull fails, rank 0 naming rank 1.
out=$(WSYNC_TEST_AMAX_REFUSE=1 "$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$RULES" \
    --layout fsdp --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --timeout-s 20 --max-failures 1 2>&1); rc=$?
if [ $rc != 0 ] && grep -q "trainer rank 0: the FP8 block maxima of the bands it shares with trainer rank 1 (at .*version 1.*refused" <<<"$out"
then pass fp8_wire_peer_maxima_refused_named; else fail fp8_wire_peer_maxima_refused_named "rc=$rc: $(tail -3 <<<"$out")"; fi

# --- 3. TP 4 cuts q_b_proj's blocks (256 rows: 64 per rank): the pull is refused naming it.
out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 4 --tp 4 --rules "$RULES" --layout fsdp \
    --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --timeout-s 20 --max-failures 1 2>&1); rc=$?
# (--max-failures 1: the first rank to fail ends the demo, and each rank's
# 64 rows cut a block; whichever it is names its rows.)
if [ $rc != 0 ] && grep -qE "FP8 destination 'model\.layers\.0\.self_attn\.q_b_proj\.weight' \(dim 0, blocks of 128 rows\) takes rows \[(0, 64|64, 128|128, 192|192, 256)\) of 'model\.layers\.0\.self_attn\.q_b_proj\.weight' \(dim 0\) to \[0, 64\), cutting a 128-row block" <<<"$out"; then
    pass fp8_wire_tp_that_cuts_a_block_refused; else fail fp8_wire_tp_that_cuts_a_block_refused "rc=$rc: $(tail -3 <<<"$out")"; fi

# --- 4. A byte of a packed FP8 column slice (o_proj / down_proj codes)
# flipped after the trainer took its digests: caught before ready, named.
out=$(WSYNC_TEST_CORRUPT_PACKED=1 demo "$TMP/d_bad" "$RULES" --max-failures 1); rc=$?
if [ $rc != 0 ] && grep -qE 'tensor model\.layers\.[01]\.(self_attn\.o_proj|mlp\.down_proj)\.weight .*failed verification on engine e0 rank [01]' <<<"$out"; then
    pass fp8_wire_corrupted_fp8_byte_named; else fail fp8_wire_corrupted_fp8_byte_named "rc=$rc: $(grep -i verif <<<"$out" | head -3)"; fi

# --- 5. An FP8 TP=2 node, a BF16 TP=2 node and a whole-image node pull the same version.
if serve_local 5; then
    for r in 0 1; do
        bg "$WSYNC" engine --control "$URL" --engine f8-$$ --local-rank $r --local-world 2 --tp 2 --rules "$RULES" \
            --versions 1 --dump "$TMP/d5" >"$TMP/f8$r.log" 2>&1
        bg "$WSYNC" engine --control "$URL" --engine bf-$$ --local-rank $r --local-world 2 --tp 2 --mode in-place \
            --versions 1 --dump "$TMP/d5" >"$TMP/bf$r.log" 2>&1
        bg "$WSYNC" engine --control "$URL" --engine whole-$$ --local-rank $r --local-world 2 --versions 1 \
            --dump "$TMP/d5" >"$TMP/whole$r.log" 2>&1
    done
    sleep 0.5
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$TMP/ds.safetensors" \
            --versions 1 --wait-engines 3 --chunk 64K >"$TMP/t$r.log" 2>&1
    done
    for i in $(seq 600); do
        n=0
        for e in f8 bf whole; do for r in 0 1; do [ -f "$TMP/d5/$e-$$/rank$r/v1.safetensors" ] && n=$((n + 1)); done; done
        [ $n = 6 ] && break
        sleep 0.1
    done
    sleep 0.3
    out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d5/f8-$$" fp32 2>&1) && pass fp8_wire_side_by_side_fp8 \
        || fail fp8_wire_side_by_side_fp8 "$out"
    ok=1
    for r in 0 1; do
        "$WSYNC" target "$TMP/ds.safetensors" --tp 2 --rank $r --write "$TMP/bf$r.st" >/dev/null 2>&1 || ok=0
        $PY - "$TMP/bf$r.st" "$TMP/d5/bf-$$/rank$r/v1.safetensors" "$TMP/ds.safetensors" \
            "$TMP/d5/whole-$$/rank$r/v1.safetensors" <<'PYCMP' || ok=0
import json, struct, sys
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n]); base = 8 + n
    return {k: (v["dtype"], v["shape"], raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in hdr.items() if k != "__metadata__"}
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) and load(sys.argv[3]) == load(sys.argv[4]) else 1)
PYCMP
    done
    check fp8_wire_side_by_side_bf16_tp_and_whole_image [ $ok = 1 ]
else
    fail fp8_wire_side_by_side "control endpoint did not come up"
fi

# --- 6. Relays forward FP8 codes and scales as they are: two
# FP8 TP=2 nodes, relay:1 (the second pulls from the first).
if serve_local 6; then
    R6=()
    for id in a b; do for r in 0 1; do
        WSYNC_TRACE=1 "$WSYNC" engine --control "$URL" --engine $id-$$ --local-rank $r --local-world 2 --tp 2 \
            --rules "$RULES" --plan relay:1 --versions 1 --timeout-ms 30000 --dump "$TMP/d6" >"$TMP/r6-$id$r.log" 2>&1 &
        WSYNC_PIDS+=($!); R6+=($!)
    done; done
    sleep 0.5
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$TMP/ds.safetensors" \
            --versions 1 --wait-engines 2 --chunk 64K >"$TMP/t6$r.log" 2>&1
    done
    ok=0
    for p in "${R6[@]}"; do wait "$p" || ok=1; done
    for r in 0 1; do grep -q "version 1 from the relay of engine a-$$" "$TMP/r6-b$r.log" || ok=1; done
    check fp8_wire_relay_child_pulls_from_its_parent [ $ok = 0 ]
    out=$($PY "$TOOL" check "$TMP/ds.safetensors" "$TMP/d6/b-$$" fp32 2>&1) && pass fp8_wire_relayed_node_bit_exact \
        || fail fp8_wire_relayed_node_bit_exact "$out"
else
    fail fp8_wire_relay "control endpoint did not come up"
fi

# --- 7. Delta versions on an FP8 TP=2 node (docs/DELTA.md): versions 2 and
# 3 of the file made by AdamW steps in torch (fp32 masters of its BF16
# values, lr 1e-5, random gradients), published by 2 fsdp trainer ranks to
# an FP8 TP=2 node beside a BF16 TP=2 node, both staged: the trainers diff
# each put's FP8 codes (1-byte elements) and scales (4-byte) against the
# base's, every FP8 tensor and scale of every version bit for bit against
# the reference quantizer, each later version as deltas on both nodes with
# the FP8 node's bytes on the wire below half of its FP8 puts.
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip fp8_wire_delta_versions_bit_exact "no python3 with torch and numpy at $PY"
    exit 0
fi
$PY - "$TMP/ds.safetensors" "$TMP" <<'PYADAM' || fail fp8_wire_delta_versions_bit_exact "the AdamW versions failed"
import json, struct, sys
import numpy, torch
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; hdr = json.loads(raw[8:8 + n])
at = lambda k: (8 + n + hdr[k]["data_offsets"][0], 8 + n + hdr[k]["data_offsets"][1])
ps = {k: torch.nn.Parameter(torch.frombuffer(bytearray(raw[at(k)[0]:at(k)[1]]), dtype=torch.bfloat16).float())
      for k in hdr if k != "__metadata__"}
opt = torch.optim.AdamW(ps.values(), lr=1e-5, weight_decay=0.0)
g = torch.Generator().manual_seed(28)
for v in (2, 3):
    for p in ps.values():
        p.grad = torch.randn(p.shape, generator=g)
    opt.step()
    out = bytearray(raw)
    for k, p in ps.items():
        out[at(k)[0]:at(k)[1]] = p.detach().to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    open("%s/ds%d.safetensors" % (sys.argv[2], v), "wb").write(out)
PYADAM
WIRE_CHECK=$WSYNC_ROOT/tests/tools/wire_check.py
# delta_trainers TAG [ARGS...]: 2 fsdp trainer ranks publishing those 3 versions to 2 nodes.
delta_trainers() {
    local r
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp "${@:2}" \
            --safetensors "$TMP/ds.safetensors,$TMP/ds2.safetensors,$TMP/ds3.safetensors" --versions 3 \
            --wait-engines 2 --chunk 64K >"$TMP/t$1$r.log" 2>&1
    done
}
# versions_bit_exact NODE: every FP8 tensor and scale of versions 1-3 on both ranks of NODE (--dump DIR:
# DIR/ID) bit for bit against the reference quantizer (fp8_tool.py checks a node's rank*/v1).
versions_bit_exact() {
    local node=$1 v r src out ok=0
    for v in 1 2 3; do
        src=$TMP/ds.safetensors; [ $v != 1 ] && src=$TMP/ds$v.safetensors
        for r in 0 1; do
            mkdir -p "$node.v$v/rank$r" && ln -sf "$node/rank$r/v$v.safetensors" "$node.v$v/rank$r/v1.safetensors"
        done
        out=$($PY "$TOOL" check "$src" "$node.v$v" fp32 2>&1) || { ok=1; echo "version $v: $out" >&2; }
    done
    return $ok
}
if serve_local 7; then
    P7=()
    for r in 0 1; do
        WSYNC_LOG=info "$WSYNC" engine --control "$URL" --engine f8d --local-rank $r --local-world 2 --tp 2 --rules "$RULES" \
            --mode staged --transport tcp --versions 3 --timeout-ms 60000 --dump "$TMP/d7" >"$TMP/f8d$r.log" 2>&1 &
        WSYNC_PIDS+=($!); P7+=($!)
        WSYNC_LOG=info "$WSYNC" engine --control "$URL" --engine bfd --local-rank $r --local-world 2 --tp 2 --mode staged \
            --transport tcp --versions 3 --timeout-ms 60000 --dump "$TMP/d7" >"$TMP/bfd$r.log" 2>&1 &
        WSYNC_PIDS+=($!); P7+=($!)
    done
    sleep 0.5
    delta_trainers 7 --interval-ms 600
    ok=0
    for p in "${P7[@]}"; do wait "$p" || ok=1; done
    if [ $ok = 0 ] && versions_bit_exact "$TMP/d7/f8d"; then pass fp8_wire_delta_versions_bit_exact
    else fail fp8_wire_delta_versions_bit_exact "a node failed, or a version differs (above)"; fi
    if $PY "$WIRE_CHECK" 3 puts --each --below 0.5 "$TMP"/f8d*.log && $PY "$WIRE_CHECK" 3 puts --each --below 1 "$TMP"/bfd*.log; then
        pass fp8_wire_delta_versions_below_fp8_full
    else
        fail fp8_wire_delta_versions_below_fp8_full "$(grep -h 'as deltas\|came full' "$TMP"/f8d*.log | head -3)"
    fi
else
    fail fp8_wire_delta_versions_bit_exact "control endpoint did not come up"
fi

# --- 8. Relays serve FP8 deltas (docs/DELTA.md item 9): the same AdamW
# versions to a chain of two FP8 TP=2 nodes, relay:1, staged: the child
# pulls every version through its parent's relay, 2 and 3 as deltas of its
# FP8 codes and scales (the relay reads both versions' puts out of its
# ranks' images), every FP8 tensor and scale of every version bit for bit
# against the reference quantizer, the child's bytes on the wire below half
# of its FP8 puts.
if serve_local 8; then
    P8=()
    for id in fa fb; do for r in 0 1; do
        WSYNC_LOG=info WSYNC_TRACE=1 "$WSYNC" engine --control "$URL" --engine $id --local-rank $r --local-world 2 \
            --tp 2 --rules "$RULES" --plan relay:1 --mode staged --transport tcp --versions 3 --timeout-ms 60000 \
            --dump "$TMP/d8" >"$TMP/r8-$id$r.log" 2>&1 &
        WSYNC_PIDS+=($!); P8+=($!)
    done; done
    wait_registered "$URL" fa && wait_registered "$URL" fb
    delta_trainers 8
    ok=0
    for p in "${P8[@]}"; do wait "$p" || ok=1; done
    for v in 1 2 3; do for r in 0 1; do
        grep -q "version $v from the relay of engine fa " "$TMP/r8-fb$r.log" || { ok=1; echo "fb rank $r: version $v not relayed" >&2; }
    done; done
    if [ $ok = 0 ] && versions_bit_exact "$TMP/d8/fb"; then pass fp8_wire_relayed_delta_versions_bit_exact
    else fail fp8_wire_relayed_delta_versions_bit_exact "a node failed, or a version differs (above)"; fi
    if $PY "$WIRE_CHECK" 3 puts --each --below 0.5 "$TMP"/r8-fb*.log &&
        [ "$(grep -c "engine fa's relay: version [23] to engine fb rank [01]: [1-9][0-9]* puts as deltas" "$TMP/r8-fa0.log")" = 4 ]; then
        pass fp8_wire_relay_serves_fp8_deltas
    else
        fail fp8_wire_relay_serves_fp8_deltas "$(grep -h 'as deltas\|came full\|relay:' "$TMP"/r8-f*.log | head -4)"
    fi
else
    fail fp8_wire_relayed_delta_versions_bit_exact "control endpoint did not come up"
fi
