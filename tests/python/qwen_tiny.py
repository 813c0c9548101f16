"""qwen_tiny.py: a small model with Qwen2's tensor names and tied embeddings,
and the deterministic contents the tests publish per version (each side
regenerates them on its own, so a receiver checks what it got against an
independent copy, not against what wsync handed it)."""
import torch
from torch import nn

# Odd vocabulary and MLP sizes so that dim-0 shards are unequal (torch.chunk).
CONFIG = dict(vocab=257, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=129)


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


def state(version, dtype=torch.bfloat16, cfg=CONFIG):
    """The full state dict of `version` (tied lm_head left out, as published)."""
    return {n: value(version, i, s, dtype) for i, (n, s) in enumerate(specs(cfg))}


class _Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, kv, inter = cfg["hidden"], cfg["hidden"] // cfg["heads"] * cfg["kv_heads"], cfg["intermediate"]
        self.heads, self.kv_heads, self.head_dim = cfg["heads"], cfg["kv_heads"], h // cfg["heads"]
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(h, h)
        self.self_attn.k_proj = nn.Linear(h, kv)
        self.self_attn.v_proj = nn.Linear(h, kv)
        self.self_attn.o_proj = nn.Linear(h, h, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(h, inter, bias=False)
        self.mlp.up_proj = nn.Linear(h, inter, bias=False)
        self.mlp.down_proj = nn.Linear(inter, h, bias=False)
        self.input_layernorm = _Norm(h)
        self.post_attention_layernorm = _Norm(h)

    def forward(self, x):
        b, s, _ = x.shape
        a = self.self_attn
        y = self.input_layernorm(x)
        q = a.q_proj(y).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = a.k_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = a.v_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        att = (q @ k.transpose(-1, -2)) / self.head_dim ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + a.o_proj((att @ v).transpose(1, 2).reshape(b, s, -1))
        y = self.post_attention_layernorm(x)
        m = self.mlp
        return x + m.down_proj(nn.functional.silu(m.gate_proj(y)) * m.up_proj(y))


class _Norm(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class TinyQwen(nn.Module):
    """Qwen2ForCausalLM's names and tie (lm_head.weight is
    model.embed_tokens.weight), a few layers, a real causal forward."""
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, cfg=CONFIG):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.model.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg["layers"]))
        self.model.norm = _Norm(cfg["hidden"])
        self.lm_head = nn.Linear(cfg["hidden"], cfg["vocab"], bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def batch(cfg=CONFIG):
    """The fixed batch whose logits both sides compare."""
    return torch.arange(2 * 9).reshape(2, 9) * 13 % cfg["vocab"]
