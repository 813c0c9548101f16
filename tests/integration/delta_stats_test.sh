#!/usr/bin/env bash
# delta_stats_test.sh: `wsync delta stats` on versions written by real AdamW
# steps (tests/tools/adamw_versions.py, a tiny Qwen-shaped model), against a
# count made here with numpy from the files alone: the changed fraction of
# every tensor and in all, and each form's bytes by delta.h's sizes. Then
# the refusals: files of different layouts, and a missing file.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/versions_lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip delta_stats_matches_numpy "no python3 with torch and numpy at $PY"
    exit 0
fi
make_versions 2 --hidden 64 --intermediate 176 --vocab 512 --seq 16 --check ||
    { fail delta_stats_matches_numpy "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
"$WSYNC" delta stats "$TMP/v/v0001.safetensors" "$TMP/v/v0002.safetensors" >"$TMP/stats.txt" 2>&1
rc=$?
check delta_stats_exits_0 [ $rc = 0 ]

# The reference: safetensors read with struct and json, bf16 as uint16.
if $PY - "$TMP/v/v0001.safetensors" "$TMP/v/v0002.safetensors" "$TMP/stats.txt" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.uint16)
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
rows = {}
for line in open(sys.argv[3]):
    f = line.split()
    if f and f[0] != "TENSOR" and not f[0].startswith("total"):
        rows[f[0]] = f
tot_n = tot_c = 0
for name in a:
    n, c = a[name].size, int(np.count_nonzero(a[name] != b[name]))
    tot_n += n; tot_c += c
    full, bitmap, pairs = 32 + 2 * n, 32 + (n + 7) // 8 + 2 * c, 32 + 6 * c
    r = rows[name[:44]]
    assert abs(float(r[1].rstrip("%")) - 100.0 * c / n) < 1e-4 + 1e-9, (name, r[1], c, n)
    assert [int(r[2]), int(r[3]), int(r[4])] == [full, bitmap, pairs], (name, r[2:5], full, bitmap, pairs)
    want = min((full, "full"), (bitmap, "bitmap"), (pairs, "pairs"), key=lambda x: x[0])[1]
    assert r[5] == want, (name, r[5], want)
total = [l for l in open(sys.argv[3]) if l.startswith("total (per tensor)")][0].split()
assert abs(float(total[3].rstrip("%")) - 100.0 * tot_c / tot_n) < 1e-4, (total, tot_c, tot_n)
assert 0 < tot_c < tot_n, "an AdamW step at lr 1e-6 changes some elements, not all"
PY
then pass delta_stats_matches_numpy; else fail delta_stats_matches_numpy "see above"; fi

# A file of another layout, a file that is not there: exit 2, naming why.
$PY - "$TMP/other.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"x": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(8))
PY
"$WSYNC" delta stats "$TMP/v/v0001.safetensors" "$TMP/other.safetensors" >"$TMP/o.txt" 2>&1
rc=$?
grep -q "different layouts" "$TMP/o.txt" || rc="$rc, no reason"
check delta_stats_refuses_other_layout [ "$rc" = 2 ]
"$WSYNC" delta stats "$TMP/v/v0001.safetensors" "$TMP/missing.safetensors" >"$TMP/m.txt" 2>&1
rc=$?
check delta_stats_refuses_missing_file [ $rc = 2 ]
