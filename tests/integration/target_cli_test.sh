#!/usr/bin/env bash
# `wsync target` and `wsync plan --tp` on Qwen2-shaped and MoE safetensors
# files written here: destination names, shapes and blocks checked against the
# vLLM conventions computed in Python from the file's header (not through
# wsync), the rules file equal to the built-in rules, per-node network bytes
# and per-rank held bytes, and bad input refused with exit 2 naming the problem.
source "$(dirname "$0")/lib.sh"

python3 - "$TMP" <<'PY'
import json, struct, sys
def write(path, tensors):
    header, off = {}, 0
    for name, shape in tensors:
        n = 2
        for d in shape: n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"\0" * off)
def model(moe):
    H, Q, KV, I, V, E = 64, 64, 32, 96, 1000, 8
    t = [("model.embed_tokens.weight", [V, H])]
    for l in range(2):
        p = "model.layers.%d." % l
        t += [(p + "input_layernorm.weight", [H]), (p + "self_attn.q_proj.weight", [Q, H]),
              (p + "self_attn.q_proj.bias", [Q]), (p + "self_attn.k_proj.weight", [KV, H]),
              (p + "self_attn.k_proj.bias", [KV]), (p + "self_attn.v_proj.weight", [KV, H]),
              (p + "self_attn.v_proj.bias", [KV]), (p + "self_attn.o_proj.weight", [H, Q]),
              (p + "post_attention_layernorm.weight", [H])]
        if moe:
            t.append((p + "mlp.gate.weight", [E, H]))
            for e in range(E):
                t += [(p + "mlp.experts.%d.gate_proj.weight" % e, [32, H]),
                      (p + "mlp.experts.%d.up_proj.weight" % e, [32, H]),
                      (p + "mlp.experts.%d.down_proj.weight" % e, [H, 32])]
        else:
            t += [(p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
                  (p + "mlp.down_proj.weight", [H, I])]
    t += [("model.norm.weight", [H]), ("lm_head.weight", [V, H])]
    return t
write(sys.argv[1] + "/qwen.safetensors", model(False))
write(sys.argv[1] + "/moe.safetensors", model(True))
PY
Q=$TMP/qwen.safetensors MOE=$TMP/moe.safetensors

# Checks a target JSON against the vLLM layout of TP rank K of T, computed
# from the safetensors header: FILE JSON T K
check_target() {
    python3 - "$@" <<'PY'
import json, struct, sys
path, tj, T, K = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
src = {k: v["shape"] for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"}
want = {}  # destination -> (shape, [(src, start, stop, dst_start)])
def full(s): return [0] * len(src[s]), list(src[s])
experts = {}
for name, shape in src.items():
    pre = name.rsplit(".self_attn.", 1)[0] if ".self_attn." in name else name.rsplit(".mlp.", 1)[0]
    if name.endswith(("q_proj.weight", "q_proj.bias")):
        kind = name.rsplit(".", 1)[1]; parts = ["q", "k", "v"]
        rows = [src["%s.self_attn.%s_proj.%s" % (pre, p, kind)][0] // T for p in parts]
        blocks, at = [], 0
        for p, r in zip(parts, rows):
            s = "%s.self_attn.%s_proj.%s" % (pre, p, kind); a, b = full(s)
            a[0], b[0] = K * r, (K + 1) * r
            blocks.append((s, a, b, [at] + [0] * (len(a) - 1))); at += r
        want["%s.self_attn.qkv_proj.%s" % (pre, kind)] = ([sum(rows)] + shape[1:], blocks)
    elif name.endswith(("k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias", "up_proj.weight")) and ".experts." not in name:
        continue
    elif name.endswith("mlp.gate_proj.weight") and ".experts." not in name:
        r = shape[0] // T; blocks = []
        for i, p in enumerate(["gate", "up"]):
            s = "%s.mlp.%s_proj.weight" % (pre, p); a, b = full(s); a[0], b[0] = K * r, (K + 1) * r
            blocks.append((s, a, b, [i * r, 0]))
        want[pre + ".mlp.gate_up_proj.weight"] = ([2 * r, shape[1]], blocks)
    elif name.endswith(("o_proj.weight", "mlp.down_proj.weight")) and ".experts." not in name:
        c = shape[1] // T; a, b = full(name); a[1], b[1] = K * c, (K + 1) * c
        want[name] = ([shape[0], c], [(name, a, b, [0, 0])])
    elif name in ("model.embed_tokens.weight", "lm_head.weight"):
        V = shape[0]; Vp = -(-V // 64) * 64; per = Vp // T; lo, hi = K * per, min((K + 1) * per, V)
        want[name] = ([per, shape[1]], [(name, [lo, 0], [hi, shape[1]], [0, 0])] if lo < hi else [])
    elif ".mlp.experts." in name:
        base, e, part = name.split(".mlp.experts.")[0], int(name.split(".mlp.experts.")[1].split(".")[0]), name.rsplit(".", 2)[1]
        experts.setdefault((base, "w2" if part == "down_proj" else "w13"), {})[(e, part)] = name
    else:
        want[name] = (shape, [(name, [0] * len(shape), list(shape), [0] * len(shape))])
for (base, w), ex in experts.items():
    E = max(e for e, _ in ex) + 1; el = E // T
    parts = ["down_proj"] if w == "w2" else ["gate_proj", "up_proj"]
    d0 = [src[ex[(0, p)]][0] for p in parts]
    blocks = []
    for e in range(K * el, (K + 1) * el):
        for i, p in enumerate(parts):
            s = ex[(e, p)]; blocks.append((s, [0, 0], list(src[s]), [e - K * el, sum(d0[:i]), 0]))
    want["%s.mlp.experts.%s_weight" % (base, w)] = ([el, sum(d0)] + src[ex[(0, parts[0])]][1:], blocks)
got = {t["name"]: t for t in tj["tensors"]}
assert set(got) == set(want), "names differ: %s" % (set(got) ^ set(want))
off = 0
for t in tj["tensors"]:
    shape, blocks = want[t["name"]]
    assert t["shape"] == shape, (t["name"], t["shape"], shape)
    gb = sorted((b["src"], b["src_start"], b["src_stop"], b["dst_start"]) for b in t["blocks"])
    assert gb == sorted(blocks), (t["name"], gb, sorted(blocks))
    assert t["offset"] == off, (t["name"], t["offset"], off)
    n = 2
    for d in shape: n *= d
    off = -(-(off + n) // 256) * 256
PY
}

ok=1 why=
for spec in "$Q 1 0" "$Q 2 0" "$Q 2 1" "$Q 4 3" "$MOE 4 0" "$MOE 4 3" "$MOE 2 1"; do
    set -- $spec
    if ! "$WSYNC" target "$1" --tp "$2" --rank "$3" --json >"$TMP/t.json" 2>"$TMP/err"; then
        ok=0 why="target $spec: $(cat "$TMP/err")"; break; fi
    if ! check_target "$1" "$TMP/t.json" "$2" "$3" 2>"$TMP/err"; then
        ok=0 why="target $spec: $(tail -3 "$TMP/err")"; break; fi
done
[ $ok = 1 ] && pass target_json_matches_vllm_layout || fail target_json_matches_vllm_layout "$why"

out=$("$WSYNC" target "$Q" --tp 2 --rank 1 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '^model.layers.0.self_attn.qkv_proj.weight  *BF16  *\[64, 64\]' <<<"$out" \
   && grep -q '^lm_head.weight  *BF16  *\[512, 64\]' <<<"$out" && grep -q '^TP rank 1 of 2: 17 destination' <<<"$out"; then
    pass target_text
else fail target_text "rc=$rc: $out"; fi

a=$("$WSYNC" target "$MOE" --tp 4 --rank 2 | tail -1)
b=$("$WSYNC" target "$MOE" --tp 4 --rank 2 --rules "$WSYNC_ROOT/configs/rules/vllm.json" | tail -1)
if [ -n "$a" ] && [ "$a" = "$b" ] && grep -q 'target [0-9a-f]\{32\}$' <<<"$a"; then
    pass target_rules_file_is_builtin
else fail target_rules_file_is_builtin "'$a' vs '$b'"; fi

# Bad input: exit 2 and a message naming the problem.
ok=1 why=
while IFS='|' read -r args needle want; do
    out=$(eval "\"$WSYNC\" target $args" 2>&1); rc=$?
    if [ "$rc" != "$want" ] || ! grep -qF -- "$needle" <<<"$out"; then ok=0 why="target $args: rc=$rc: $out"; break; fi
done <<EOF
$Q --tp 3|'model.embed_tokens.weight': the padded vocabulary 1024 (dim 0) does not divide by the TP size 3|2
$Q --tp 2 --rank 2|--rank 2 is not a rank of a TP group of 2|2
$Q --tp 0|--tp: expected a whole number from 1 to 4096, got '0'|2
$Q --rules $TMP/none.json|none.json|1
--synthetic 64M $Q|not both|2
$TMP/missing.safetensors|missing.safetensors|1
EOF
[ $ok = 1 ] && pass target_bad_input || fail target_bad_input "$why"

# plan --tp: node 0 TP=2 (two groups of 2), node 1 the whole image.
for r in 0 1; do "$WSYNC" target "$Q" --tp 2 --rank $r --json >"$TMP/t$r.json"; done
"$WSYNC" inspect --json "$Q" >"$TMP/manifest.json"
if "$WSYNC" plan "$Q" --trainers 3 --layout fsdp --engines 2 --local-ranks 4 --chunk 64K --tp 2,image --json \
    >"$TMP/plan.json" 2>"$TMP/err" && python3 - "$TMP" <<'PY' 2>"$TMP/err"
import json, sys
d = sys.argv[1]
p, man = json.load(open(d + "/plan.json")), json.load(open(d + "/manifest.json"))
held = []
for r in (0, 1):  # bytes a rank of TP rank r holds: its blocks, from the target JSON
    t, n = json.load(open("%s/t%d.json" % (d, r))), 0
    for x in t["tensors"]:
        for b in x["blocks"]:
            e = 2
            for a, z in zip(b["src_start"], b["src_stop"]): e *= z - a
            n += e
    held.append(n)
tensor_bytes = sum(t["size"] for t in man["tensors"])
assert p["image_size"] == man["image_size"] and len(p["nodes"]) == 2
tp, whole = p["nodes"]
assert tp["tp"] == 2 and whole["tp"] is None
# TP node: every tensor byte is needed by one group or the other, and crosses once.
assert tp["network_bytes"] == tensor_bytes, (tp["network_bytes"], tensor_bytes)
assert [r["holds_bytes"] for r in tp["ranks"]] == [held[0], held[1], held[0], held[1]]
assert sum(r["land_bytes"] for r in tp["ranks"]) == tp["network_bytes"]
assert sum(tp["trainer_send_bytes"]) == tp["network_bytes"]
assert all(r["copy_in_bytes"] == r["holds_bytes"] - r["land_bytes"] for r in tp["ranks"])
# Whole-image node: today's plan.
assert whole["network_bytes"] == p["per_node"]["network_bytes"] == man["image_size"]
assert [r["land_bytes"] for r in whole["ranks"]] == [r["land_bytes"] for r in p["engine_local_ranks"]]
assert all(r["holds_bytes"] == man["image_size"] for r in whole["ranks"])
PY
then pass plan_tp_nodes_json
else fail plan_tp_nodes_json "$(tail -5 "$TMP/err")"; fi

out=$("$WSYNC" plan "$MOE" --local-ranks 4 --tp 4 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '^nodes 0, 1: TP=4 (1 groups of 4), network in' <<<"$out" && grep -q '^LOCAL RANK  *TP RANK' <<<"$out" \
   && [ "$(grep -A4 '^LOCAL RANK  *TP RANK' <<<"$out" | grep -c '^[0-3]  *[0-3]  ')" = 4 ]; then
    pass plan_tp_text
else fail plan_tp_text "rc=$rc: $out"; fi

ok=1 why=
while IFS='|' read -r args needle; do
    out=$(eval "\"$WSYNC\" plan $args" 2>&1); rc=$?
    if [ "$rc" != 2 ] || ! grep -qF -- "$needle" <<<"$out"; then ok=0 why="plan $args: rc=$rc: $out"; break; fi
done <<EOF
$Q --local-ranks 3 --tp 2|a node's 3 local ranks must form whole TP groups|
$Q --local-ranks 4 --tp 2,4,2 --engines 2|lists more nodes than --engines 2|
$Q --tp 2,,4|expected T[,T...]|
$Q --local-ranks 4 --tp 4,3|--tp 3: a node's 4 local ranks|
$MOE --local-ranks 16 --tp 16|8 experts|
EOF
[ $ok = 1 ] && pass plan_tp_bad_input || fail plan_tp_bad_input "$why"
