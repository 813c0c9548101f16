#!/usr/bin/env bash
# Python engines of one TP=2 node whose two ranks share GPU 0 and receive in
# place into their own GPU tensors (into= on cuda:0, filled with 7s first),
# from 2 trainer ranks in host memory over tcp. By default the bytes land
# straight in the tensors and each rank's image is sparse (gpu_sparse.c:
# memory only under the bytes that pass through it; the norms the other
# rank copies come out of a fan-out window); the log says how many bytes
# it backs. Then the same with WSYNC_SPARSE_IMAGE=0 (a whole image). Every
# tensor of every version is compared with torch.equal against slices cut
# with torch ops (qwen_tiny.tp_slices), so vocabulary padding must come out
# zero and every destination edge must hold the trainer's bytes. Skips
# without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
if [ -z "$PY" ]; then skip python_tp_gpu "no CUDA device visible to a python with torch"; exit 0; fi
if ! grep -q cuda <<<"$("$WSYNC" --version)"; then skip python_tp_gpu "libwsync built without CUDA"; exit 0; fi
T="$WSYNC_ROOT/tests/python"
export WSYNC_ROOT WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so WSYNC_HOST_ID=pytp-$$ MODEL_CFG=tp

# case_run NAME [ENV...]: a control endpoint, 2 trainer ranks, 2 engine ranks (tpinto on cuda:0), 2 versions
case_run() {
    local name=$1 port url r pids=() tpids=() ok=1; shift
    port=$(free_port); url="http://127.0.0.1:$port"
    bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/$name.serve.log"
    wait_http "$url/healthz" 30 || { fail "${name}_serve" "no control endpoint"; return; }
    for r in 0 1; do
        bg sh -c "sleep 600 | $PY $T/sync_trainer.py $url $r 2 full 2 e-$name-$$" >"$TMP/$name-t$r.log" 2>&1
        tpids+=($!)
    done
    for r in 0 1; do
        env "$@" WSYNC_LOG=info WSYNC_TEST_DEVICE=cuda:0 timeout 240 $PY "$T/sync_engine.py" "$url" \
            "e-$name-$$" $r 2 tpinto 2 >"$TMP/$name-e$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || { echo "engine pid $r exited $?"; ok=0; }; done
    cat "$TMP/$name"-e*.log | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\(PASS\|FAIL\|SKIP\) /\1 ${name}_/"
    if [ $ok = 1 ]; then pass "${name}_engines_exit_0"; else
        for r in 0 1; do echo "--- $name engine rank $r (exit status in the FAIL line):"; \
            grep -v '^PASS' "$TMP/$name-e$r.log" | tail -n 12; done
        fail "${name}_engines_exit_0" "$(grep -h -v '^PASS' "$TMP/$name"-e*.log | tail -n 8 | tr '\n' ' ')"; fi
    for r in "${tpids[@]}"; do pkill -P "$r" 2>/dev/null; kill "$r" 2>/dev/null; done
}

case_run tp2_gpu_into_sparse
grep -h "the image backs" "$TMP"/tp2_gpu_into_sparse-e*.log
if [ "$(cat "$TMP"/tp2_gpu_into_sparse-e*.log | grep -c 'the image backs')" = 2 ]; then
    pass tp2_gpu_into_sparse_image_is_sparse
else
    fail tp2_gpu_into_sparse_image_is_sparse "a rank kept a whole image: $(tail -n 3 "$TMP"/tp2_gpu_into_sparse-e0.log)"
fi
case_run tp2_gpu_into_whole WSYNC_SPARSE_IMAGE=0
if grep -q "the image backs" "$TMP"/tp2_gpu_into_whole-e*.log; then
    fail tp2_gpu_into_whole_image_is_whole "WSYNC_SPARSE_IMAGE=0 still made a sparse image"
else pass tp2_gpu_into_whole_image_is_whole; fi
