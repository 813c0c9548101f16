#!/usr/bin/env python3
"""fp8_tool.py: issue 29's FP8 wire tests, in plain Python (no torch, no numpy).

  fp8_tool.py gen DIR                  writes DIR/ds.safetensors: a DeepSeek-shaped MoE in BF16 (MLA and
                                       q/k/v attention, a dense MLP, 8 experts, a router), values over many
                                       binades, a zero block, a huge value, partial blocks
  fp8_tool.py check SRC DUMPDIR FORM [T]
                                       every FP8 tensor and scale of DUMPDIR/rank<K>/v1.safetensors (K < T,
                                       default 2) against a quantizer written here from docs/FP8.md in plain
                                       Python floats (IEEE double: an fp32 quotient rounded from it is the
                                       fp32 division), not through wsync; FORM fp32 or ue8m0
  fp8_tool.py nan SRC OUT TENSOR ROW COL
                                       writes OUT: SRC with a BF16 NaN at (ROW, COL) of the 2-D TENSOR
"""
import json, math, random, struct, sys


def gen(out_dir):
    random.seed(29)
    H, Q, KV, I, EI, E, V = 256, 256, 256, 256, 128, 8, 500
    def bf16_bits(x):
        b = struct.unpack("<I", struct.pack("<f", x))[0]
        return ((b + 0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff
    t = {}
    def w(name, r, c, mag=None):
        out = []
        for i in range(r):
            m = 10.0 ** random.uniform(-4, 2) if mag is None else mag
            out.extend(bf16_bits(random.gauss(0, 1) * m) for _ in range(c))
        t[name] = ([r, c], out)
    def vec(name, n): t[name] = ([n], [bf16_bits(random.random()) for _ in range(n)])
    w("model.embed_tokens.weight", V, H, 1.0)
    for l in range(2):
        p = "model.layers.%d." % l
        vec(p + "input_layernorm.weight", H)
        if l == 0:
            w(p + "self_attn.q_a_proj.weight", 200, H); w(p + "self_attn.kv_a_proj_with_mqa.weight", 192, H, 1e-3)
            w(p + "self_attn.q_b_proj.weight", Q, 200); w(p + "self_attn.kv_b_proj.weight", Q, 192)
        else:
            w(p + "self_attn.q_proj.weight", Q, H); w(p + "self_attn.k_proj.weight", KV, H)
            w(p + "self_attn.v_proj.weight", KV, H, 1e-30)
        w(p + "self_attn.o_proj.weight", H, Q)
        vec(p + "post_attention_layernorm.weight", H)
        if l == 0:
            w(p + "mlp.gate_proj.weight", I, H); w(p + "mlp.up_proj.weight", I, H); w(p + "mlp.down_proj.weight", H, I)
        else:
            w(p + "mlp.gate.weight", E, H)
            for e in range(E):
                w(p + "mlp.experts.%d.gate_proj.weight" % e, EI, H); w(p + "mlp.experts.%d.up_proj.weight" % e, EI, H)
                w(p + "mlp.experts.%d.down_proj.weight" % e, H, EI)
            d = t[p + "mlp.experts.2.down_proj.weight"][1]
            d[:128 * EI] = [0] * (128 * EI)                      # a zero block: scale 1
            t[p + "mlp.experts.5.up_proj.weight"][1][3 * H + 7] = bf16_bits(1e38)
    vec("model.norm.weight", H)
    w("lm_head.weight", V, H, 1.0)
    def save(path, tensors):
        header, blobs, off = {}, [], 0
        for k, (shape, bits) in tensors.items():
            raw = struct.pack("<%dH" % len(bits), *bits)
            header[k] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(raw)]}
            blobs.append(raw); off += len(raw)
        h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(x) for x in blobs]
    save(out_dir + "/ds.safetensors", t)


def check(argv):
    # The reference: SRC DUMPDIR FORM [T]: every FP8 tensor and scale of every
    # rank's dump against a quantizer written here from docs/FP8.md in plain
    # Python floats (IEEE double: an fp32 quotient rounded from it is the fp32
    # division), not through wsync.
    src_path, dump, form = argv[0], argv[1], argv[2]
    T = int(argv[3]) if len(argv) > 3 else 2
    def load(path):
        raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n]); base = 8 + n; out = {}
        for k, v in hdr.items():
            if k == "__metadata__": continue
            a, b = v["data_offsets"]; out[k] = (v["dtype"], v["shape"], raw[base + a:base + b])
        return out
    def f32(x): return struct.unpack("<f", struct.pack("<f", x))[0]
    def e4m3(y):
        neg = math.copysign(1.0, y) < 0; a = abs(y)
        if a >= 448.0: code = 0x7e
        else:
            m, e = math.frexp(a)
            E = max(e - 1, -6) if a > 0 else -6
            q = 2.0 ** (E - 3); v = round(a / q) * q           # round(): half to even
            if v == 0: code = 0
            elif v < 2.0 ** -6: code = int(v / 2.0 ** -9)
            else:
                _, ve = math.frexp(v); code = (ve - 1 + 7) * 8 + int(round((v / 2.0 ** (ve - 1) - 1) * 8))
        return code | (0x80 if neg else 0)
    src = load(src_path)
    def floats(name):
        dt, shape, raw = src[name]
        bits = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return shape, [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bits]
    cache = {}
    def quant(name):
        """codes (bytearray R*C) and scales (list, SR*SC) of a 2-D source tensor on its own 128 grid."""
        if name in cache: return cache[name]
        (R, C), x = floats(name)
        SR, SC = (R + 127) // 128, (C + 127) // 128
        q = bytearray(R * C); s = [0.0] * (SR * SC)
        for bi in range(SR):
            for bj in range(SC):
                rs, cs = range(bi * 128, min(R, bi * 128 + 128)), range(bj * 128, min(C, bj * 128 + 128))
                amax = max(abs(x[r * C + c]) for r in rs for c in cs)
                if math.isnan(amax) or math.isinf(amax): raise SystemExit("NaN in " + name)
                sc = 1.0 if amax == 0 else f32(amax / 448.0)
                if form == "ue8m0" and amax != 0:
                    m, e = math.frexp(sc); sc = sc if m == 0.5 else 2.0 ** e
                s[bi * SC + bj] = sc
                for r in rs:
                    for c in cs: q[r * C + c] = e4m3(f32(x[r * C + c] / sc))
        cache[name] = (R, C, q, s)
        return cache[name]
    # a destination: (rows x cols codes as list of row bytes, scale rows as lists)
    def whole(name):
        R, C, q, s = quant(name); SC = (C + 127) // 128
        return [q[r * C:(r + 1) * C] for r in range(R)], [s[i * SC:(i + 1) * SC] for i in range(len(s) // SC)]
    def rows(name, K):
        qr, sr = whole(name); n, m = len(qr) // T, len(sr) // T
        return qr[K * n:(K + 1) * n], sr[K * m:(K + 1) * m]
    def cols(name, K):
        qr, sr = whole(name); n, m = len(qr[0]) // T, len(sr[0]) // T
        return [r[K * n:(K + 1) * n] for r in qr], [r[K * m:(K + 1) * m] for r in sr]
    def cat(*parts): return [r for p in parts for r in p[0]], [r for p in parts for r in p[1]]
    bad, nt = [], 0
    L0, L1 = "model.layers.0.", "model.layers.1."
    for K in range(T):
        want = {}
        want[L0 + "self_attn.q_a_proj.weight"] = whole(L0 + "self_attn.q_a_proj.weight")
        want[L0 + "self_attn.kv_a_proj_with_mqa.weight"] = whole(L0 + "self_attn.kv_a_proj_with_mqa.weight")
        want[L0 + "self_attn.q_b_proj.weight"] = rows(L0 + "self_attn.q_b_proj.weight", K)
        want[L0 + "self_attn.kv_b_proj.weight"] = rows(L0 + "self_attn.kv_b_proj.weight", K)
        want[L1 + "self_attn.qkv_proj.weight"] = cat(*[rows(L1 + "self_attn.%s_proj.weight" % p, K) for p in "qkv"])
        for p in (L0, L1): want[p + "self_attn.o_proj.weight"] = cols(p + "self_attn.o_proj.weight", K)
        want[L0 + "mlp.gate_up_proj.weight"] = cat(rows(L0 + "mlp.gate_proj.weight", K), rows(L0 + "mlp.up_proj.weight", K))
        want[L0 + "mlp.down_proj.weight"] = cols(L0 + "mlp.down_proj.weight", K)
        per = 8 // T; ex = range(K * per, (K + 1) * per)
        want[L1 + "mlp.experts.w13_weight"] = cat(*[cat(whole(L1 + "mlp.experts.%d.gate_proj.weight" % e),
                                                        whole(L1 + "mlp.experts.%d.up_proj.weight" % e)) for e in ex])
        want[L1 + "mlp.experts.w2_weight"] = cat(*[whole(L1 + "mlp.experts.%d.down_proj.weight" % e) for e in ex])
        got = load("%s/rank%d/v1.safetensors" % (dump, K))
        for name, (qr, sr) in want.items():
            g, gs = got.get(name), got.get(name + "_scale_inv")
            nt += 1
            if g is None or gs is None or g[0] != "F8_E4M3" or gs[0] != "F32":
                bad.append("rank %d: %s: %s / %s" % (K, name, g and g[:2], gs and gs[:2])); continue
            wq = b"".join(bytes(r) for r in qr); ws = b"".join(struct.pack("<%df" % len(r), *r) for r in sr)
            if gs[2] != ws: bad.append("rank %d: %s: scales differ" % (K, name))
            if g[2] != wq:
                i = next(i for i in range(len(wq)) if i >= len(g[2]) or g[2][i] != wq[i])
                bad.append("rank %d: %s: %d codes differ, first at byte %d: wsync %02x, reference %02x" % (
                    K, name, sum(a != b for a, b in zip(g[2], wq)), i, g[2][i] if i < len(g[2]) else -1, wq[i]))
        for name in (L1 + "mlp.gate.weight", "model.norm.weight", L0 + "input_layernorm.weight"):
            if got[name][0] != "BF16" or got[name][2] != src[name][2]: bad.append("rank %d: %s: BF16 changed" % (K, name))
        fp8 = sorted(k for k, v in got.items() if v[0] == "F8_E4M3")
        if fp8 != sorted(want): bad.append("rank %d: FP8 tensors %s" % (K, fp8))
    print("\n".join(bad) if bad else "ok: %d FP8 tensors and their scales" % nt)
    return 1 if bad else 0


def nan(src, out, name, row, col):
    raw = bytearray(open(src, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    v = json.loads(raw[8:8 + n])[name]
    at = 8 + n + v["data_offsets"][0] + 2 * (row * v["shape"][1] + col)
    raw[at:at + 2] = struct.pack("<H", 0x7fc0)
    open(out, "wb").write(raw)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2:]))
    elif len(sys.argv) == 7 and sys.argv[1] == "nan":
        nan(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(__doc__)
