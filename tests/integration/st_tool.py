#!/usr/bin/env python3
"""Test helper, stdlib only: writes safetensors files the way the reference
implementation lays them out, and compares two files tensor by tensor.

  st_tool.py make PREFIX N      -> PREFIX0.safetensors .. PREFIX{N-1}.safetensors
  st_tool.py compare A B        -> exit 0 when names, dtypes, shapes, bytes match
"""
import json, random, struct, sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}

def write(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)

def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], raw[base + a:base + b])
    return out, header.get("__metadata__")

def make(prefix, n):
    shapes = [("model.embed_tokens.weight", "BF16", [512, 64]), ("model.layers.0.attn.q.weight", "F32", [64, 64]),
              ("model.layers.0.norm.weight", "F16", [63]), ("scale", "F64", []), ("empty", "I32", [0, 5]),
              ("mask", "BOOL", [7, 3]), ("ids", "I64", [33]), ("fp8", "F8_E4M3", [129]),
              ("model.layers.1.mlp.weight", "BF16", [128, 300]), ("lm_head.weight", "BF16", [512, 64])]
    for i in range(n):
        rnd = random.Random(1000 + i)
        tensors = []
        for name, dtype, shape in shapes:
            count = 1
            for d in shape:
                count *= d
            tensors.append((name, dtype, shape, bytes(rnd.getrandbits(8) for _ in range(count * SIZES[dtype]))))
        write(f"{prefix}{i}.safetensors", tensors, {"format": "pt", "step": str(i)})
        print(f"{prefix}{i}.safetensors")

def compare(a, b):
    ta, _ = read(a)
    tb, _ = read(b)
    if set(ta) != set(tb):
        print(f"tensor names differ: {sorted(set(ta) ^ set(tb))}", file=sys.stderr)
        return 1
    for name in ta:
        if ta[name] != tb[name]:
            print(f"tensor {name} differs", file=sys.stderr)
            return 1
    return 0

if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
