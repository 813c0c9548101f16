#!/usr/bin/env bash
# A node of targets (TP=2) pulling from single-copy trainers over tcp verifies
# every version put by put, with each chunk digested as it lands, never by a
# second pass over its target after the last landing: single-copy trainers
# keep no delta base (delta_bases 0), so the node asks no delta, and a node
# that asks none keeps verification by put (delta_land.h recv_delta_asks);
# host memory digests a chunk landed without sums at once (target_puts.h).
# Read from the trace of a real run (tp_e2e_bench, 32 MB, six engine
# configurations of 7 versions each, every rank's bytes compared by the bench).
# Also: local rank 1 takes each version's record from local rank 0's board.
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
tp_bench tp_verify_by_put || exit 0
WSYNC_TRACE=1 timeout 120 "$BENCH" cpu 32M auto single-copy >"$TMP/out" 2>"$TMP/trace"
check tp_bench_every_rank_verified [ "$(grep -c "every rank's bytes verified" "$TMP/out")" = 6 ]
by_put=$(grep -c "engine tp-[a-z-]* rank [01]: every put of its target verified" "$TMP/trace")
by_seg=$(grep -c "engine tp-[a-z-]* rank [01]: every segment of its target verified" "$TMP/trace")
# 4 TP configurations x 2 ranks x 7 versions
check tp_versions_verified_by_put [ "$by_put" = 56 ] && [ "$by_seg" = 0 ]
[ "$by_put" = 56 ] || echo "by put: $by_put, by segment: $by_seg (of 56)" >&2
# staged and in place, into the caller's tensors or not: what is left for the
# check is the few bytes copied in from the other rank's window (replicated
# norms, ~13 KB here), not the ~16 MB of chunks that landed on the rank
late=$(grep -E "engine tp-(staged|in-place|dests-staged|dests-in-place) rank [01]: [0-9]+ bytes without sums digested at the check" \
    "$TMP/trace" | awk '{ for (i = 1; i <= NF; i++) if ($(i + 1) == "bytes") { if ($i > m) m = $i } } END { print m + 0 }')
check tp_chunks_digested_as_they_land [ "$late" -lt 1048576 ]
echo "most bytes left for a check: $late" >&2
# Local rank 1 reads each version's record from local rank 0 through the node
# board (board.h BOARD_TEXT_RECORD), never from the control endpoint: 6
# configurations x 7 versions
check follower_reads_record_from_rank0 [ "$(grep -c "engine [a-z-]* rank 1: version [0-9]*'s record read from local rank 0" "$TMP/trace")" = 42 ]
