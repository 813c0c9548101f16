#!/usr/bin/env python3
"""Test helper for engine layouts, stdlib only and independent of wsync's code:
writes Qwen2-shaped and MoE safetensors files, and checks what a TP rank
dumped against the slices computed here from the source file by the rules of
issue 12 (vLLM's names and conventions):

  tp_tool.py qwen PATH SEED        Qwen2-shaped: q/k/v biases, untied lm_head,
                                   vocabulary not a multiple of 64
  tp_tool.py moe PATH SEED         8 experts per layer and a router
  tp_tool.py check SRC DUMP T K    DUMP (rank K of a TP group of T) holds
                                   exactly its slices of SRC
  tp_tool.py target SRC DUMP T.json DUMP holds exactly the destination tensors
                                   of the target in T.json (block copies, any
                                   number of dimensions, stacking)
"""
import os, random, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_tool import SIZES, read, write  # noqa: E402  (the plain safetensors reader/writer)

H, I, KV, V, LAYERS, EXPERTS = 128, 192, 32, 1001, 2, 8


def rand_bytes(rnd, n):
    return rnd.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def make(path, seed, moe):
    rnd = random.Random(seed)
    ts = [("model.embed_tokens.weight", "BF16", [V, H])]
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        ts += [(p + "input_layernorm.weight", "BF16", [H]),
               (p + "self_attn.q_proj.weight", "BF16", [H, H]), (p + "self_attn.q_proj.bias", "BF16", [H]),
               (p + "self_attn.k_proj.weight", "BF16", [KV, H]), (p + "self_attn.k_proj.bias", "BF16", [KV]),
               (p + "self_attn.v_proj.weight", "BF16", [KV, H]), (p + "self_attn.v_proj.bias", "BF16", [KV]),
               (p + "self_attn.o_proj.weight", "BF16", [H, H]),
               (p + "post_attention_layernorm.weight", "F32", [H])]
        if moe:
            ts.append((p + "mlp.gate.weight", "BF16", [EXPERTS, H]))
            for e in range(EXPERTS):
                ts += [(p + f"mlp.experts.{e}.gate_proj.weight", "BF16", [I, H]),
                       (p + f"mlp.experts.{e}.up_proj.weight", "BF16", [I, H]),
                       (p + f"mlp.experts.{e}.down_proj.weight", "BF16", [H, I])]
        else:
            ts += [(p + "mlp.gate_proj.weight", "BF16", [I, H]), (p + "mlp.up_proj.weight", "BF16", [I, H]),
                   (p + "mlp.down_proj.weight", "BF16", [H, I])]
    ts += [("model.norm.weight", "BF16", [H]), ("lm_head.weight", "BF16", [V, H])]
    out = []
    for name, dt, shape in ts:
        n = SIZES[dt]
        for d in shape:
            n *= d
        out.append((name, dt, shape, rand_bytes(rnd, n)))
    write(path, out, {"format": "pt", "seed": str(seed)})


# --- tensors as (dtype, shape, bytes), row-major -----------------------------

def rows(t, a, b):
    """Rows [a, b) of dim 0."""
    dt, shape, data = t
    row = len(data) // shape[0] if shape[0] else 0
    return (dt, [b - a] + shape[1:], data[a * row:b * row])


def cols(t, a, b):
    """Columns [a, b) of dim 1 of a 2-D tensor."""
    dt, shape, data = t
    es = SIZES[dt]
    r, c = shape
    out = b"".join(data[(i * c + a) * es:(i * c + b) * es] for i in range(r))
    return (dt, [r, b - a], out)


def cat0(parts):
    return (parts[0][0], [sum(p[1][0] for p in parts)] + parts[0][1][1:], b"".join(p[2] for p in parts))


def chunk(n, T, K, what):
    if n % T:
        raise SystemExit(f"{what}: {n} does not divide by {T}")
    return K * n // T, (K + 1) * n // T


def expected(src, T, K):
    """The destination tensors of rank K of T, by the rules, from src."""
    out, done = {}, set()
    for name in src:
        if name in done:
            continue
        t = src[name]
        m = re.fullmatch(r"(.*)\.self_attn\.(q|k|v)_proj\.(weight|bias)", name)
        if m:
            base, kind = m.group(1), m.group(3)
            parts = []
            for p in "qkv":
                n2 = f"{base}.self_attn.{p}_proj.{kind}"
                done.add(n2)
                a, b = chunk(src[n2][1][0], T, K, n2)
                parts.append(rows(src[n2], a, b))
            out[f"{base}.self_attn.qkv_proj.{kind}"] = cat0(parts)
            continue
        m = re.fullmatch(r"(.*)\.mlp\.(gate|up)_proj\.weight", name)
        if m:
            base = m.group(1)
            parts = []
            for p in ("gate", "up"):
                n2 = f"{base}.mlp.{p}_proj.weight"
                done.add(n2)
                a, b = chunk(src[n2][1][0], T, K, n2)
                parts.append(rows(src[n2], a, b))
            out[f"{base}.mlp.gate_up_proj.weight"] = cat0(parts)
            continue
        if re.fullmatch(r".*\.(self_attn\.o_proj|mlp\.down_proj)\.weight", name):
            a, b = chunk(t[1][1], T, K, name)
            out[name] = cols(t, a, b)
            continue
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            dt, shape, data = t
            vp = (shape[0] + 63) // 64 * 64
            a, b = chunk(vp, T, K, name)
            row = len(data) // shape[0]
            held = data[a * row:min(b, shape[0]) * row] if a < shape[0] else b""
            out[name] = (dt, [b - a] + shape[1:], held + b"\0" * ((b - a) * row - len(held)))
            continue
        m = re.fullmatch(r"(.*)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight", name)
        if m:
            base = m.group(1)
            E = 0
            while f"{base}.mlp.experts.{E}.gate_proj.weight" in src:
                E += 1
            a, b = chunk(E, T, K, f"{base}.mlp.experts")
            w13, w2 = [], []
            for e in range(E):
                for p in ("gate", "up", "down"):
                    done.add(f"{base}.mlp.experts.{e}.{p}_proj.weight")
            for e in range(a, b):
                g, u = src[f"{base}.mlp.experts.{e}.gate_proj.weight"], src[f"{base}.mlp.experts.{e}.up_proj.weight"]
                w13.append(cat0([g, u]))
                w2.append(src[f"{base}.mlp.experts.{e}.down_proj.weight"])
            out[f"{base}.mlp.experts.w13_weight"] = (w13[0][0], [b - a] + w13[0][1], b"".join(x[2] for x in w13))
            out[f"{base}.mlp.experts.w2_weight"] = (w2[0][0], [b - a] + w2[0][1], b"".join(x[2] for x in w2))
            continue
        out[name] = t   # replicated: norms, the router, scalars
    return out


def check(src_path, dump_path, T, K):
    src, _ = read(src_path)
    got, _ = read(dump_path)
    return compare(expected(src, T, K), got, dump_path)


def by_target(src, target):
    """A target's destination tensors: each block copies the box
    [src_start, src_stop) of its source to dst_start (the destination may have
    more leading dimensions); bytes no block writes are zero."""
    out = {}
    for d in target["tensors"]:
        dt, shape = d["dtype"], d["shape"]
        es = SIZES[dt]
        count = 1
        for x in shape:
            count *= x
        buf = bytearray(es * count)
        strides = [es] * len(shape)
        for k in range(len(shape) - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        for b in d["blocks"]:
            sdt, sshape, sdata = src[b["src"]]
            sstr = [es] * len(sshape)
            for k in range(len(sshape) - 2, -1, -1):
                sstr[k] = sstr[k + 1] * sshape[k + 1]
            lead = len(shape) - len(sshape)
            a, z, ds = b["src_start"], b["src_stop"], b["dst_start"]

            def walk(dim, soff, doff):
                if dim == len(sshape) - 1 or not sshape:
                    n = (z[dim] - a[dim]) * es if sshape else es
                    s0 = soff + (a[dim] * sstr[dim] if sshape else 0)
                    d0 = doff + (ds[lead + dim] * strides[lead + dim] if sshape else 0)
                    buf[d0:d0 + n] = sdata[s0:s0 + n]
                    return
                for i in range(a[dim], z[dim]):
                    walk(dim + 1, soff + i * sstr[dim],
                         doff + (ds[lead + dim] + i - a[dim]) * strides[lead + dim])
            walk(0, 0, sum(ds[k] * strides[k] for k in range(lead)))
        out[d["name"]] = (dt, shape, bytes(buf))
    return out


def compare(want, got, where):
    bad = []
    if sorted(want) != sorted(got):
        bad.append(f"names differ: missing {sorted(set(want) - set(got))[:4]}, extra {sorted(set(got) - set(want))[:4]}")
    for name in sorted(set(want) & set(got)):
        if want[name][0] != got[name][0] or list(want[name][1]) != list(got[name][1]):
            bad.append(f"{name}: {got[name][0]} {got[name][1]}, want {want[name][0]} {want[name][1]}")
        elif want[name][2] != got[name][2]:
            bad.append(f"{name}: bytes differ")
    for b in bad[:10]:
        print(f"{where}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd in ("qwen", "moe"):
        make(sys.argv[2], int(sys.argv[3]), cmd == "moe")
    elif cmd == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
    elif cmd == "target":
        import json
        with open(sys.argv[4]) as f:
            tgt = json.load(f)
        sys.exit(compare(by_target(read(sys.argv[2])[0], tgt), read(sys.argv[3])[0], sys.argv[3]))
    else:
        print(__doc__)
        sys.exit(2)
