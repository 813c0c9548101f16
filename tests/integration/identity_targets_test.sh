#!/usr/bin/env bash
# A node whose every rank holds the identity target (--target whole_image):
# its node plan is the whole image's (target_plan.h), and it verifies each
# chunk as the whole image's fetch does, against the record's piece digests
# (engine_side/chunk_verify.c), not segment by segment after the last put:
#   - late digests: chunks landed and copied in wait for them, then compare;
#     every version's bytes equal the source's on both ranks;
#   - the trainer computes no segment digests for such a node, nor plans
#     its target's segments: its requests say no_segment_digests
#     (common/proto/pull_request.h);
#   - a byte flipped by the trainer after digesting its piece is caught
#     before ready, naming the put, its bytes, its tensor and trainer rank.
# Real processes on host memory, tcp, a node of 2 local ranks (each lands
# half the chunks and copies the other half out of its peer's window).
source "$(dirname "$0")/lib.sh"

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
python3 "$ST" make "$TMP/m" 3 >/dev/null
FILES="$TMP/m0.safetensors,$TMP/m1.safetensors,$TMP/m2.safetensors"
echo '{"version": 1, "whole_image": true}' >"$TMP/whole.json"

# --- late digests, staged: every version verified chunk by chunk
serve_local late
for r in 0 1; do
    WSYNC_TRACE=1 bg "$WSYNC" engine --control "$URL" --engine id0 --local-rank $r --local-world 2 \
        --target "$TMP/whole.json" --host-id hc --versions 3 --dump "$TMP/d-late" >"$TMP/e-late$r.log" 2>&1
    E[$r]=$!
done
wait_registered "$URL" id0
WSYNC_LATE_DIGESTS=on WSYNC_TRACE=1 WSYNC_TEST_DIGEST_DELAY_MS=300 "$WSYNC" trainer --control "$URL" --rank 0 \
    --world 1 --safetensors "$FILES" --versions 3 --chunk 64K --single-copy --hold-timeout-ms 60000 --host-id hc \
    --exit-after-publish >"$TMP/t-late.log" 2>&1
trc=$?
wait ${E[0]}
erc0=$?
wait ${E[1]}
erc1=$?
ok=1
for r in 0 1; do for v in 1 2 3; do
    python3 "$ST" compare "$TMP/m$(((v - 1) % 3)).safetensors" "$TMP/d-late/id0/rank$r/v$v.safetensors" || ok=0
done; done
per_chunk=$(cat "$TMP/e-late0.log" "$TMP/e-late1.log" | grep -c "every chunk (identity targets: against the record)")
waited=$(cat "$TMP/e-late0.log" "$TMP/e-late1.log" | grep -c "late digests of version [0-9]* in")
if [ $trc = 0 ] && [ $erc0 = 0 ] && [ $erc1 = 0 ] && [ $ok = 1 ] && [ "$per_chunk" = 6 ] && [ "$waited" = 6 ]; then
    pass identity_targets_late_digests_every_chunk_verified
else
    fail identity_targets_late_digests_every_chunk_verified \
        "trainer rc=$trc engines rc=$erc0,$erc1 same=$ok per-chunk=$per_chunk waited=$waited: $(tail -3 "$TMP/e-late0.log")"
fi
skipped=$(grep -c "no segment digests (identity targets" "$TMP/t-late.log")
computed=$(grep -c "segment digests of target" "$TMP/t-late.log")
planned=$(grep -c "segments of target .* planned" "$TMP/t-late.log")
if [ $trc = 0 ] && [ "$skipped" -ge 6 ] && [ "$computed" = 0 ] && [ "$planned" = 0 ]; then
    pass identity_targets_no_segment_digests_computed
else
    fail identity_targets_no_segment_digests_computed \
        "trainer rc=$trc requests without segment digests=$skipped segment digests computed=$computed planned=$planned"
fi

# --- a corrupted piece: caught chunk by chunk, named
serve_local bad
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine id1 --local-rank $r --local-world 2 --target "$TMP/whole.json" \
        --versions 1 --max-failures 1 --timeout-ms 8000 --dump "$TMP/d-bad" >"$TMP/e-bad$r.log" 2>&1
    E[$r]=$!
done
wait_registered "$URL" id1
WSYNC_TEST_CORRUPT_PIECE=1 "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 1 \
    --chunk 64K --wait-engines 1 --exit-after-publish >"$TMP/t-bad.log" 2>&1 &
T=$!
wait ${E[0]}
erc0=$?
wait ${E[1]}
erc1=$?
kill $T 2>/dev/null
wait $T 2>/dev/null
if [ $erc0 != 0 ] && [ $erc1 != 0 ] && [ ! -e "$TMP/d-bad/id1/rank0/v1.safetensors" ] &&
    cat "$TMP/e-bad0.log" "$TMP/e-bad1.log" |
    grep -q "put 1 (bytes [0-9.]*, tensor.* from trainer rank 0) failed verification on engine id1 rank [01]"; then
    pass identity_targets_corrupted_piece_caught_and_named
else
    fail identity_targets_corrupted_piece_caught_and_named \
        "engines rc=$erc0,$erc1: $(tail -3 "$TMP/e-bad0.log") / $(tail -3 "$TMP/e-bad1.log")"
fi
