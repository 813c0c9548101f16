#!/usr/bin/env bash
# inspect_test.sh: `wsync inspect` on safetensors files written by python the
# way the reference implementation lays them out (not by wsync), and on
# malformed ones: table, --json, digest, and exit codes (2 or 1, never a signal).
. "$(dirname "$0")/lib.sh"

# gen.py: writes good.safetensors (every dtype, scalar, empty tensor,
# metadata), same_layout.safetensors (same layout, other bytes),
# other_layout.safetensors, and the malformed files bad_<case>.safetensors;
# prints the expected image layout of good.safetensors as JSON.
cat >"$TMP/gen.py" <<'EOF'
import json, struct, sys, os
out = sys.argv[1]
BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
        "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
        "F64": 64, "I64": 64, "U64": 64, "C64": 64}

def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8

def layout(tensors):
    # As the reference serializer orders them: larger dtypes first, then name.
    return sorted(tensors, key=lambda t: (-BITS[t[1]], t[0]))

def write(path, tensors, metadata=None, seed=0):
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for i, (name, dtype, shape) in enumerate(layout(tensors)):
        n = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        blobs.append(bytes((seed + i * 7 + k) & 0xff for k in range(n)))
        off += n
    raw_header(path, json.dumps(header, separators=(",", ":")).encode(), b"".join(blobs))

def raw_header(path, h, data, pad=True):
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)

good = [(f"model.layers.{i}.{dt.lower()}.weight", dt, [4, 6]) for i, dt in enumerate(BITS)]
good += [("model.scale", "F32", []), ("model.empty", "BF16", [0, 16]), ("lm_head.weight", "BF16", [33, 7])]
write(f"{out}/good.safetensors", good, {"format": "pt", "step": "7"})
write(f"{out}/same_layout.safetensors", good, {"format": "pt", "step": "8"}, seed=99)
write(f"{out}/other_layout.safetensors", good[:-1] + [("lm_head.weight", "BF16", [7, 33])])

t = lambda dt, shape, a, b: {"dtype": dt, "shape": shape, "data_offsets": [a, b]}
def bad(case, header, data_len, pad=True):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    raw_header(f"{out}/bad_{case}.safetensors", h, bytes(data_len), pad)
bad("hole", {"a": t("U8", [2], 0, 2), "b": t("U8", [4], 4, 8)}, 8)
bad("overlap", {"a": t("U8", [6], 0, 6), "b": t("U8", [4], 4, 8)}, 8)
bad("size", {"w": t("F32", [3], 0, 8)}, 8)
bad("dtype", {"w": t("F128", [2], 0, 8)}, 8)
bad("shape", {"w": t("F32", [2, -1], 0, 8)}, 8)
bad("range", {"w": t("U8", [16], 0, 16)}, 8)
bad("notjson", b"{\"w\": {", 0)
bad("array", [1, 2], 0)
bad("entry", {"w": 5}, 0)
bad("nodtype", {"w": {"shape": [2], "data_offsets": [0, 2]}}, 2)
bad("metadata", {"__metadata__": {"step": 3}, "w": t("U8", [2], 0, 2)}, 2)
bad("duplicate", b'{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', 4)
with open(f"{out}/bad_short.safetensors", "wb") as f:
    f.write(b"\x05\x00")
with open(f"{out}/bad_hlen.safetensors", "wb") as f:
    f.write(struct.pack("<Q", 1 << 20) + b"{}")
with open(f"{out}/bad_absurd.safetensors", "wb") as f:
    f.write(struct.pack("<Q", 1 << 62) + b"{}      ")

# The image layout wsync must report: file order, each aligned to 256.
exp, off = [], 0
for name, dtype, shape in layout(good):
    off = (off + 255) // 256 * 256
    exp.append({"name": name, "dtype": dtype, "shape": shape, "offset": off, "size": nbytes(dtype, shape)})
    off += nbytes(dtype, shape)
print(json.dumps({"tensors": exp, "image_size": (off + 255) // 256 * 256}))
EOF
python3 "$TMP/gen.py" "$TMP" >"$TMP/expected.json" || { fail generate_files "gen.py failed"; exit 1; }

# --- a good file: table and --json ------------------------------------------
out=$("$WSYNC" inspect "$TMP/good.safetensors" 2>&1); rc=$?
check inspect_good_exits_0 [ $rc = 0 ]
cat >"$TMP/check_table.py" <<'EOF'
import json, sys
exp = json.load(open(sys.argv[1]))
lines = sys.stdin.read().splitlines()
rows = {l.split()[0]: l for l in lines[1:] if l and not l[0].isdigit()}
bad = []
for t in exp["tensors"]:
    r = rows.get(t["name"])
    shape = "[" + ", ".join(map(str, t["shape"])) + "]"
    if r is None:
        bad.append("missing " + t["name"]); continue
    cols = r.split()
    if cols[1] != t["dtype"] or shape not in r or cols[-2] != str(t["size"]) or cols[-1] != str(t["offset"]):
        bad.append("row " + r)
summary = lines[-1]
if f"{len(exp['tensors'])} tensors" not in summary or f"({exp['image_size']} bytes" not in summary:
    bad.append("summary " + summary)
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF
why=$(python3 "$TMP/check_table.py" "$TMP/expected.json" <<<"$out")
check inspect_table_matches_reference_layout [ -z "$why" ]
[ -z "$why" ] || echo "    $why"

digest_of() { "$WSYNC" inspect "$1" | tail -1 | sed -n 's/.*manifest digest \([0-9a-f]\{32\}\)$/\1/p'; }
d_good=$(digest_of "$TMP/good.safetensors")
d_same=$(digest_of "$TMP/same_layout.safetensors")
d_other=$(digest_of "$TMP/other_layout.safetensors")
check inspect_prints_a_32_hex_digest [ ${#d_good} = 32 ]
check digest_same_for_same_layout_other_bytes [ "$d_good" = "$d_same" ]
check digest_differs_for_other_layout [ -n "$d_other" -a "$d_good" != "$d_other" ]

"$WSYNC" inspect --json "$TMP/good.safetensors" >"$TMP/good.json" 2>"$TMP/json.err"; rc=$?
check inspect_json_exits_0 [ $rc = 0 ]
check inspect_json_matches_reference_layout python3 - "$TMP/good.json" "$TMP/expected.json" <<'EOF'
import json, sys
got, exp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
keys = ("name", "dtype", "shape", "offset", "size")
ok = got["image_size"] == exp["image_size"] and got["align"] == 256 and \
    [{k: t[k] for k in keys} for t in got["tensors"]] == exp["tensors"] and \
    got["metadata"] == {"format": "pt", "step": "7"}
sys.exit(0 if ok else 1)
EOF

# --- malformed files: exit 2, "wsync inspect: <file>: <problem>" -------------
expect_bad() { # case needle
    local f="$TMP/bad_$1.safetensors" err rc
    err=$("$WSYNC" inspect "$f" 2>&1 >/dev/null); rc=$?
    if [ $rc != 2 ]; then fail "malformed_$1" "exit $rc (want 2): $err"
    elif [[ "$err" != "wsync inspect: $f: "*"$2"* ]]; then fail "malformed_$1" "message: $err"
    else pass "malformed_$1"; fi
}
expect_bad hole "a hole of 2 bytes before tensor 'b'"
expect_bad overlap "tensor 'b' (bytes 4..8) overlaps tensor 'a'"
expect_bad size "tensor 'w': shape [3] x F32 needs 12 bytes"
expect_bad dtype "tensor 'w': unknown dtype 'F128'"
expect_bad shape "tensor 'w': shape[1]"
expect_bad range "tensor 'w': data_offsets [0, 16] run past the data section"
expect_bad notjson "header is not valid JSON"
expect_bad array "header is not a JSON object"
expect_bad entry "tensor 'w': entry is not an object"
expect_bad nodtype "tensor 'w': missing dtype"
expect_bad metadata "__metadata__ value 'step' is not a string"
expect_bad duplicate "duplicate"
expect_bad short "shorter than the 8-byte header length"
expect_bad hlen "runs past the end of the file"
expect_bad absurd "is absurd"

# --- missing files and bad usage: a clear message, exit 2 (bad input) as for a
# malformed file, never a signal ----
err=$("$WSYNC" inspect "$TMP/nope.safetensors" 2>&1); rc=$?
check missing_file_exits_2 [ $rc = 2 ]
check missing_file_message_names_it grep -q "nope.safetensors: No such file" <<<"$err"
err=$("$WSYNC" inspect "$TMP" 2>&1); rc=$?
check directory_is_refused_with_2 [ $rc = 2 ]
err=$("$WSYNC" plan "$TMP/nope.safetensors" 2>&1); rc=$?
check plan_missing_file_exits_2 [ $rc = 2 ]
"$WSYNC" inspect >/dev/null 2>&1; rc=$?
check no_argument_is_a_usage_error [ $rc = 2 ]
