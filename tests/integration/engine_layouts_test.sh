#!/usr/bin/env bash
# Engine layouts end to end (real processes): TP ranks receive exactly their
# slices. Every dumped rank is compared with the slices tp_tool.py computes
# from the source file by the rules of issue 12, in Python, without wsync's
# code (qkv/gate_up fused rows, o_proj/down_proj columns, padded vocabulary,
# stacked experts, replicated norms, biases and router).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"

$PY "$TOOL" qwen "$TMP/q1.safetensors" 1 && $PY "$TOOL" qwen "$TMP/q2.safetensors" 2 && \
    $PY "$TOOL" moe "$TMP/m1.safetensors" 3 && $PY "$TOOL" moe "$TMP/m2.safetensors" 4 || {
    fail make_models "tp_tool.py could not write the models"; exit 0; }
QWEN="$TMP/q1.safetensors,$TMP/q2.safetensors"
MOE="$TMP/m1.safetensors,$TMP/m2.safetensors"

# check_dumps NAME DUMPDIR ENGINE RANKS T FILE1 FILE2: every rank, both versions.
check_dumps() {
    local name=$1 dir=$2 engine=$3 ranks=$4 T=$5 f1=$6 f2=$7 ok=1 r v src
    for ((r = 0; r < ranks; r++)); do for v in 1 2; do
        src=$f1; [ $v = 2 ] && src=$f2
        if [ "$T" = whole ]; then
            $PY "$WSYNC_ROOT/tests/integration/st_tool.py" compare "$src" "$dir/$engine/rank$r/v$v.safetensors" \
                || { ok=0; echo "mismatch $engine rank$r v$v" >&2; }
        else
            $PY "$TOOL" check "$src" "$dir/$engine/rank$r/v$v.safetensors" "$T" $((r % T)) \
                || { ok=0; echo "mismatch $engine rank$r v$v" >&2; }
        fi
    done; done
    check "$name" [ $ok = 1 ]
}

# --- 1. Qwen2-shaped, 3 trainer ranks fsdp -> a node of 4 ranks as two TP=2 groups, staged.
out=$("$WSYNC" demo --trainers 3 --engines 1 --local-ranks 4 --tp 2 --layout fsdp --safetensors "$QWEN" \
      --versions 2 --chunk 64K --dump "$TMP/d1" --timeout-s 120 2>&1)
rc=$?
if [ $rc = 0 ]; then check_dumps qwen_fsdp3_to_two_tp2_groups_staged "$TMP/d1" e0 4 2 "$TMP/q1.safetensors" "$TMP/q2.safetensors"
else fail qwen_fsdp3_to_two_tp2_groups_staged "rc=$rc: $(tail -5 <<<"$out")"; fi

# --- 2. MoE (8 experts, router), 2 trainer ranks -> a node of 4 ranks, T=4, in place.
out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 4 --tp 4 --mode in-place --safetensors "$MOE" \
      --versions 2 --chunk 64K --dump "$TMP/d2" --timeout-s 120 2>&1)
rc=$?
if [ $rc = 0 ]; then check_dumps moe_tp4_in_place "$TMP/d2" e0 4 4 "$TMP/m1.safetensors" "$TMP/m2.safetensors"
else fail moe_tp4_in_place "rc=$rc: $(tail -5 <<<"$out")"; fi

# --- 3. A TP=2 node (in place) and a whole-image node (staged) pull the same versions.
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve.log"
if wait_http "$URL/healthz"; then
    for r in 0 1; do
        bg "$WSYNC" engine --control "$URL" --engine tp-$$ --local-rank $r --local-world 2 --tp 2 --mode in-place \
            --versions 2 --dump "$TMP/d3" >"$TMP/tp$r.log" 2>&1
        bg "$WSYNC" engine --control "$URL" --engine whole-$$ --local-rank $r --local-world 2 --versions 2 \
            --dump "$TMP/d3" >"$TMP/whole$r.log" 2>&1
    done
    sleep 0.5
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$QWEN" --versions 2 \
            --wait-engines 2 --chunk 64K >"$TMP/t$r.log" 2>&1
    done
    ok=1
    for i in $(seq 600); do
        [ -f "$TMP/d3/tp-$$/rank0/v2.safetensors" ] && [ -f "$TMP/d3/tp-$$/rank1/v2.safetensors" ] && \
            [ -f "$TMP/d3/whole-$$/rank0/v2.safetensors" ] && [ -f "$TMP/d3/whole-$$/rank1/v2.safetensors" ] && break
        sleep 0.1
    done
    sleep 0.3
    check_dumps tp2_node_beside_whole_image_node_tp "$TMP/d3" tp-$$ 2 2 "$TMP/q1.safetensors" "$TMP/q2.safetensors"
    check_dumps tp2_node_beside_whole_image_node_whole "$TMP/d3" whole-$$ 2 whole "$TMP/q1.safetensors" \
        "$TMP/q2.safetensors"
else
    fail tp2_node_beside_whole_image_node "control endpoint did not come up"
fi

# --- 4. A corrupted byte in a packed column slice (after the trainer took its
# digests) is caught before ready, naming the tensor and the rank.
out=$(WSYNC_TEST_CORRUPT_PACKED=1 "$WSYNC" demo --trainers 1 --engines 1 --local-ranks 2 --tp 2 \
      --safetensors "$TMP/q1.safetensors" --versions 1 --chunk 64K --timeout-s 60 2>&1)
rc=$?
if [ $rc != 0 ] && grep -q 'failed verification' <<<"$out"; then
    pass corrupted_column_slice_not_ready
    check corrupted_column_slice_names_tensor_and_rank \
        grep -qE 'tensor model\.layers\.[0-9]+\.(self_attn\.o_proj|mlp\.down_proj)\.weight .*failed verification on engine e0 rank [01]' \
        <<<"$out"
else
    fail corrupted_column_slice_not_ready "rc=$rc: $(tail -5 <<<"$out")"
fi

# --- 4b. A trainer rank's slow digest of the node plan's puts (one per node
# plan and version) does not hold back its puts to the node's other rank:
# rank 1 asks 0.4 s after rank 0 (a slow first set-up), while the digest of
# rank 0's request still runs (1.5 s, test hooks); it is served at once, waits
# for that one digest instead of computing its own, and both verify. On one
# H200 the second rank's puts waited 5-10 ms behind these digests (the cache
# lock was held through them, 2026-12-04).
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve4b.log"
if wait_http "$URL/healthz"; then
    pids=()
    for r in 0 1; do
        delay=0; [ $r = 1 ] && delay=400
        WSYNC_TEST_SETUP_DELAY_MS=$delay "$WSYNC" engine --control "$URL" --engine slowdig-$$ --local-rank $r \
            --local-world 2 --tp 2 --versions 1 --max-failures 1 --timeout-ms 60000 >"$TMP/e4b$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    sleep 0.3
    WSYNC_TRACE=1 WSYNC_TEST_TDIG_DELAY_MS=1500 bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 \
        --safetensors "$TMP/q1.safetensors" --versions 1 --wait-engines 1 --chunk 64K >"$TMP/t4b.log" 2>&1
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    first_dig=$(grep -n 'trainer rank 0: engine slowdig-[0-9]* rank [01]: segment digests' "$TMP/t4b.log" | head -1 |
        cut -d: -f1)
    served1=$(grep -n 'trainer rank 0: serving engine slowdig-[0-9]* rank 1:' "$TMP/t4b.log" | head -1 | cut -d: -f1)
    early=0
    [ -n "$first_dig" ] && [ -n "$served1" ] && [ "$served1" -lt "$first_dig" ] && early=1
    check slow_put_digests_both_ranks_verified [ $rc = 0 ]
    check slow_put_digests_hold_back_no_other_rank [ $early = 1 ]
    [ $early = 1 ] || grep -E 'serving engine|digests' "$TMP/t4b.log" >&2
    check slow_put_digests_computed_once [ "$(grep -c 'put digests of target' "$TMP/t4b.log")" = 1 ]
else
    fail slow_put_digests_hold_back_no_other_rank "control endpoint did not come up"
fi

# --- 5. A TP size that does not divide is refused, naming the tensor.
out=$("$WSYNC" demo --trainers 1 --engines 1 --local-ranks 3 --tp 3 --safetensors "$TMP/q1.safetensors" \
      --versions 1 --chunk 64K --timeout-s 60 2>&1)
rc=$?
check tp_not_dividing_refused_naming_tensor [ $rc != 0 ]
check tp_not_dividing_message grep -qE "model\.[a-z_.0-9]+.*(divid|not a multiple)" <<<"$out"

# --- 6. Bad command lines exit 2.
"$WSYNC" demo --local-ranks 4 --tp 3 >/dev/null 2>&1; rc=$?
check demo_tp_not_dividing_local_ranks_exit_2 [ $rc = 2 ]
"$WSYNC" engine --control http://127.0.0.1:1 --engine x --local-rank 0 --local-world 1 --target /nonexistent.json \
    >/dev/null 2>&1; rc=$?
check engine_missing_target_file_exit_2 [ $rc = 2 ]

# --- 7. Explicit targets (--target): one rank holds hand-written block copies
# (a row range, a column slice and a stacked pair of them, vocabulary rows
# past the end left zero), the other the whole image, given as a target: both
# through the node plan, beside each other.
cat >"$TMP/custom.json" <<'JSON'
{"version": 1, "tensors": [
  {"name": "head_rows", "dtype": "BF16", "shape": [640, 128],
   "blocks": [{"src": "lm_head.weight", "src_start": [400, 0], "src_stop": [1001, 128], "dst_start": [0, 0]}]},
  {"name": "k_stack", "dtype": "BF16", "shape": [2, 32, 64],
   "blocks": [{"src": "model.layers.0.self_attn.k_proj.weight", "src_start": [0, 64], "src_stop": [32, 128],
               "dst_start": [0, 0, 0]},
              {"src": "model.layers.1.self_attn.k_proj.weight", "src_start": [0, 0], "src_stop": [32, 64],
               "dst_start": [1, 0, 0]}]},
  {"name": "norm", "dtype": "BF16", "shape": [128],
   "blocks": [{"src": "model.norm.weight", "src_start": [0], "src_stop": [128], "dst_start": [0]}]}]}
JSON
echo '{"version": 1, "whole_image": true}' >"$TMP/whole.json"
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve7.log"
if wait_http "$URL/healthz"; then
    bg "$WSYNC" engine --control "$URL" --engine custom-$$ --local-rank 0 --local-world 2 --target "$TMP/custom.json" \
        --versions 2 --dump "$TMP/d7" >"$TMP/c0.log" 2>&1
    bg "$WSYNC" engine --control "$URL" --engine custom-$$ --local-rank 1 --local-world 2 --target "$TMP/whole.json" \
        --versions 2 --dump "$TMP/d7" >"$TMP/c1.log" 2>&1
    sleep 0.3
    for r in 0 1; do
        WSYNC_TRACE=1 bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$QWEN" \
            --versions 2 --wait-engines 1 --chunk 64K >"$TMP/t7$r.log" 2>&1
    done
    for i in $(seq 600); do
        [ -f "$TMP/d7/custom-$$/rank0/v2.safetensors" ] && [ -f "$TMP/d7/custom-$$/rank1/v2.safetensors" ] && break
        sleep 0.1
    done
    sleep 0.3
    ok=1
    for v in 1 2; do
        $PY "$TOOL" target "$TMP/q$v.safetensors" "$TMP/d7/custom-$$/rank0/v$v.safetensors" "$TMP/custom.json" || ok=0
        $PY "$WSYNC_ROOT/tests/integration/st_tool.py" compare "$TMP/q$v.safetensors" \
            "$TMP/d7/custom-$$/rank1/v$v.safetensors" || ok=0
    done
    check explicit_targets_block_copies_and_whole_image [ $ok = 1 ]
    # Not every target the identity: the trainers digest the segments, even
    # of the rank whose target is the whole image (identity_targets_test has
    # the node that asks for none).
    computed=$(cat "$TMP/t70.log" "$TMP/t71.log" | grep -cE "(segment|put) digests of target")
    skipped=$(cat "$TMP/t70.log" "$TMP/t71.log" | grep -c "no segment digests")
    # Segments are planned only where their digests are asked (a node that
    # verifies by put asks for its puts' digests instead).
    planned=$(cat "$TMP/t70.log" "$TMP/t71.log" | grep -c "segments of target .* planned")
    bysegment=$(cat "$TMP/t70.log" "$TMP/t71.log" | grep -c "segment digests of target")
    check explicit_targets_segment_digests_computed [ "$computed" -ge 4 -a "$skipped" = 0 \
        -a \( "$bysegment" = 0 -o "$planned" -ge 1 \) -a \( "$bysegment" -gt 0 -o "$planned" = 0 \) ]
else
    fail explicit_targets_block_copies_and_whole_image "control endpoint did not come up"
fi
