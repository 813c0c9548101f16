#!/usr/bin/env bash
# delta_pull_test.sh: delta pulls through real processes (docs/DELTA.md).
# Versions made by real AdamW steps (tests/tools/adamw_versions.py, a small
# Qwen-shaped model in Debian's torch), published by 2 trainer ranks
# (`wsync trainer`), pulled over tcp by an engine node of 2 ranks:
#   - staged: every version after the first as deltas from the one held;
#     every tensor of every version on both ranks torch.equal to the file it
#     was published from (read here with struct and json, not wsync), and
#     the bytes on the wire of each version well below its image's;
#   - beside it a Python receiver (wsync.Receiver) that joins late (its
#     first pull: full pieces), then skips a version (two behind, base not
#     kept with delta_bases 1: full pieces), then pulls the next (deltas),
#     each as its `last_pull` says;
#   - in place, with a fault hook that flips one byte of a piece of the held
#     version before the first delta pull: that piece fails verification,
#     is re-fetched in full from its trainer rank (the log names piece,
#     trainer rank and base), and every version is still ready with the
#     right bytes; the node's status and /metrics count it;
#   - staged, with a trainer hook that breaks one piece's wire: refused by
#     the decoder, re-fetched in full, every version right;
#   - a TP=2 node in place into its own tensors (Python) through the sparse
#     GPU image's path on host memory: deltas, every tensor equal.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/versions_lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip delta_pull_staged_every_tensor_equal "no python3 with torch and numpy at $PY"
    exit 0
fi
make_versions 5 || { fail delta_pull_staged_every_tensor_equal "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
NV=6
WIRE_CHECK=$WSYNC_ROOT/tests/tools/wire_check.py
export WSYNC_LOG=info

# --- staged, beside a late joiner that also falls two versions behind
serve_local staged
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine e0 --local-rank $r --local-world 2 --mode staged --transport tcp \
        --versions $NV --timeout-ms 60000 --dump "$TMP/d-staged" >"$TMP/e-staged-$r.log" 2>&1
    eval E$r=$!
done
wait_registered "$URL" e0
cat >"$TMP/late.py" <<'PY'
import json, struct, sys
import torch
import wsync
url, vdir = sys.argv[1], sys.argv[2]
def load(v):
    b = open("%s/v%04d.safetensors" % (vdir, v - 1), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: bytes(b[8 + n + x["data_offsets"][0]:8 + n + x["data_offsets"][1]]) for k, x in h.items()}
r = wsync.Receiver(url, "late", 0, 1, mode="staged", transport="tcp")
for v in (2, 4, 5):  # joins at 2 (full), skips 3 (base 2 not kept at 4: full), then 5 (deltas from 4)
    assert r.pull(version=v, timeout=60) == v
    want, got = load(v), r.tensors()
    assert set(want) == set(got), sorted(set(want) ^ set(got))[:3]
    for k, raw in want.items():
        g = got[k].contiguous().view(torch.uint8).flatten()
        assert torch.equal(g, torch.frombuffer(bytearray(raw) or bytearray(1), dtype=torch.uint8)[:len(raw)]), (v, k)
    d = r.last_pull  # what came as deltas: nothing at 2 (joined) and 4 (base gone), pieces at 5
    assert d["version"] == v and (d["delta_pieces"] > 0) == (v == 5) and d["refetched"] == 0, (v, d)
    assert v != 5 or 0 < d["wire_bytes"] < d["saved_bytes"], d
    print("late: version %d equal, last_pull %s" % (v, d), flush=True)
r.close()
PY
# Under `make asan` libwsync.so is an AddressSanitizer build that Python
# loads only with the sanitizer runtimes preloaded (python_test.sh): the late
# joiner runs in `make test`, the C engines here in both.
ASAN_LIB=0
nm -D "${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" 2>/dev/null | grep -q ' U __asan_init' && ASAN_LIB=1
if [ $ASAN_LIB = 0 ]; then
    (cd "$WSYNC_ROOT" && WSYNC_LIB="${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" PYTHONPATH=python \
        $PY "$TMP/late.py" "$URL" "$TMP/v" >"$TMP/late.log" 2>&1) &
else
    true &
fi
L=$!
WSYNC_PIDS+=($L)
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" --versions $NV --chunk 256K \
        --interval-ms 600 --wait-engines 1 >"$TMP/t-staged-$r.log" 2>&1
done
wait $E0
e0=$?
wait $E1
e1=$?
wait $L
lrc=$?
if [ $e0 = 0 ] && [ $e1 = 0 ] && dumps_equal "$TMP/d-staged/e0" 2 $(seq 1 $NV); then
    pass delta_pull_staged_every_tensor_equal
else
    fail delta_pull_staged_every_tensor_equal "engine rc=$e0,$e1: $(tail -2 "$TMP/e-staged-0.log")"
fi
# Each version after the first: both ranks took deltas, and the bytes on
# the wire of the whole image are below a quarter of it (~4-8% at lr 1e-6).
if $PY "$WIRE_CHECK" $NV pieces "$TMP"/e-staged-*.log; then
    pass delta_pull_wire_bytes_below_full
else
    fail delta_pull_wire_bytes_below_full "$(grep -h 'pieces as deltas' "$TMP"/e-staged-*.log | head -3)"
fi
if [ $ASAN_LIB = 1 ]; then
    skip delta_pull_late_joiner_gets_full_pieces "libwsync.so is an AddressSanitizer build (make asan): the Python joiner runs in make test"
    skip delta_pull_two_behind_gets_full_pieces "libwsync.so is an AddressSanitizer build (make asan): the Python joiner runs in make test"
elif [ $lrc = 0 ] && [ "$(grep -c 'equal, last_pull' "$TMP/late.log")" = 3 ] && ! grep -q 'version 2: .*deltas' "$TMP/late.log"; then
    pass delta_pull_late_joiner_gets_full_pieces
else
    fail delta_pull_late_joiner_gets_full_pieces "rc=$lrc: $(tail -3 "$TMP/late.log")"
fi
if [ $ASAN_LIB = 1 ]; then
    :
elif grep -q 'version 4: no trainer rank keeps version 2 as a delta base (their registrations say so, none was asked): every piece came full' \
    "$TMP/late.log" && grep -q 'version 5: [1-9][0-9]* pieces as deltas from version 4' "$TMP/late.log"; then
    pass delta_pull_two_behind_gets_full_pieces
else
    fail delta_pull_two_behind_gets_full_pieces "$(grep -h 'version [45]' "$TMP/late.log" | head -3)"
fi

# --- in place, the held version corrupted before the first delta pull;
# beside it a node of 2 Python ranks in place into their own tensors
# (wsync.Receiver into=: the base is the caller's tensors, the image's pages
# under them freed), every version after the first as deltas, every tensor
# equal, the same hook flipping a byte of piece 3 in the caller's tensor:
# re-fetched once.
cat >"$TMP/into.py" <<'PY'
import json, struct, sys
import torch
import wsync
url, rank, vdir, nv = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
DT = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
def load(v):
    b = open("%s/v%04d.safetensors" % (vdir, v - 1), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = {k: x for k, x in json.loads(b[8:8 + n]).items() if k != "__metadata__"}
    return h, {k: bytes(b[8 + n + x["data_offsets"][0]:8 + n + x["data_offsets"][1]]) for k, x in h.items()}
head, _ = load(1)
own = {k: torch.zeros(x["shape"], dtype=DT[x["dtype"]]) for k, x in head.items()}
r = wsync.Receiver(url, "e1into", rank, 2, into=own, mode="in-place", transport="tcp")
for v in range(1, nv + 1):
    assert r.pull(version=v, timeout=60) == v
    for k, raw in load(v)[1].items():
        g = own[k].contiguous().view(torch.uint8).flatten()
        assert torch.equal(g, torch.frombuffer(bytearray(raw) or bytearray(1), dtype=torch.uint8)[:len(raw)]), (v, k)
    d = r.last_pull
    assert d["version"] == v and (d["delta_pieces"] > 0) == (v > 1) and d["refetched"] <= (v == 2), (v, d)
    print("into: version %d equal, %d re-fetched, last_pull %s" % (v, d["refetched"], d), flush=True)
r.close()
PY
serve_local inplace
for r in 0 1; do
    WSYNC_TEST_CORRUPT_HELD=3 bg "$WSYNC" engine --control "$URL" --engine e1 --local-rank $r --local-world 2 \
        --mode in-place --transport tcp --versions 4 --timeout-ms 60000 --dump "$TMP/d-inplace" \
        >"$TMP/e-inplace-$r.log" 2>&1
    eval E$r=$!
done
wait_registered "$URL" e1
NE=1
IP=()
if [ $ASAN_LIB = 0 ]; then
    for r in 0 1; do
        (cd "$WSYNC_ROOT" && WSYNC_LIB="${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" PYTHONPATH=python \
            WSYNC_TEST_CORRUPT_HELD=3 $PY "$TMP/into.py" "$URL" $r "$TMP/v" 4 >"$TMP/into-$r.log" 2>&1) &
        IP+=($!)
        WSYNC_PIDS+=($!)
    done
    wait_registered "$URL" e1into
    NE=2
fi
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" --versions 4 --chunk 256K \
        --wait-engines $NE >"$TMP/t-inplace-$r.log" 2>&1
done
wait $E0
e0=$?
wait $E1
e1=$?
irc=0
for p in "${IP[@]}"; do wait "$p" || irc=1; done
if [ $ASAN_LIB = 1 ]; then
    skip delta_pull_into_in_place_every_tensor_equal "libwsync.so is an AddressSanitizer build (make asan): the Python node runs in make test"
elif [ $irc = 0 ] && [ "$(cat "$TMP"/into-*.log | grep -c 'equal, . re-fetched')" = 8 ] &&
    [ "$(cat "$TMP"/into-*.log | grep -c 'version 2 equal, 1 re-fetched')" = 1 ]; then
    pass delta_pull_into_in_place_every_tensor_equal
else
    fail delta_pull_into_in_place_every_tensor_equal "$(tail -q -n 3 "$TMP"/into-*.log | tr '\n' ' ')"
fi
if [ $e0 = 0 ] && [ $e1 = 0 ] && dumps_equal "$TMP/d-inplace/e1" 2 1 2 3 4; then
    pass delta_pull_in_place_every_tensor_equal
else
    fail delta_pull_in_place_every_tensor_equal "engine rc=$e0,$e1: $(tail -2 "$TMP/e-inplace-0.log")"
fi
if grep -qh 'piece 3 (trainer rank [01]) applied as a delta from version 1 failed verification against version 2.s digests (tensor .*): re-fetching it in full' \
    "$TMP"/e-inplace-*.log && grep -qh 'version 2: .*; 1 re-fetched in full after a failed check' "$TMP"/e-inplace-*.log; then
    pass delta_pull_corrupted_base_refetched_in_full
else
    fail delta_pull_corrupted_base_refetched_in_full "$(grep -h 'hook\|re-fetch\|version 2' "$TMP"/e-inplace-*.log | head -4)"
fi
# The control endpoint counts it: the node's status and /metrics.
# (the Python node beside it re-fetched once too, NE=2 nodes)
curl -fsS "$URL/metrics" >"$TMP/metrics.txt"
curl -fsS "$URL/v1/status" >"$TMP/status.json"
if grep -q "^wsync_delta_refetches_total $NE$" "$TMP/metrics.txt" &&
    grep -q '^wsync_delta_pieces_total [1-9]' "$TMP/metrics.txt" &&
    grep -q '^wsync_delta_bytes_saved_total [1-9]' "$TMP/metrics.txt" &&
    $PY -c 'import json, sys
e = [e for e in json.load(open(sys.argv[1]))["engines"] if e["id"] == "e1"][0]["delta"]
assert e["refetched_total"] == 1 and e["pieces"] > 0 and 0 < e["wire_bytes"] < e["saved_bytes"], e' \
        "$TMP/status.json"; then
    pass delta_pull_status_and_metrics_count_it
else
    fail delta_pull_status_and_metrics_count_it "$(grep wsync_delta "$TMP/metrics.txt")"
fi

# --- staged, one piece's wire broken by the trainer: refused, re-fetched
serve_local wire
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine e2 --local-rank $r --local-world 2 --mode staged --transport tcp \
        --versions 3 --timeout-ms 60000 --dump "$TMP/d-wire" >"$TMP/e-wire-$r.log" 2>&1
    eval E$r=$!
done
wait_registered "$URL" e2
for r in 0 1; do
    WSYNC_TEST_CORRUPT_WIRE=5 bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --safetensors "$FILES" \
        --versions 3 --chunk 256K --wait-engines 1 >"$TMP/t-wire-$r.log" 2>&1
done
wait $E0
e0=$?
wait $E1
e1=$?
if [ $e0 = 0 ] && [ $e1 = 0 ] && dumps_equal "$TMP/d-wire/e2" 2 1 2 3 &&
    grep -qh 'piece 5 (trainer rank [01]) of version 2: its delta wire from version 1 was refused (.*magic.*): re-fetching it in full' \
        "$TMP"/e-wire-*.log && grep -qh 'version 3: .*; 1 re-fetched in full after a failed check' "$TMP"/e-wire-*.log; then
    pass delta_pull_refused_wire_refetched_in_full
else
    fail delta_pull_refused_wire_refetched_in_full "engine rc=$e0,$e1: $(grep -h 'refused\|re-fetched' "$TMP"/e-wire-*.log | head -3)"
fi

# --- a TP=2 node (targets: tp_tool.py's slices, a node plan of packed
# column slices from fsdp trainer shards) and a whole-image node pulling the
# same delta versions side by side, both staged: every tensor of every
# version right (the TP ranks' slices computed by tp_tool.py from the file,
# without wsync's code), each version after the first as deltas on both
# nodes, the TP node's bytes on the wire below a quarter of its full puts.
serve_local tp
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine tp --local-rank $r --local-world 2 --tp 2 --mode staged \
        --transport tcp --versions $NV --timeout-ms 60000 --dump "$TMP/d-tp" >"$TMP/e-tp-$r.log" 2>&1
    eval T$r=$!
    bg "$WSYNC" engine --control "$URL" --engine wh --local-rank $r --local-world 2 --mode staged \
        --transport tcp --versions $NV --timeout-ms 60000 --dump "$TMP/d-tp" >"$TMP/e-wh-$r.log" 2>&1
    eval W$r=$!
done
wait_registered "$URL" tp
wait_registered "$URL" wh
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$FILES" --versions $NV \
        --chunk 256K --interval-ms 600 --wait-engines 2 >"$TMP/t-tp-$r.log" 2>&1
done
rcs=""
for p in $T0 $T1 $W0 $W1; do
    wait $p
    rcs="$rcs $?"
done
tp_ok=1
tp_equal "$TMP/d-tp/tp" $(seq 1 $NV) || tp_ok=0
if [ "$rcs" = " 0 0 0 0" ] && [ $tp_ok = 1 ] && dumps_equal "$TMP/d-tp/wh" 2 $(seq 1 $NV); then
    pass delta_pull_tp2_beside_whole_every_tensor_equal
else
    fail delta_pull_tp2_beside_whole_every_tensor_equal "rc=$rcs tp_ok=$tp_ok: $(tail -2 "$TMP/e-tp-0.log")"
fi
# Every version after the first came as deltas on each rank of both nodes, on
# the wire below a quarter of what it was owed.
if $PY "$WIRE_CHECK" $NV puts "$TMP"/e-tp-*.log && $PY "$WIRE_CHECK" $NV pieces "$TMP"/e-wh-*.log; then
    pass delta_pull_tp2_wire_bytes_below_full
else
    fail delta_pull_tp2_wire_bytes_below_full "$(grep -h 'as deltas\|full' "$TMP"/e-tp-*.log | head -3)"
fi

# --- a TP=2 node in place whose held version is corrupted (one byte of put
# 40 of its node plan, on the rank it lands on) before the first delta pull:
# the put's bytes fail the trainer's digest, its chunk is re-fetched in full
# from that trainer rank (the log names put, trainer rank, base and tensor),
# every version right, the node's status and /metrics count it.
serve_local tpc
for r in 0 1; do
    WSYNC_TEST_CORRUPT_HELD=40 bg "$WSYNC" engine --control "$URL" --engine tpc --local-rank $r --local-world 2 \
        --tp 2 --mode in-place --transport tcp --versions 3 --timeout-ms 60000 --dump "$TMP/d-tpc" \
        >"$TMP/e-tpc-$r.log" 2>&1
    eval T$r=$!
done
wait_registered "$URL" tpc
for r in 0 1; do
    bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$FILES" --versions 3 \
        --chunk 256K --wait-engines 1 >"$TMP/t-tpc-$r.log" 2>&1
done
wait $T0
e0=$?
wait $T1
e1=$?
tp_ok=1
tp_equal "$TMP/d-tpc/tpc" 1 2 3 || tp_ok=0
curl -fsS "$URL/metrics" >"$TMP/metrics-tpc.txt"
if [ $e0 = 0 ] && [ $e1 = 0 ] && [ $tp_ok = 1 ] &&
    grep -qh "put 40 (trainer rank [01]) applied as a delta from version 1 failed verification against version 2.s digests (tensor '.*'): re-fetching it in full" \
        "$TMP"/e-tpc-*.log && grep -qh 'version 2: .*; 1 re-fetched in full after a failed check' "$TMP"/e-tpc-*.log &&
    grep -q '^wsync_delta_refetches_total 1$' "$TMP/metrics-tpc.txt"; then
    pass delta_pull_tp2_corrupted_base_refetched_in_full
else
    fail delta_pull_tp2_corrupted_base_refetched_in_full "rc=$e0,$e1 tp_ok=$tp_ok: $(grep -h 'hook\|re-fetch\|version 2' "$TMP"/e-tpc-*.log | head -4)"
fi

# --- a TP=2 node in place into its own tensors, through the sparse GPU image's path on host memory
# (WSYNC_TEST_HOST_FAN_WINDOW: the bytes land straight in the caller's tensors, the image backs none of
# them): every version after the first as deltas, each put's base gathered out of the caller's tensors
# (delta_land.c's split_move), every tensor equal to tp_tool.py's slices (tp_delta_lib.sh).
source "$WSYNC_ROOT/tests/integration/tp_delta_lib.sh"
if [ $ASAN_LIB = 1 ]; then
    for c in engines_exit_0 took_the_sparse_path; do
        skip delta_pull_tp2_into_sparse_$c "libwsync.so is an AddressSanitizer build (make asan): the Python node runs in make test"
    done
else
    tp_delta_node delta_pull_tp2_into_sparse 4 cpu WSYNC_TEST_HOST_FAN_WINDOW=1
    check delta_pull_tp2_into_sparse_took_the_sparse_path \
        grep -q "test hook: the sparse GPU image's path on host memory" "$TMP/delta_pull_tp2_into_sparse-e0.log"
fi
