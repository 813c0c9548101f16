#!/usr/bin/env bash
# Python engines of one TP=2 node whose two ranks share GPU 0 and receive in
# place into their own GPU tensors (into= on cuda:0, filled with 7s first),
# from 2 trainer ranks in host memory over tcp. Every tensor of every
# version is compared with torch.equal against slices cut with torch ops
# (qwen_tiny.tp_slices), so vocabulary padding must come out zero and every
# destination edge (written through from the image, or not) must hold the
# trainer's bytes. Skips without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
if [ -z "$PY" ]; then skip python_tp_gpu "no CUDA device visible to a python with torch"; exit 0; fi
if ! grep -q cuda <<<"$("$WSYNC" --version)"; then skip python_tp_gpu "libwsync built without CUDA"; exit 0; fi
T="$WSYNC_ROOT/tests/python"
export WSYNC_ROOT WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so WSYNC_HOST_ID=pytp-$$ MODEL_CFG=tp

name=tp2_gpu_into_in_place
port=$(free_port); url="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/$name.serve.log"
wait_http "$url/healthz" 30 || { fail "${name}_serve" "no control endpoint"; exit 0; }
tpids=() pids=() ok=1
for r in 0 1; do
    bg sh -c "sleep 600 | $PY $T/sync_trainer.py $url $r 2 full 2 e-$name-$$" >"$TMP/$name-t$r.log" 2>&1
    tpids+=($!)
done
for r in 0 1; do
    WSYNC_TEST_DEVICE=cuda:0 timeout 240 $PY "$T/sync_engine.py" "$url" "e-$name-$$" $r 2 tpinto 2 \
        >"$TMP/$name-e$r.log" 2>&1 &
    pids+=($!); WSYNC_PIDS+=($!)
done
for r in "${pids[@]}"; do wait "$r" || ok=0; done
cat "$TMP/$name"-e*.log | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\(PASS\|FAIL\|SKIP\) /\1 ${name}_/"
if [ $ok = 1 ]; then pass "${name}_engines_exit_0"; else
    fail "${name}_engines_exit_0" "$(grep -h -v '^PASS' "$TMP/$name"-e*.log | tail -n 8 | tr '\n' ' ')"; fi
for r in "${tpids[@]}"; do pkill -P "$r" 2>/dev/null; kill "$r" 2>/dev/null; done
