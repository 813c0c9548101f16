#!/usr/bin/env bash
# FP8 on the way (issue 29, docs/FP8.md): a DeepSeek-shaped MoE file in BF16
# (MLA and q/k/v attention, a dense MLP, 8 experts, a router) written here
# with values over many binades, a zero block, subnormal results and partial
# blocks; `wsync target --write` (wsync's quantizer) for TP 1 and 2, every
# rank, fp32 and UE8M0 scales, compared bit for bit with a quantizer written
# here from the definition in a few lines of torch float32/float64 (Debian's
# torch 1.13 has no float8 dtype): the vLLM layout assembled from the source
# tensors, amax, scale, and the nearest e4m3fn value found by exponent and
# rounding (not through wsync); BF16 tensors (router, norms) unchanged; a NaN
# weight refused naming it; a TP size that cuts a block refused naming it;
# the same checks on the dumps of a pull from 2 fsdp trainer ranks.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch' 2>/dev/null; then
    skip fp8_reference "Debian's python3-torch is not installed"
    exit 0
fi

$PY - "$TMP" <<'PY'
import json, struct, sys, torch
torch.manual_seed(29)
H, Q, KV, I, EI, E, V = 256, 512, 256, 512, 128, 8, 1000
t = {}
def w(name, r, c, mag=None):
    x = torch.randn(r, c)
    # magnitudes over many binades, per row
    x *= torch.pow(10.0, torch.empty(r, 1).uniform_(-4, 2)) if mag is None else mag
    t[name] = x.to(torch.bfloat16)
t["model.embed_tokens.weight"] = torch.randn(V, H).to(torch.bfloat16)
for l in range(2):
    p = "model.layers.%d." % l
    t[p + "input_layernorm.weight"] = torch.rand(H).to(torch.bfloat16)
    if l == 0:  # MLA-style (partial blocks: 200 and 192 rows)
        w(p + "self_attn.q_a_proj.weight", 200, H)
        w(p + "self_attn.kv_a_proj_with_mqa.weight", 192, H, 1e-3)
        w(p + "self_attn.q_b_proj.weight", Q, 200)
        w(p + "self_attn.kv_b_proj.weight", Q, 192)
    else:
        w(p + "self_attn.q_proj.weight", Q, H); w(p + "self_attn.k_proj.weight", KV, H)
        w(p + "self_attn.v_proj.weight", KV, H, 1e-30)  # fp8 subnormals after scaling
    w(p + "self_attn.o_proj.weight", H, Q)
    t[p + "post_attention_layernorm.weight"] = torch.rand(H).to(torch.bfloat16)
    if l == 0:
        w(p + "mlp.gate_proj.weight", I, H); w(p + "mlp.up_proj.weight", I, H); w(p + "mlp.down_proj.weight", H, I)
    else:
        w(p + "mlp.gate.weight", E, H)
        for e in range(E):
            w(p + "mlp.experts.%d.gate_proj.weight" % e, EI, H); w(p + "mlp.experts.%d.up_proj.weight" % e, EI, H)
            w(p + "mlp.experts.%d.down_proj.weight" % e, H, EI)
        t[p + "mlp.experts.2.down_proj.weight"][:128] = 0  # a zero block: scale 1
        t[p + "mlp.experts.5.up_proj.weight"][3, 7] = 1e38  # one huge value: the rest of its block underflows
t["model.norm.weight"] = torch.rand(H).to(torch.bfloat16)
t["lm_head.weight"] = torch.randn(V, H).to(torch.bfloat16)
def save(path, tensors):
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = v.contiguous().view(torch.int16).flatten()
        raw = struct.pack("<%dh" % b.numel(), *b.tolist())
        header[k] = {"dtype": "BF16", "shape": list(v.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw); off += len(raw)
    h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(x) for x in blobs]
save(sys.argv[1] + "/ds.safetensors", t)
t["model.layers.1.mlp.experts.3.up_proj.weight"][17, 42] = float("nan")
save(sys.argv[1] + "/nan.safetensors", t)
PY

# The reference: TMP FILE OUT T K FORM
check_fp8() {
    $PY - "$@" <<'PY'
import json, struct, sys, torch
src_path, out_path, T, K, ue8m0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "ue8m0"
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n]); base = 8 + n; out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]; out[k] = (v["dtype"], v["shape"], raw[base + a:base + b])
    return out
def bf16(dt_shape_raw):
    dt, shape, raw = dt_shape_raw
    x = torch.tensor(struct.unpack("<%dh" % (len(raw) // 2), raw), dtype=torch.int32) << 16
    return x.view(torch.float32).reshape(shape)
src = {k: bf16(v) for k, v in load(src_path).items()}
got = load(out_path)

def e4m3fn(y):
    """float32 tensor -> uint8 codes: nearest e4m3fn value (ties to even), saturated to 448."""
    a = y.abs().double()
    m, e = torch.frexp(a)                    # a = m * 2^e, m in [0.5, 1)
    e = torch.clamp(e - 1, min=-6)           # exponent of the leading bit; subnormals share 2^-6
    quantum = torch.pow(2.0, (e - 3).double())
    v = torch.round(a / quantum) * quantum   # torch.round: half to even
    v = torch.clamp(v, max=448.0)
    _, ve = torch.frexp(v)                   # v = _ * 2^ve
    normal = v >= 2.0 ** -6
    exp_field = torch.where(normal, ve - 1 + 7, torch.zeros_like(ve))
    man_field = torch.where(normal, (v / torch.pow(2.0, (ve - 1).double()) - 1) * 8, v / 2.0 ** -9)
    code = (exp_field * 8 + man_field.round().long()).long()
    sign = (y.view(torch.int32) < 0).long() * 128
    return (code + sign).to(torch.uint8)

def quantize(x):
    """x: float32 [..., R, C] -> (codes, scales) by the definition of docs/FP8.md."""
    R, C = x.shape[-2:]
    lead = x.shape[:-2]
    x2 = x.reshape(-1, R, C)
    q = torch.empty(x2.shape, dtype=torch.uint8)
    s = torch.empty(x2.shape[0], (R + 127) // 128, (C + 127) // 128, dtype=torch.float32)
    for n in range(x2.shape[0]):
        for i in range(0, R, 128):
            for j in range(0, C, 128):
                blk = x2[n, i:i + 128, j:j + 128]
                amax = blk.abs().max()
                sc = torch.tensor(1.0) if amax == 0 else amax / torch.tensor(448.0, dtype=torch.float32)
                if ue8m0 and amax != 0:
                    m, e = torch.frexp(sc)
                    sc = sc if m == 0.5 else torch.ldexp(torch.tensor(1.0), e.float()).float()
                s[n, i // 128, j // 128] = sc
                q[n, i:i + 128, j:j + 128] = e4m3fn(blk / sc)
    return q.reshape(*lead, R, C), s.reshape(*lead, (R + 127) // 128, (C + 127) // 128)

def rows(name): return src[name].chunk(T, 0)[K]
def cols(name): return src[name].chunk(T, 1)[K]
want = {}
L0, L1 = "model.layers.0.", "model.layers.1."
want[L0 + "self_attn.q_a_proj.weight"] = src[L0 + "self_attn.q_a_proj.weight"]
want[L0 + "self_attn.kv_a_proj_with_mqa.weight"] = src[L0 + "self_attn.kv_a_proj_with_mqa.weight"]
want[L0 + "self_attn.q_b_proj.weight"] = rows(L0 + "self_attn.q_b_proj.weight")
want[L0 + "self_attn.kv_b_proj.weight"] = rows(L0 + "self_attn.kv_b_proj.weight")
want[L1 + "self_attn.qkv_proj.weight"] = torch.cat([rows(L1 + "self_attn.%s_proj.weight" % p) for p in "qkv"])
for p in (L0, L1):
    want[p + "self_attn.o_proj.weight"] = cols(p + "self_attn.o_proj.weight")
want[L0 + "mlp.gate_up_proj.weight"] = torch.cat([rows(L0 + "mlp.gate_proj.weight"), rows(L0 + "mlp.up_proj.weight")])
want[L0 + "mlp.down_proj.weight"] = cols(L0 + "mlp.down_proj.weight")
E = 8; per = E // T; ex = range(K * per, (K + 1) * per)
want[L1 + "mlp.experts.w13_weight"] = torch.stack([torch.cat([src[L1 + "mlp.experts.%d.gate_proj.weight" % e],
                                                              src[L1 + "mlp.experts.%d.up_proj.weight" % e]]) for e in ex])
want[L1 + "mlp.experts.w2_weight"] = torch.stack([src[L1 + "mlp.experts.%d.down_proj.weight" % e] for e in ex])
bad = []
for name, x in want.items():
    q, s = quantize(x)
    g = got.get(name); gs = got.get(name + "_scale_inv")
    if g is None or gs is None: bad.append("missing " + name); continue
    if g[0] != "F8_E4M3" or g[1] != list(q.shape) or gs[0] != "F32" or gs[1] != list(s.shape):
        bad.append("%s: %s %s / %s %s" % (name, g[0], g[1], gs[0], gs[1])); continue
    gq = torch.tensor(list(g[2]), dtype=torch.uint8).reshape(q.shape)
    gsv = torch.tensor(struct.unpack("<%df" % s.numel(), gs[2])).reshape(s.shape)
    if not torch.equal(gsv.view(torch.int32), s.view(torch.int32)): bad.append(name + ": scales differ")
    if not torch.equal(gq, q):
        d = (gq != q).nonzero()[0].tolist()
        bad.append("%s: %d codes differ, first at %s: wsync %02x, reference %02x" % (
            name, int((gq != q).sum()), d, gq[tuple(d)], q[tuple(d)]))
for name in ("model.layers.1.mlp.gate.weight", "model.norm.weight", L0 + "input_layernorm.weight"):
    g = got[name]
    if g[0] != "BF16" or not torch.equal(bf16(g), src[name]): bad.append(name + ": BF16 tensor changed")
fp8 = [k for k, v in got.items() if v[0] == "F8_E4M3"]
if sorted(fp8) != sorted(want): bad.append("FP8 tensors %s, expected %s" % (sorted(fp8), sorted(want)))
if got["model.embed_tokens.weight"][0] != "BF16" or got["lm_head.weight"][0] != "BF16": bad.append("embeddings not BF16")
print("\n".join(bad) if bad else "ok: %d FP8 tensors" % len(want))
sys.exit(1 if bad else 0)
PY
}

for form in fp32 ue8m0; do
    rules=$WSYNC_ROOT/configs/rules/deepseek-fp8.json
    [ $form = ue8m0 ] && rules=$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json
    for tk in 1:0 2:0 2:1; do
        T=${tk%:*} K=${tk#*:}
        name=fp8_reference_${form}_tp${T}_rank${K}
        out=$("$WSYNC" target "$TMP/ds.safetensors" --tp $T --rank $K --rules "$rules" --write "$TMP/out.safetensors" 2>&1) \
            && out=$(check_fp8 "$TMP/ds.safetensors" "$TMP/out.safetensors" $T $K $form 2>&1) \
            && pass $name || fail $name "$out"
    done
done

out=$("$WSYNC" target "$TMP/nan.safetensors" --rules "$WSYNC_ROOT/configs/rules/deepseek-fp8.json" --write "$TMP/o.st" 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "tensor 'model.layers.1.mlp.experts.3.up_proj.weight' holds NaN at row 17, column 42" <<<"$out" \
    && [ ! -e "$TMP/o.st" ]; then pass fp8_nan_refused_naming_the_tensor; else fail fp8_nan_refused_naming_the_tensor "rc=$rc: $out"; fi

# TP 4: k_proj's 256 rows give 64 per rank, half a block
out=$("$WSYNC" target "$TMP/ds.safetensors" --tp 4 --rank 1 --rules "$WSYNC_ROOT/configs/rules/deepseek-fp8.json" 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "FP8 destination 'model.layers.1.self_attn.qkv_proj.weight' (dim 0, blocks of 128 rows) takes rows \[64, 128) of 'model.layers.1.self_attn.k_proj.weight'" <<<"$out"; then
    pass fp8_tp_that_cuts_a_block_refused; else fail fp8_tp_that_cuts_a_block_refused "rc=$rc: $out"; fi
# the target JSON says it
out=$("$WSYNC" target "$TMP/ds.safetensors" --rules "$WSYNC_ROOT/configs/rules/deepseek-fp8.json" --json > "$TMP/t.json" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '"quant"' "$TMP/t.json" && grep -q '"scale_form": "fp32"' "$TMP/t.json"; then pass fp8_target_json_says_it
else fail fp8_target_json_says_it "rc=$rc: $out"; fi
# and the node plan moves them (fp8_wire_test.sh pulls them): TP 1 and 2 plan
out=$("$WSYNC" plan "$TMP/ds.safetensors" --trainers 2 --layout fsdp --tp 1,2 --engines 2 --local-ranks 2 \
      --rules "$WSYNC_ROOT/configs/rules/deepseek-fp8.json" 2>&1); rc=$?
if [ $rc = 0 ]; then pass fp8_plan_moves_fp8_destinations; else fail fp8_plan_moves_fp8_destinations "rc=$rc: $out"; fi

# Over the wire (docs/FP8.md "On the wire"): 2 fsdp trainer ranks (q_a_proj's
# 200 rows and the experts' 128 split off the block grid: those bands cross in
# BF16 and the engine quantizes them) to a node of 2 ranks with FP8 + TP=2
# rules: each rank's dump against the torch reference above, both forms.
for form in fp32 ue8m0; do
    rules=$WSYNC_ROOT/configs/rules/deepseek-fp8.json
    [ $form = ue8m0 ] && rules=$WSYNC_ROOT/configs/rules/deepseek-fp8-ue8m0.json
    name=fp8_pulled_fsdp2_to_tp2_$form
    out=$("$WSYNC" demo --trainers 2 --engines 1 --local-ranks 2 --tp 2 --rules "$rules" --layout fsdp \
          --safetensors "$TMP/ds.safetensors" --versions 1 --chunk 64K --dump "$TMP/pull_$form" --timeout-s 60 2>&1) \
        && out=$(check_fp8 "$TMP/ds.safetensors" "$TMP/pull_$form/e0/rank0/v1.safetensors" 2 0 $form 2>&1) \
        && out=$(check_fp8 "$TMP/ds.safetensors" "$TMP/pull_$form/e0/rank1/v1.safetensors" 2 1 $form 2>&1) \
        && pass $name || fail $name "$(tail -3 <<<"$out")"
done
