#!/usr/bin/env bash
# One read for both digests (trainer_side/digest_merge.c), real processes on
# host memory: two single-copy trainer ranks (even layout) serve a TP=2 node
# four versions. Version 1's put digests are computed on the first request,
# as before; from version 2 on each trainer rank computes them in its
# publish's digest pass with the record's (the trace says so, and no request
# digests them again). Every rank of every version equals the slices
# tp_tool.py cuts from the safetensors file in Python, so the engines'
# verification against those digests let through only right bytes. Both
# with the digests before the announce and with late digests.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"

$PY "$TOOL" qwen "$TMP/q1.safetensors" 1 && $PY "$TOOL" qwen "$TMP/q2.safetensors" 2 || {
    fail make_models "tp_tool.py could not write the models"; exit 0; }
QWEN="$TMP/q1.safetensors,$TMP/q2.safetensors"

for late in off on; do
    serve_local "merge-$late"
    for r in 0 1; do
        bg "$WSYNC" engine --control "$URL" --engine tp-$late --local-rank $r --local-world 2 --tp 2 \
            --mode in-place --host-id hm --versions 4 --dump "$TMP/d-$late" >"$TMP/e$r-$late.log" 2>&1
    done
    wait_registered "$URL" tp-$late
    pids=()
    for r in 0 1; do
        WSYNC_LATE_DIGESTS=$late WSYNC_TRACE=1 "$WSYNC" trainer --control "$URL" --rank $r --world 2 \
            --layout even --safetensors "$QWEN" --versions 4 --chunk 64K --single-copy --hold-timeout-ms 60000 \
            --host-id hm --exit-after-publish >"$TMP/t$r-$late.log" 2>&1 &
        pids+=($!)
    done
    trc=0
    for p in "${pids[@]}"; do wait "$p" || trc=$?; done
    for i in $(seq 600); do
        [ -f "$TMP/d-$late/tp-$late/rank0/v4.safetensors" ] && [ -f "$TMP/d-$late/tp-$late/rank1/v4.safetensors" ] &&
            break
        sleep 0.1
    done
    sleep 0.3
    ok=1
    for r in 0 1; do for v in 1 2 3 4; do
        $PY "$TOOL" check "$TMP/q$(((v - 1) % 2 + 1)).safetensors" "$TMP/d-$late/tp-$late/rank$r/v$v.safetensors" 2 \
            $r || { ok=0; echo "mismatch rank$r v$v ($late)" >&2; }
    done; done
    check "tp2_every_version_right_late_${late}" [ $trc = 0 -a $ok = 1 ]
    # Per trainer rank: versions 2-4 merged, the old put digests for version 1 alone.
    merged=$(cat "$TMP/t0-$late.log" "$TMP/t1-$late.log" | grep -c "put digests of a node plan computed with the record's$")
    old=$(cat "$TMP/t0-$late.log" "$TMP/t1-$late.log" | grep -c "put digests of target .*, version")
    oldv1=$(cat "$TMP/t0-$late.log" "$TMP/t1-$late.log" | grep -c "put digests of target .*, version 1$")
    check "put_digests_with_the_record_from_version_2_late_${late}" [ "$merged" = 6 -a "$old" = 2 -a "$oldv1" = 2 ] ||
        echo "merged=$merged old=$old oldv1=$oldv1" >&2
    kill "$SERVE" 2>/dev/null
done
