#!/usr/bin/env bash
# delta_bases_test.sh: a trainer rank keeping K versions as delta bases
# (the setting delta_bases, docs/DELTA.md) serves a node two versions
# behind as deltas when K = 2, and in full pieces when K = 1.
# tests/python/delta_bases.py drives a wsync.Publisher and a wsync.Receiver
# in one process (so no timing decides which versions the trainer still
# holds): versions from real AdamW steps (adamw_versions.py), the receiver
# pulling 1, 3, 5 (each two behind the one it holds) and 6, every tensor's
# bytes equal to the file it was published from at every pull.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/versions_lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip delta_bases_2_two_behind_gets_deltas "no python3 with torch and numpy at $PY"
    skip delta_bases_1_two_behind_gets_full_pieces "no python3 with torch and numpy at $PY"
    exit 0
fi
if nm -D "${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" 2>/dev/null | grep -q ' U __asan_init'; then
    skip delta_bases_2_two_behind_gets_deltas "libwsync.so is an AddressSanitizer build (make asan): runs in make test"
    skip delta_bases_1_two_behind_gets_full_pieces "libwsync.so is an AddressSanitizer build (make asan): runs in make test"
    exit 0
fi
make_versions 5 || { fail delta_bases_2_two_behind_gets_deltas "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }

# run K: the script against its own control endpoint, trainers keeping K bases.
run() {
    serve_local "$1"
    (cd "$WSYNC_ROOT" && WSYNC_DELTA_BASES=$1 WSYNC_LOG=info PYTHONPATH=python \
        WSYNC_LIB="${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" \
        timeout 120 $PY tests/python/delta_bases.py "$URL" "$TMP/v" >"$TMP/k$1.log" 2>&1)
}

# judge LOG WANT3 WANT5: pulls 3 and 5 came as deltas (1) or full (0); 1 full, 6 deltas.
judge() {
    $PY - "$@" <<'PY'
import json, re, sys
log, want = open(sys.argv[1]).read(), {1: 0, 3: int(sys.argv[2]), 5: int(sys.argv[3]), 6: 1}
got = {int(m[1]): json.loads(m[2]) for m in re.finditer(r"pulled version (\d+): equal, last_pull (.*)", log)}
assert sorted(got) == [1, 3, 5, 6], (sorted(got), log[-800:])
for v, d in sorted(got.items()):
    assert (d["delta_pieces"] > 0) == bool(want[v]) and d["refetched"] == 0, (v, d)
    assert not want[v] or 0 < d["wire_bytes"] < d["saved_bytes"], (v, d)
PY
}

run 2
rc2=$?
if [ $rc2 = 0 ] && judge "$TMP/k2.log" 1 1 &&
    grep -q 'version 3: [1-9][0-9]* pieces as deltas from version 1 ' "$TMP/k2.log" &&
    grep -q 'version 5: [1-9][0-9]* pieces as deltas from version 3 ' "$TMP/k2.log"; then
    pass delta_bases_2_two_behind_gets_deltas
else
    fail delta_bases_2_two_behind_gets_deltas "rc=$rc2: $(grep -h 'pulled\|deltas\|Error\|error' "$TMP/k2.log" | head -4)"
fi
run 1
rc1=$?
if [ $rc1 = 0 ] && judge "$TMP/k1.log" 0 0 &&
    grep -q 'version 3: no trainer rank keeps version 1 as a delta base (their registrations say so' "$TMP/k1.log"; then
    pass delta_bases_1_two_behind_gets_full_pieces
else
    fail delta_bases_1_two_behind_gets_full_pieces "rc=$rc1: $(grep -h 'pulled\|deltas\|Error\|error' "$TMP/k1.log" | head -4)"
fi
