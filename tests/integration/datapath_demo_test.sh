#!/usr/bin/env bash
# The data path end to end on this machine: `wsync demo` in several topologies
# and both modes, and dumps of safetensors versions compared byte for byte
# (names, dtypes, shapes, data) with the files they came from.
source "$(dirname "$0")/lib.sh"

out=$("$WSYNC" demo --trainers 2 --engines 2 --local-ranks 2 --synthetic 48M --versions 3 --chunk 4M 2>&1)
rc=$?
if [ $rc = 0 ] && [ "$(grep -c 'ready on 2 ranks' <<<"$out")" = 6 ]; then pass demo_2x2x2_staged
else fail demo_2x2x2_staged "rc=$rc: $(tail -5 <<<"$out")"; fi

out=$("$WSYNC" demo --trainers 3 --engines 1 --local-ranks 3 --synthetic 20M --versions 2 --chunk 1M --mode in-place 2>&1)
rc=$?
if [ $rc = 0 ] && [ "$(grep -c 'ready on 3 ranks' <<<"$out")" = 2 ]; then pass demo_3x1x3_in_place
else fail demo_3x1x3_in_place "rc=$rc: $(tail -5 <<<"$out")"; fi

out=$("$WSYNC" demo --trainers 1 --engines 1 --local-ranks 1 --synthetic 3M --versions 2 --chunk 64K --layout fsdp 2>&1)
rc=$?
if [ $rc = 0 ]; then pass demo_fsdp_layout_single_ranks; else fail demo_fsdp_layout_single_ranks "rc=$rc: $(tail -5 <<<"$out")"; fi

# Three safetensors files written by python (not by wsync): every dumped
# version must equal the file it was published from.
python3 "$WSYNC_ROOT/tests/integration/st_tool.py" make "$TMP/m" 3 >/dev/null
files="$TMP/m0.safetensors,$TMP/m1.safetensors,$TMP/m2.safetensors"
# 5 snapshot threads per trainer rank, more than this machine has cores:
# the pieces are shared among them and every byte must still match.
out=$(WSYNC_PUBLISH_THREADS=5 "$WSYNC" demo --trainers 2 --engines 2 --local-ranks 2 --safetensors "$files" --versions 3 --chunk 64K \
      --dump "$TMP/dump" 2>&1)
rc=$?
if [ $rc != 0 ]; then fail demo_safetensors_dumps_match "demo rc=$rc: $(tail -5 <<<"$out")"
else
    ok=1
    for e in e0 e1; do for r in 0 1; do for v in 1 2 3; do
        src="$TMP/m$(( (v - 1) % 3 )).safetensors"
        python3 "$WSYNC_ROOT/tests/integration/st_tool.py" compare "$src" "$TMP/dump/$e/rank$r/v$v.safetensors" \
            || { ok=0; echo "mismatch $e rank$r v$v" >&2; }
    done; done; done
    check demo_safetensors_dumps_match [ $ok = 1 ]
fi

out=$("$WSYNC" demo --trainers 0 2>&1); rc=$?
check demo_bad_arguments_exit_2 [ $rc = 2 ]
