#!/usr/bin/env bash
# FP8 over the wire (issue 29, docs/FP8.md "On the wire"): a DeepSeek-shaped
# MoE file in BF16 (MLA and q/k/v attention, a dense MLP, 8 experts, a
# router), published by 2 trainer ranks with --layout fsdp (shard boundaries
# off the 128-row grid: 200-, 192- and 128-row tensors split at 100, 96, 64,
# so those bands travel as BF16 and the engine quantizes them; the others
# are quantized by the trainer rank holding them), pulled by a node of 2
# ranks with FP8 + TP=2 rules. Every FP8 tensor and scale of both ranks is
# compared bit for bit with a quantizer written here from the definition in
# plain Python floats (no torch, not through wsync); fp32 and UE8M0; a NaN
# refused naming the tensor (in a band a trainer quantizes, and in one the
# engine does); a TP size that cuts a block refused naming it; a corrupted
# FP8 byte caught naming the tensor; an FP8 node, a BF16 TP node and a
# whole-image node pulling the same version side by side; a relayed FP8 node
# bit exact.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
RULES=$WSYNC_ROOT/configs/rules/deepseek-fp8.json

cat >"$TMP/gen.py" <<'PYGEN'
import json, random, struct, sys
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
save(sys.argv[1] + "/ds.safetensors", t)
PYGEN
cat >"$TMP/ref.py" <<'PYREF'
# The reference: SRC DUMPDIR FORM [T]: every FP8 tensor and scale of every
# rank's dump against a quantizer written here from docs/FP8.md in plain
# Python floats (IEEE double: an fp32 quotient rounded from it is the fp32
# division), not through wsync.
import json, math, struct, sys
src_path, dump, form = sys.argv[1], sys.argv[2], sys.argv[3]
T = int(sys.argv[4]) if len(sys.argv) > 4 else 2
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
sys.exit(1 if bad else 0)
PYREF
$PY "$TMP/gen.py" "$TMP" || { fail fp8_wire_model "the model generator failed"; exit 0; }

demo() { # DUMP RULES [extra demo args...]
    local d=$1 r=$2; shift 2
    "$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$r" --layout fsdp \
        --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --dump "$d" --timeout-s 60 "$@" 2>&1
}

# --- 1. fp32 and UE8M0 scales, every FP8 tensor and scale bit for bit.
for form in fp32 ue8m0; do
    r=$RULES; [ $form = ue8m0 ] && r=$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json
    out=$(demo "$TMP/d_$form" "$r") && out=$($PY "$TMP/ref.py" "$TMP/ds.safetensors" "$TMP/d_$form/e0" $form 2>&1) \
        && pass fp8_wire_fsdp2_to_tp2_$form || fail fp8_wire_fsdp2_to_tp2_$form "$(tail -5 <<<"$out")"
done

# --- 2. A NaN is refused naming the tensor: in a band one trainer rank holds
# (down_proj rows 128..255: rank 1) and in one two ranks share (an expert's
# rows 0..127, split at 64: quantized on the engine).
nan_case() { # NAME TENSOR ROW COL PATTERN
    $PY - "$TMP/ds.safetensors" "$TMP/nan.safetensors" "$2" "$3" "$4" <<'PYNAN'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read()); n = struct.unpack("<Q", raw[:8])[0]
v = json.loads(raw[8:8 + n])[sys.argv[3]]
at = 8 + n + v["data_offsets"][0] + 2 * (int(sys.argv[4]) * v["shape"][1] + int(sys.argv[5]))
raw[at:at + 2] = struct.pack("<H", 0x7fc0)
open(sys.argv[2], "wb").write(raw)
PYNAN
    out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$RULES" --layout fsdp \
        --safetensors "$TMP/nan.safetensors" --versions 1 --chunk 64K --timeout-s 20 2>&1); rc=$?
    if [ $rc != 0 ] && grep -q "$5" <<<"$out"; then pass $1; else fail $1 "rc=$rc: $(grep -i nan <<<"$out" | head -3)"; fi
}
nan_case fp8_wire_nan_in_trainer_band_named model.layers.0.mlp.down_proj.weight 200 5 \
    "tensor 'model.layers.0.mlp.down_proj.weight' holds NaN at row 72, column 5.*rows counted from row 128"
nan_case fp8_wire_nan_in_boundary_band_named model.layers.1.mlp.experts.3.up_proj.weight 17 42 \
    "FP8 destination 'model.layers.1.mlp.experts.w13_weight'.*tensor 'model.layers.1.mlp.experts.3.up_proj.weight' holds NaN at row 17, column 42"

# --- 3. TP 4 cuts q_b_proj's blocks (256 rows: 64 per rank): the pull is refused naming it.
out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 4 --tp 4 --rules "$RULES" --layout fsdp \
    --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --timeout-s 20 2>&1); rc=$?
if [ $rc != 0 ] && grep -q "FP8 destination 'model.layers.0.self_attn.q_b_proj.weight' (dim 0, blocks of 128 rows) takes rows \[64, 128) of 'model.layers.0.self_attn.q_b_proj.weight' (dim 0) to \[0, 64), cutting a 128-row block" <<<"$out"; then
    pass fp8_wire_tp_that_cuts_a_block_refused; else fail fp8_wire_tp_that_cuts_a_block_refused "rc=$rc: $(tail -3 <<<"$out")"; fi

# --- 4. A byte of a packed FP8 column slice (o_proj / down_proj codes)
# flipped after the trainer took its digests: caught before ready, named.
out=$(WSYNC_TEST_CORRUPT_PACKED=1 demo "$TMP/d_bad" "$RULES"); rc=$?
if [ $rc != 0 ] && grep -qE 'tensor model\.layers\.[01]\.(self_attn\.o_proj|mlp\.down_proj)\.weight .*failed verification on engine e0 rank [01]' <<<"$out"; then
    pass fp8_wire_corrupted_fp8_byte_named; else fail fp8_wire_corrupted_fp8_byte_named "rc=$rc: $(grep -i verif <<<"$out" | head -3)"; fi

# --- 5. An FP8 TP=2 node, a BF16 TP=2 node and a whole-image node pull the same version.
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve.log"
if wait_http "$URL/healthz"; then
    for r in 0 1; do
        bg "$WSYNC" engine --control "$URL" --engine f8-$$ --local-rank $r --local-world 2 --tp 2 --rules "$RULES" \
            --versions 1 --dump "$TMP/d5" >"$TMP/f8$r.log" 2>&1
        bg "$WSYNC" engine --control "$URL" --engine bf-$$ --local-rank $r --local-world 2 --tp 2 --mode in-place \
            --versions 1 --dump "$TMP/d5" >"$TMP/bf$r.log" 2>&1
        bg "$WSYNC" engine --control "$URL" --engine whole-$$ --local-rank $r --local-world 2 --versions 1 \
            --dump "$TMP/d5" >"$TMP/whole$r.log" 2>&1
    done
    sleep 0.5
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$TMP/ds.safetensors" \
            --versions 1 --wait-engines 3 --chunk 64K >"$TMP/t$r.log" 2>&1
    done
    for i in $(seq 600); do
        n=0
        for e in f8 bf whole; do for r in 0 1; do [ -f "$TMP/d5/$e-$$/rank$r/v1.safetensors" ] && n=$((n + 1)); done; done
        [ $n = 6 ] && break
        sleep 0.1
    done
    sleep 0.3
    out=$($PY "$TMP/ref.py" "$TMP/ds.safetensors" "$TMP/d5/f8-$$" fp32 2>&1) && pass fp8_wire_side_by_side_fp8 \
        || fail fp8_wire_side_by_side_fp8 "$out"
    ok=1
    for r in 0 1; do
        "$WSYNC" target "$TMP/ds.safetensors" --tp 2 --rank $r --write "$TMP/bf$r.st" >/dev/null 2>&1 || ok=0
        $PY - "$TMP/bf$r.st" "$TMP/d5/bf-$$/rank$r/v1.safetensors" "$TMP/ds.safetensors" \
            "$TMP/d5/whole-$$/rank$r/v1.safetensors" <<'PYCMP' || ok=0
import json, struct, sys
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n]); base = 8 + n
    return {k: (v["dtype"], v["shape"], raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in hdr.items() if k != "__metadata__"}
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) and load(sys.argv[3]) == load(sys.argv[4]) else 1)
PYCMP
    done
    check fp8_wire_side_by_side_bf16_tp_and_whole_image [ $ok = 1 ]
else
    fail fp8_wire_side_by_side "control endpoint did not come up"
fi

# --- 6. Relays forward FP8 codes, scales and the aux rows as they are: two
# FP8 TP=2 nodes, relay:1 (the second pulls from the first).
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve6.log"
if wait_http "$URL/healthz"; then
    R6=()
    for id in a b; do for r in 0 1; do
        WSYNC_TRACE=1 "$WSYNC" engine --control "$URL" --engine $id-$$ --local-rank $r --local-world 2 --tp 2 \
            --rules "$RULES" --plan relay:1 --versions 1 --timeout-ms 30000 --dump "$TMP/d6" >"$TMP/r6-$id$r.log" 2>&1 &
        WSYNC_PIDS+=($!); R6+=($!)
    done; done
    sleep 0.5
    for r in 0 1; do
        bg "$WSYNC" trainer --control "$URL" --rank $r --world 2 --layout fsdp --safetensors "$TMP/ds.safetensors" \
            --versions 1 --wait-engines 2 --chunk 64K >"$TMP/t6$r.log" 2>&1
    done
    ok=0
    for p in "${R6[@]}"; do wait "$p" || ok=1; done
    for r in 0 1; do grep -q "version 1 from the relay of engine a-$$" "$TMP/r6-b$r.log" || ok=1; done
    check fp8_wire_relay_child_pulls_from_its_parent [ $ok = 0 ]
    out=$($PY "$TMP/ref.py" "$TMP/ds.safetensors" "$TMP/d6/b-$$" fp32 2>&1) && pass fp8_wire_relayed_node_bit_exact \
        || fail fp8_wire_relayed_node_bit_exact "$out"
else
    fail fp8_wire_relay "control endpoint did not come up"
fi
