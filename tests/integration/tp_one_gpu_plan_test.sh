#!/usr/bin/env bash
# A node of targets (TP=2) whose ranks and trainers share one GPU lands on
# each rank all it holds (target_plan_internal.h tp_one_gpu): no chunk is
# copied in from the other rank's window, and every rank's bytes are still
# right. The landing hint of one GPU comes from the test hook
# WSYNC_TEST_ONE_GPU_HINT on host memory (the GPU host runs the real one);
# the same run without it copies the bytes both ranks hold (the norms) in from
# the rank that landed them. tp_e2e_bench compares every rank's bytes with
# slices it computes on its own (the vLLM rules written again).
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
tp_bench tp_one_gpu_plan || exit 0
WSYNC_TEST_ONE_GPU_HINT=1 WSYNC_TRACE=1 timeout 120 "$BENCH" cpu 32M auto single-copy no-baseline \
    >"$TMP/one" 2>"$TMP/one_trace"
check one_gpu_every_rank_verified [ "$(grep -c "every rank's bytes verified" "$TMP/one")" = 4 ]
check one_gpu_no_copy_between_ranks [ "$(grep -c "copied in from local rank" "$TMP/one_trace")" = 0 ]
# 4 TP configurations x 2 ranks x 7 versions, each verified by its puts
check one_gpu_verified_by_put \
    [ "$(grep -c "engine tp-[a-z-]* rank [01]: every put of its target verified" "$TMP/one_trace")" = 56 ]
WSYNC_TRACE=1 timeout 120 "$BENCH" cpu 32M auto single-copy no-baseline >"$TMP/two" 2>"$TMP/two_trace"
check hint_absent_every_rank_verified [ "$(grep -c "every rank's bytes verified" "$TMP/two")" = 4 ]
check hint_absent_copies_between_ranks [ "$(grep -c "copied in from local rank" "$TMP/two_trace")" -gt 0 ]
