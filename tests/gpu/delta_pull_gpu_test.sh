#!/usr/bin/env bash
# Delta pulls between GPU memories (docs/DELTA.md): 2 trainer ranks holding
# their publish slots on cuda:0 encode each piece's wire with the GPU
# encoder (common/delta/delta_mem.c), an engine node of 2 ranks holding its
# image on cuda:0 applies them with the GPU decoder, over tcp. Versions from
# real AdamW steps (tests/tools/adamw_versions.py), staged and in place:
# every tensor of every version, dumped from GPU memory, torch.equal to the
# file it was published from; every version after the first as deltas, the
# bytes on the wire below a quarter of the image; in place, a byte of the
# held version flipped in GPU memory before the first delta pull is caught
# by verification and its piece re-fetched in full. Then a TP=2 node of two
# Python ranks in place into their own tensors on cuda:0 (wsync.Receiver
# tp=2, into=): each rank's image is sparse (gpu_sparse.c, the bytes land
# straight in the tensors), every version after the first comes as deltas
# whose base is gathered out of the tensors into a device buffer and
# scattered back (delta_land.c's split_move), every tensor equal to
# tp_tool.py's slices of the file (tests/integration/tp_delta_lib.sh).
# WSYNC_LOCAL_TRANSPORT=0:
# on one host an engine would copy from a GPU trainer with the local
# transport (CUDA IPC), where deltas do not pay and are not asked; tcp
# stands in for trainers on another host. Skips without CUDA.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/versions_lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
names="delta_gpu_staged_every_tensor_equal delta_gpu_wire_bytes_below_full delta_gpu_in_place_corrupted_base_refetched
       delta_gpu_tp2_into_sparse"
skip_unless_cuda_python "$names"
make_versions 5 || { fail delta_gpu_staged_every_tensor_equal "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
export WSYNC_LOG=info

# run NAME MODE N [ENV...]: a control endpoint, 2 engine ranks and 2 trainer
# ranks, all on cuda:0, over tcp; sets e0, e1.
run() {
    local name=$1 mode=$2 n=$3 r
    shift 3
    serve_local "$name"
    for r in 0 1; do
        env WSYNC_LOCAL_TRANSPORT=0 "$@" timeout 240 "$WSYNC" engine --control "$URL" --engine "e-$name" --local-rank $r --local-world 2 \
            --mode "$mode" --transport tcp --device cuda:0 --versions "$n" --timeout-ms 120000 \
            --dump "$TMP/d-$name" >"$TMP/e-$name-$r.log" 2>&1 &
        eval E$r=$!
        WSYNC_PIDS+=($!)
    done
    wait_registered "$URL" "e-$name"
    for r in 0 1; do
        bg env WSYNC_LOCAL_TRANSPORT=0 timeout 240 "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" --versions "$n" \
            --chunk 256K --device cuda:0 --interval-ms 500 --wait-engines 1 >"$TMP/t-$name-$r.log" 2>&1
    done
    wait $E0
    e0=$?
    wait $E1
    e1=$?
}

run staged staged 6
if [ $e0 = 0 ] && [ $e1 = 0 ] && dumps_equal "$TMP/d-staged/e-staged" 2 $(seq 1 6); then
    pass delta_gpu_staged_every_tensor_equal
else
    fail delta_gpu_staged_every_tensor_equal "engine rc=$e0,$e1: $(tail -2 "$TMP/e-staged-0.log")"
fi
if "$PY" "$WSYNC_ROOT/tests/tools/wire_check.py" 6 pieces "$TMP"/e-staged-*.log; then
    pass delta_gpu_wire_bytes_below_full
else
    fail delta_gpu_wire_bytes_below_full "$(grep -h 'pieces as deltas\|goes full' "$TMP"/e-staged-*.log "$TMP"/t-staged-*.log | head -3)"
fi

run inplace in-place 4 WSYNC_TEST_CORRUPT_HELD=3
if [ $e0 = 0 ] && [ $e1 = 0 ] && dumps_equal "$TMP/d-inplace/e-inplace" 2 $(seq 1 4) &&
    grep -qh 'piece 3 (trainer rank [01]) applied as a delta from version 1 failed verification against version 2.s digests' \
        "$TMP"/e-inplace-*.log && grep -qh 'version 2: .*; 1 re-fetched in full after a failed check' "$TMP"/e-inplace-*.log &&
    grep -qh 'version 4: [1-9][0-9]* pieces as deltas from version 3' "$TMP"/e-inplace-*.log; then
    pass delta_gpu_in_place_corrupted_base_refetched
else
    fail delta_gpu_in_place_corrupted_base_refetched "engine rc=$e0,$e1: $(grep -h 'hook\|re-fetch\|version 2' "$TMP"/e-inplace-*.log | head -4)"
fi

# A TP=2 node in place into its own GPU tensors: a sparse GPU image on each rank, deltas, every tensor equal.
source "$WSYNC_ROOT/tests/integration/tp_delta_lib.sh"
tp_delta_node delta_gpu_tp2_into_sparse 4 cuda:0
grep -h "the image backs" "$TMP"/delta_gpu_tp2_into_sparse-e*.log
if grep -q 'the image backs' "$TMP"/delta_gpu_tp2_into_sparse-e0.log &&
    grep -q 'the image backs' "$TMP"/delta_gpu_tp2_into_sparse-e1.log; then
    pass delta_gpu_tp2_into_sparse_images_are_sparse
else
    fail delta_gpu_tp2_into_sparse_images_are_sparse "a rank kept a whole image: $(tail -n 3 "$TMP"/delta_gpu_tp2_into_sparse-e0.log)"
fi
