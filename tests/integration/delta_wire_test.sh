#!/usr/bin/env bash
# delta_wire_test.sh: the delta wire form (common/delta/delta.h) against a
# decoder and an encoder written here in Python from the header's table
# alone (struct and numpy). Files with bf16, fp32, FP8 and odd-length u8
# tensors at different densities; pieces of 4 KiB, so some straddle tensors
# of different widths (width 1). wsync's wires decode here to the new
# image, piece by piece, each in the smallest form; Python's wires (pairs
# for every piece) apply in wsync to the new tensors; a wire with one bitmap
# bit flipped is refused (exit 2) naming the popcount.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import numpy' 2>/dev/null; then
    skip delta_wire_python_decodes_wsync "no numpy at $PY"
    exit 0
fi
$PY - "$TMP" <<'PY'
import json, struct, sys
import numpy as np
out, rng = sys.argv[1], np.random.default_rng(7)
specs = [("a", "BF16", 2, (1000, 37), 0.02), ("b", "F32", 4, (513,), 0.5), ("c", "U8", 1, (77,), 1.0),
         ("d", "BF16", 2, (3, 5), 0.0), ("e", "F8_E4M3", 1, (4099,), 0.01), ("f", "BF16", 2, (2048,), 0.001), ("g", "BF16", 2, (6000,), 1.0)]
def write(path, arrays):
    header, off, blobs = {}, 0, []
    for (name, dt, w, shape, _), raw in zip(specs, arrays):
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw); blobs.append(raw)
    h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
old, new = [], []
for name, dt, w, shape, dens in specs:
    n = int(np.prod(shape))
    a = rng.integers(0, 256, n * w, dtype=np.uint8)
    b = a.copy().reshape(n, w)
    hit = rng.random(n) < dens
    b[hit, 0] ^= rng.integers(1, 256, int(hit.sum()), dtype=np.uint8)
    old.append(a.tobytes()); new.append(b.tobytes())
write(out + "/old.safetensors", old); write(out + "/new.safetensors", new)
PY
"$WSYNC" inspect --json "$TMP/old.safetensors" >"$TMP/m.json" &&
"$WSYNC" delta encode --chunk 4K "$TMP/old.safetensors" "$TMP/new.safetensors" "$TMP/w.bin" >"$TMP/enc.txt" 2>&1
check delta_encode_exits_0 [ $? = 0 ]

cat >"$TMP/ref.py" <<'PY'
import json, struct, sys
import numpy as np
HDR = struct.Struct("<4sBBBBQQQ")  # magic, form, width, index width, reserved, piece bytes, changed, payload
WIDTH = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}
def load(path, m):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    img = bytearray(m["image_size"])
    for t in m["tensors"]:
        s, e = h[t["name"]]["data_offsets"]
        img[t["offset"]:t["offset"] + t["size"]] = b[8 + n + s:8 + n + e]
    return img
def pieces(m, chunk):
    for off in range(0, m["image_size"], chunk):
        end = min(off + chunk, m["image_size"])
        ws = {WIDTH[t["dtype"]] for t in m["tensors"]
              if t["size"] and t["offset"] < end and t["offset"] + t["size"] > off}
        w = ws.pop() if len(ws) == 1 else 1
        yield off, end, (w if (end - off) % w == 0 else 1)
def decode(wire, base):
    magic, form, w, iw, res, plen, c, pay = HDR.unpack_from(wire)
    assert magic == b"WSD1" and res == 0 and plen == len(base) and len(wire) == 32 + pay, (magic, plen, pay)
    n, body, out = plen // w, wire[32:], np.frombuffer(bytes(base), dtype=np.uint8).reshape(-1, w).copy()
    if form == 0:
        return bytes(body), form, w, c
    if form == 1:
        bits = np.unpackbits(np.frombuffer(body[:(n + 7) // 8], dtype=np.uint8), bitorder="little")[:n]
        idx = np.nonzero(bits)[0]
        vals = np.frombuffer(body[(n + 7) // 8:], dtype=np.uint8).reshape(-1, w)
    else:
        idx = np.frombuffer(body[:c * iw], dtype=np.uint32 if iw == 4 else np.uint64)
        vals = np.frombuffer(body[c * iw:], dtype=np.uint8).reshape(-1, w)
    assert len(idx) == c == len(vals), (len(idx), c, len(vals))
    out[idx] = vals
    return out.tobytes(), form, w, c
PY

# wsync's wires, decoded here.
if $PY - "$TMP" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1]); from ref import *
tmp = sys.argv[1]
m = json.load(open(tmp + "/m.json"))
old, new = load(tmp + "/old.safetensors", m), load(tmp + "/new.safetensors", m)
wire, at, forms = open(tmp + "/w.bin", "rb").read(), 0, set()
for off, end, w in pieces(m, 4096):
    pay = struct.unpack_from("<Q", wire, at + 24)[0]
    got, form, ww, c = decode(wire[at:at + 32 + pay], old[off:end])
    assert got == bytes(new[off:end]), ("piece", off)
    assert ww == w, ("width", off, ww, w)
    n = (end - off) // w
    sizes = [n * w, (n + 7) // 8 + c * w, c * (4 + w)]
    assert sizes[form] == min(sizes), ("not the smallest form", off, form, sizes)
    forms.add(form); at += 32 + pay
assert at == len(wire) and forms == {0, 1, 2}, (at, len(wire), forms)
PY
then pass delta_wire_python_decodes_wsync; else fail delta_wire_python_decodes_wsync "see above"; fi

# Python's wires (pairs for every piece), applied by wsync.
$PY - "$TMP" <<'PY'
import json, struct, sys
import numpy as np
sys.path.insert(0, sys.argv[1]); from ref import *
tmp = sys.argv[1]
m = json.load(open(tmp + "/m.json"))
old, new = load(tmp + "/old.safetensors", m), load(tmp + "/new.safetensors", m)
out = bytearray()
for off, end, w in pieces(m, 4096):
    a = np.frombuffer(bytes(old[off:end]), dtype=np.uint8).reshape(-1, w)
    b = np.frombuffer(bytes(new[off:end]), dtype=np.uint8).reshape(-1, w)
    idx = np.nonzero((a != b).any(axis=1))[0].astype(np.uint32)
    body = idx.tobytes() + b[idx].tobytes()
    out += HDR.pack(b"WSD1", 2, w, 4, 0, end - off, len(idx), len(body)) + body
open(tmp + "/py.bin", "wb").write(out)
PY
"$WSYNC" delta apply --chunk 4K "$TMP/old.safetensors" "$TMP/py.bin" "$TMP/applied.safetensors" >"$TMP/app.txt" 2>&1
rc=$?
if [ $rc = 0 ] && $PY - "$TMP" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1]); from ref import *
tmp = sys.argv[1]
m = json.load(open(tmp + "/m.json"))
assert load(tmp + "/applied.safetensors", m) == load(tmp + "/new.safetensors", m)
PY
then pass delta_wire_wsync_applies_python; else fail delta_wire_wsync_applies_python "rc $rc: $(cat "$TMP/app.txt")"; fi

# One bitmap bit flipped in wsync's wire: refused, naming the popcount.
$PY - "$TMP" <<'PY'
import struct, sys
tmp = sys.argv[1]
w, at = bytearray(open(tmp + "/w.bin", "rb").read()), 0
while w[at + 4] != 1:
    at += 32 + struct.unpack_from("<Q", w, at + 24)[0]
w[at + 32] ^= 1
open(tmp + "/bad.bin", "wb").write(w)
PY
"$WSYNC" delta apply --chunk 4K "$TMP/old.safetensors" "$TMP/bad.bin" "$TMP/bad.safetensors" >"$TMP/bad.txt" 2>&1
rc=$?
grep -q "bitmap marks" "$TMP/bad.txt" && [ ! -e "$TMP/bad.safetensors" ] || rc="$rc: $(cat "$TMP/bad.txt")"
check delta_wire_refuses_flipped_bit [ "$rc" = 2 ]
