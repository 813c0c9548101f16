#!/usr/bin/env bash
# The GPU data path end to end through the CLI: trainer ranks holding their
# shards in GPU memory, engine ranks receiving into GPU memory, chunks fanned
# out between an engine node's ranks through CUDA IPC windows, every piece
# verified. Colocated (ranks of both sides on both GPUs, tcp), across GPUs
# through nccl with separate host ids, staged and in-place, a corrupted byte,
# and safetensors versions dumped from GPU memory and compared tensor by
# tensor with their sources. Skips without a CUDA device.
source "$(dirname "$0")/../integration/lib.sh"

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
ngpu=$(cuda_devices)
if [ "$ngpu" = 0 ]; then
    for c in colocated_2x2_on_2_gpus colocated_2x2_over_local nccl_across_gpus_host_ids ipc_fanout_2_ranks_staged ipc_fanout_2_ranks_in_place \
             corrupted_byte_caught safetensors_colocated_dumps_match safetensors_nccl_dumps_match; do
        skip "$c" "no CUDA device"
    done
    exit 0
fi

# demo_ok NAME EXPECTED_READY_LINES ARGS...: a demo run that must succeed.
demo_ok() {
    local name=$1 want=$2; shift 2
    local out rc
    out=$(timeout 300 "$WSYNC" demo --device cuda --timeout-s 240 "$@" 2>&1); rc=$?
    echo "$out" >"$TMP/$name.log"
    if [ $rc = 0 ] && [ "$(grep -c 'ready on' <<<"$out")" = "$want" ]; then pass "$name"
    else fail "$name" "rc=$rc, $(grep -c 'ready on' <<<"$out") ready lines (want $want): $(tail -5 <<<"$out")"; fi
}

# nccl_run NAME MODE LOCAL_RANKS VERSIONS MODEL_OPT MODEL [DUMPDIR]: one
# trainer on GPU 0 (host id h-train) serving the control endpoint, one
# engine node of LOCAL_RANKS ranks all on GPU 1 (host id h-eng) pulling over
# nccl. NCCL refuses two ranks of a communicator on one GPU, so every
# trainer/engine pair here spans the two GPUs. Sets $rc and writes logs.
nccl_run() {
    local name=$1 mode=$2 L=$3 N=$4 mopt=$5 model=$6 dump=${7:-} port url r pids=() dopt=()
    port=$(free_port); url="http://127.0.0.1:$port"
    [ -n "$dump" ] && dopt=(--dump "$dump")
    timeout 300 "$WSYNC" trainer --serve "127.0.0.1:$port" --rank 0 --world 1 "$mopt" "$model" --versions "$N" \
        --wait-engines 1 --chunk 4M --device cuda:0 --host-id h-train --exit-after-publish \
        >"$TMP/$name.trainer.log" 2>&1 &
    local tp=$!
    WSYNC_PIDS+=($tp)
    wait_http "$url/healthz" 30 || { rc=99; return; }
    for ((r = 0; r < L; r++)); do
        timeout 240 "$WSYNC" engine --control "$url" --engine "e-$name" --local-rank $r --local-world "$L" \
            --versions "$N" --mode "$mode" --transport nccl --device cuda:1 --host-id h-eng --timeout-ms 120000 \
            "${dopt[@]}" >"$TMP/$name.engine$r.log" 2>&1 &
        pids+=($!); WSYNC_PIDS+=($!)
    done
    rc=0
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    wait "$tp" || rc=2
}

nccl_ok() { # NAME MODE L N
    nccl_run "$1" "$2" "$3" "$4" --synthetic 96M
    if [ $rc = 0 ] && [ "$(grep -c 'ready on' "$TMP/$1.engine0.log")" = "$4" ]; then pass "$1"
    else fail "$1" "rc=$rc: $(tail -3 "$TMP/$1.engine0.log" "$TMP/$1.trainer.log" | tr '\n' ' ')"; fi
}

# --- colocated: 2 trainer ranks and 2 engine ranks on 2 GPUs (tcp between
# them, IPC windows between the engine ranks). The demo's ranks share a host
# id, so receivers would pick "local" on their own: turned off here to keep
# the tcp path covered (the safetensors demo below keeps the automatic choice).
WSYNC_LOCAL_TRANSPORT=0 demo_ok colocated_2x2_on_2_gpus 3 --trainers 2 --engines 1 --local-ranks 2 --synthetic 96M --versions 3 --chunk 4M
# --- the same over the local transport (CUDA IPC device-to-device copies:
# same GPU and across GPUs, no host bounce).
demo_ok colocated_2x2_over_local 3 --trainers 2 --engines 1 --local-ranks 2 --synthetic 96M --versions 3 --chunk 4M \
    --transport local

if [ "$ngpu" -lt 2 ]; then
    for c in nccl_across_gpus_host_ids ipc_fanout_2_ranks_staged ipc_fanout_2_ranks_in_place corrupted_byte_caught \
             safetensors_nccl_dumps_match; do
        skip "$c" "needs 2 CUDA devices (nccl pairs cannot share a GPU)"
    done
else
    # --- across GPUs through nccl, trainer and engine on different host ids.
    nccl_ok nccl_across_gpus_host_ids staged 1 2
    # --- a 2-rank engine node on GPU 1: half the chunks land on each rank,
    # the other half comes out of the peer's IPC window.
    nccl_ok ipc_fanout_2_ranks_staged staged 2 3
    nccl_ok ipc_fanout_2_ranks_in_place in-place 2 2

    # --- a byte flipped after the trainer digested it: the engine refuses the
    # version and names the piece.
    port=$(free_port); url="http://127.0.0.1:$port"
    WSYNC_TEST_CORRUPT_PIECE=3 timeout 120 "$WSYNC" trainer --serve "127.0.0.1:$port" --rank 0 --world 1 \
        --synthetic 32M --chunk 4M --versions 1 --device cuda:0 --host-id h-train >"$TMP/corrupt.trainer.log" 2>&1 &
    tc=$!; WSYNC_PIDS+=($tc)
    if wait_http "$url/healthz" 30; then
        timeout 100 "$WSYNC" engine --control "$url" --engine corrupt --local-rank 0 --local-world 1 --versions 1 \
            --device cuda:1 --transport nccl --host-id h-eng --timeout-ms 20000 --max-failures 1 \
            >"$TMP/corrupt.log" 2>"$TMP/corrupt.err"
        rc=$?
        if [ $rc = 1 ] && grep -q 'piece 3 .*failed verification' "$TMP/corrupt.err" && ! grep -q 'ready on' "$TMP/corrupt.log"
        then pass corrupted_byte_caught
        else fail corrupted_byte_caught "engine rc=$rc: $(tail -3 "$TMP/corrupt.err" | tr '\n' ' ')"; fi
    else
        fail corrupted_byte_caught "trainer's control endpoint did not come up: $(tail -3 "$TMP/corrupt.trainer.log")"
    fi
    kill $tc 2>/dev/null; wait $tc 2>/dev/null
fi

# --- every tensor of every version equals its source file, read back from
# GPU memory on each engine rank.
python3 "$ST" make "$TMP/m" 2 >/dev/null
files="$TMP/m0.safetensors,$TMP/m1.safetensors"
compare_dumps() { # DIR ENGINE RANKS VERSIONS
    local dir=$1 e=$2 L=$3 N=$4 r v ok=1
    for ((r = 0; r < L; r++)); do for ((v = 1; v <= N; v++)); do
        python3 "$ST" compare "$TMP/m$(( (v - 1) % 2 )).safetensors" "$dir/$e/rank$r/v$v.safetensors" \
            || { ok=0; echo "mismatch $e rank$r v$v" >&2; }
    done; done
    [ $ok = 1 ]
}
out=$(timeout 300 "$WSYNC" demo --device cuda --timeout-s 240 --trainers 2 --engines 1 --local-ranks 2 \
      --safetensors "$files" --versions 2 --chunk 64K --dump "$TMP/dc" 2>&1); rc=$?
if [ $rc != 0 ]; then fail safetensors_colocated_dumps_match "demo rc=$rc: $(tail -5 <<<"$out")"
else check safetensors_colocated_dumps_match compare_dumps "$TMP/dc" e0 2 2; fi

if [ "$ngpu" -ge 2 ]; then
    nccl_run st_nccl staged 2 2 --safetensors "$files" "$TMP/dn"
    if [ $rc != 0 ]; then fail safetensors_nccl_dumps_match "rc=$rc: $(tail -3 "$TMP/st_nccl.engine0.log")"
    else check safetensors_nccl_dumps_match compare_dumps "$TMP/dn" e-st_nccl 2 2; fi
fi
