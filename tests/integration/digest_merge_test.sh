#!/usr/bin/env bash
# One read for both digests (trainer_side/digest_merge.c), real processes on
# host memory: two single-copy trainer ranks (even layout) serve a TP=2 node
# four versions. Version 1's put digests are computed on the first request,
# as before; from version 2 on each trainer rank computes them in its
# publish's digest pass with the record's (the trace says so, and no request
# digests them again). Every rank of every version equals the slices
# tp_tool.py cuts from the safetensors file in Python, so the engines'
# verification against those digests let through only right bytes. Both
# with the digests before the announce and with late digests, under
# WSYNC_DIGEST_MERGE=on; with the setting's default (auto: GPU trainers
# only) these host trainers digest every version's puts on request.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TOOL="$WSYNC_ROOT/tests/integration/tp_tool.py"

$PY "$TOOL" qwen "$TMP/q1.safetensors" 1 && $PY "$TOOL" qwen "$TMP/q2.safetensors" 2 || {
    fail make_models "tp_tool.py could not write the models"; exit 0; }
QWEN="$TMP/q1.safetensors,$TMP/q2.safetensors"

for run in off:on on:on off:auto; do
    late=${run%%:*} merge=${run#*:} tag=${run/:/_merge_}
    serve_local "merge-$tag"
    for r in 0 1; do
        bg "$WSYNC" engine --control "$URL" --engine tp-$tag --local-rank $r --local-world 2 --tp 2 \
            --mode in-place --host-id hm --versions 4 --dump "$TMP/d-$tag" >"$TMP/e$r-$tag.log" 2>&1
    done
    wait_registered "$URL" tp-$tag
    pids=()
    for r in 0 1; do
        WSYNC_LATE_DIGESTS=$late WSYNC_DIGEST_MERGE=$merge WSYNC_TRACE=1 "$WSYNC" trainer --control "$URL" --rank $r --world 2 \
            --layout even --safetensors "$QWEN" --versions 4 --chunk 64K --single-copy --hold-timeout-ms 60000 \
            --host-id hm --exit-after-publish >"$TMP/t$r-$tag.log" 2>&1 &
        pids+=($!)
    done
    trc=0
    for p in "${pids[@]}"; do wait "$p" || trc=$?; done
    for i in $(seq 600); do
        [ -f "$TMP/d-$tag/tp-$tag/rank0/v4.safetensors" ] && [ -f "$TMP/d-$tag/tp-$tag/rank1/v4.safetensors" ] &&
            break
        sleep 0.1
    done
    sleep 0.3
    ok=1
    for r in 0 1; do for v in 1 2 3 4; do
        $PY "$TOOL" check "$TMP/q$(((v - 1) % 2 + 1)).safetensors" "$TMP/d-$tag/tp-$tag/rank$r/v$v.safetensors" 2 \
            $r || { ok=0; echo "mismatch rank$r v$v ($tag)" >&2; }
    done; done
    check "tp2_every_version_right_late_${tag}" [ $trc = 0 -a $ok = 1 ]
    # Per trainer rank: versions 2-4 merged, the old put digests for version 1 alone.
    merged=$(cat "$TMP/t0-$tag.log" "$TMP/t1-$tag.log" | grep -c "put digests of a node plan computed with the record's$")
    old=$(cat "$TMP/t0-$tag.log" "$TMP/t1-$tag.log" | grep -c "put digests of target .*, version")
    oldv1=$(cat "$TMP/t0-$tag.log" "$TMP/t1-$tag.log" | grep -c "put digests of target .*, version 1$")
    if [ "$merge" = on ]; then
        check "put_digests_with_the_record_from_version_2_late_${tag}" [ "$merged" = 6 -a "$old" = 2 -a "$oldv1" = 2 ] ||
            echo "merged=$merged old=$old oldv1=$oldv1" >&2
    else # auto on host memory: no merged pass, every version's put digests on request
        check "host_trainers_digest_puts_on_request_late_${tag}" [ "$merged" = 0 -a "$old" = 8 -a "$oldv1" = 2 ] ||
            echo "merged=$merged old=$old oldv1=$oldv1" >&2
    fi
    kill "$SERVE" 2>/dev/null
done
