"""qwen_tiny.py: a small model with Qwen2's tensor names and tied embeddings,
and the deterministic contents the tests publish per version (each side
regenerates them on its own, so a receiver checks what it got against an
independent copy, not against what wsync handed it)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples"))
from tiny_qwen import TinyQwen, make_model, logits  # noqa: E402,F401  (the model the examples run)

# Odd vocabulary and MLP sizes so that dim-0 shards are unequal (torch.chunk).
from tiny_qwen import CONFIG  # noqa: E402

# Sizes a TP of 2 divides (vLLM's rules refuse an odd MLP width).
CONFIG_TP = dict(CONFIG, intermediate=128)


def tp_slices(full, tp, r, cfg=CONFIG_TP):
    """What TP rank r of tp holds under vLLM's layout, cut here from the full
    state with torch ops (an implementation independent of wsync's rules):
    q/k/v and gate/up each split by rows and fused, o_proj and down_proj split
    by columns, the vocabulary padded to a multiple of 64 and split by rows
    (rows past the vocabulary zero), everything else whole."""
    out = {}
    for n, t in full.items():
        if n.endswith(("q_proj.weight", "q_proj.bias", "gate_proj.weight")):
            parts = ["q", "k", "v"] if "q_proj" in n else ["gate", "up"]
            fused = n.replace("q_proj", "qkv_proj").replace("gate_proj", "gate_up_proj")
            out[fused] = torch.cat([full[n.replace(parts[0] + "_proj", p + "_proj")].chunk(tp, 0)[r]
                                    for p in parts], 0)
        elif any(n.endswith(x) for x in ("k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias",
                                          "up_proj.weight")):
            continue
        elif n.endswith(("o_proj.weight", "down_proj.weight")):
            out[n] = t.chunk(tp, 1)[r].contiguous()
        elif n == "model.embed_tokens.weight":
            vp = -(-t.shape[0] // 64) * 64
            per = vp // tp
            padded = torch.zeros((vp,) + tuple(t.shape[1:]), dtype=t.dtype)
            padded[:t.shape[0]] = t
            out[n] = padded[r * per:(r + 1) * per]
        else:
            out[n] = t
    return out


def specs(cfg=CONFIG, lm_head=False):
    """[(name, shape)] in the order Qwen2's state dict has them."""
    h, kv = cfg["hidden"], cfg["hidden"] // cfg["heads"] * cfg["kv_heads"]
    out = [("model.embed_tokens.weight", (cfg["vocab"], h))]
    for i in range(cfg["layers"]):
        p = "model.layers.%d." % i
        out += [(p + "self_attn.q_proj.weight", (h, h)), (p + "self_attn.q_proj.bias", (h,)),
                (p + "self_attn.k_proj.weight", (kv, h)), (p + "self_attn.k_proj.bias", (kv,)),
                (p + "self_attn.v_proj.weight", (kv, h)), (p + "self_attn.v_proj.bias", (kv,)),
                (p + "self_attn.o_proj.weight", (h, h)),
                (p + "mlp.gate_proj.weight", (cfg["intermediate"], h)),
                (p + "mlp.up_proj.weight", (cfg["intermediate"], h)),
                (p + "mlp.down_proj.weight", (h, cfg["intermediate"])),
                (p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
    out.append(("model.norm.weight", (h,)))
    if lm_head:
        out.append(("lm_head.weight", (cfg["vocab"], h)))
    return out


def value(version, index, shape, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(version * 100003 + index)
    return torch.randn(shape, generator=g).to(dtype)


def state(version, dtype=torch.bfloat16, cfg=CONFIG):  # noqa: D103
    """The full state dict of `version` (tied lm_head left out, as published)."""
    return {n: value(version, i, s, dtype) for i, (n, s) in enumerate(specs(cfg))}


def test_model(seed):
    """The model of the hf tests: HF_TEST_MODEL "tiny" (default) or
    "qwen2.5-0.5b" (needs transformers), on HF_TEST_DEVICE (default cpu)."""
    import tiny_qwen
    cfg = tiny_qwen.QWEN25_05B if os.environ.get("HF_TEST_MODEL") == "qwen2.5-0.5b" else CONFIG
    return make_model(cfg, device=test_device(), seed=seed), cfg


def test_device():
    return os.environ.get("HF_TEST_DEVICE", "cpu")


def batch(cfg=CONFIG, device="cpu"):
    """The fixed batch whose logits both sides compare."""
    return (torch.arange(2 * 9).reshape(2, 9) * 13 % cfg["vocab"]).to(device)
