"""tiny_qwen.py: a small causal LM with Qwen2ForCausalLM's parameter names
and tied embeddings, for running the examples where transformers is not
installed (make_model() builds a real transformers Qwen2 when it is)."""
import os

import torch
from torch import nn

CONFIG = dict(vocab=257, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=129)
# Qwen2.5-0.5B's published sizes (its config.json), for the GPU test and bench.
QWEN25_05B = dict(vocab=151936, hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864,
                  rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=32768)


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


def make_model(cfg=CONFIG, dtype=torch.bfloat16, device="cpu", seed=0):
    """A transformers Qwen2ForCausalLM of these sizes when transformers is
    installed, else TinyQwen; random init from `seed`, in `dtype`."""
    torch.manual_seed(seed)
    try:
        import transformers
    except ImportError:
        if os.environ.get("WSYNC_REQUIRE_TRANSFORMERS"):
            raise
        return TinyQwen(cfg).to(dtype=dtype, device=device)
    extra = {k: cfg[k] for k in ("rope_theta", "rms_norm_eps", "max_position_embeddings") if k in cfg}
    conf = transformers.Qwen2Config(vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
                                    num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
                                    num_key_value_heads=cfg["kv_heads"], intermediate_size=cfg["intermediate"],
                                    tie_word_embeddings=True, **extra)
    with torch.device(device):  # initialize where it will run (0.5B on a CPU takes a while)
        model = transformers.Qwen2ForCausalLM(conf)
    return model.to(dtype=dtype).eval()


def logits(model, ids):
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


@torch.no_grad()
def generate(model, ids, steps=8):
    """Greedy decoding, the same on TinyQwen and a transformers model."""
    for _ in range(steps):
        nxt = logits(model, ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
    return ids


def batch_ids(cfg=CONFIG, device="cpu"):
    """A fixed batch of token ids (2 x 9)."""
    return (torch.arange(2 * 9).reshape(2, 9) * 13 % cfg["vocab"]).to(device)
