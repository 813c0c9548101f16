#!/usr/bin/env python3
"""adamw_versions.py OUT_DIR [options]: real optimizer steps for the delta work.

A small Qwen-shaped decoder (embedding, LAYERS x (RMSNorm, attention with
grouped KV heads and q/k/v biases, RMSNorm, SwiGLU MLP), final norm, untied
lm_head) with fp32 master weights, trained by torch.optim.AdamW on random token
batches, on the CPU (Debian's python3-torch 1.13 is enough). Before the first
step and after each one it writes the bf16 image the trainer would publish as
OUT_DIR/v0000.safetensors, v0001, ... (a safetensors file written here with
struct and json, not a library).

--check prints, for each version after the first, the fraction of bf16
elements that differ from the previous version, computed here with numpy, so
`wsync delta stats` can be compared with an independent count.

Defaults: 20 steps, lr 1e-6, hidden 512, 4 layers, vocab 16384: about 26 M
parameters, a 53 MB bf16 image. Run with /usr/bin/python3 (Debian's torch).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


class Layer(torch.nn.Module):
    def __init__(self, h, inter, heads, kv_heads):
        super().__init__()
        d = h // heads
        self.heads, self.kv_heads, self.d = heads, kv_heads, d
        self.input_layernorm = torch.nn.Parameter(torch.ones(h))
        self.q_proj = torch.nn.Linear(h, heads * d, bias=True)
        self.k_proj = torch.nn.Linear(h, kv_heads * d, bias=True)
        self.v_proj = torch.nn.Linear(h, kv_heads * d, bias=True)
        self.o_proj = torch.nn.Linear(heads * d, h, bias=False)
        self.post_attention_layernorm = torch.nn.Parameter(torch.ones(h))
        self.gate_proj = torch.nn.Linear(h, inter, bias=False)
        self.up_proj = torch.nn.Linear(h, inter, bias=False)
        self.down_proj = torch.nn.Linear(inter, h, bias=False)

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def forward(self, x):
        b, t, _ = x.shape
        y = self.norm(x, self.input_layernorm)
        q = self.q_proj(y).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(y).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(y).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.o_proj((att @ v).transpose(1, 2).reshape(b, t, -1))
        y = self.norm(x, self.post_attention_layernorm)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Model(torch.nn.Module):
    def __init__(self, vocab, h, inter, layers, heads, kv_heads):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, h)
        self.layers = torch.nn.ModuleList([Layer(h, inter, heads, kv_heads) for _ in range(layers)])
        self.norm = torch.nn.Parameter(torch.ones(h))
        self.lm_head = torch.nn.Linear(h, vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(Layer.norm(x, self.norm))

    def hf_tensors(self):
        """(Qwen-style name, fp32 tensor) in image order."""
        out = [("model.embed_tokens.weight", self.embed_tokens.weight)]
        for i, l in enumerate(self.layers):
            p = "model.layers.%d." % i
            out += [(p + "input_layernorm.weight", l.input_layernorm)]
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                m = getattr(l, n)
                out.append((p + "self_attn.%s.weight" % n, m.weight))
                if m.bias is not None:
                    out.append((p + "self_attn.%s.bias" % n, m.bias))
            out += [(p + "post_attention_layernorm.weight", l.post_attention_layernorm)]
            for n in ("gate_proj", "up_proj", "down_proj"):
                out.append((p + "mlp.%s.weight" % n, getattr(l, n).weight))
        out += [("model.norm.weight", self.norm), ("lm_head.weight", self.lm_head.weight)]
        return out


def bf16_bytes(t):
    """The bf16 image of an fp32 tensor (round to nearest even, as torch casts)."""
    return t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, t in tensors:
        b = bf16_bytes(t)
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=1408)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="print each step's changed fraction (numpy)")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(a.out_dir, exist_ok=True)
    model = Model(a.vocab, a.hidden, a.intermediate, a.layers, a.heads, a.kv_heads)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    nparams = sum(p.numel() for p in model.parameters())
    print("adamw_versions: %d parameters, %.1f MB bf16, %d steps at lr %g" % (nparams, nparams * 2 / 1e6, a.steps, a.lr))
    prev = None
    for step in range(a.steps + 1):
        if step > 0:
            tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        tensors = model.hf_tensors()
        write_safetensors(os.path.join(a.out_dir, "v%04d.safetensors" % step), tensors)
        if a.check:
            cur = np.frombuffer(b"".join(bf16_bytes(t) for _, t in tensors), dtype=np.uint16)
            if prev is not None:
                print("step %d: %.4f%% of bf16 elements changed" % (step, 100.0 * np.count_nonzero(cur != prev) / cur.size))
            prev = cur
        sys.stdout.flush()


if __name__ == "__main__":
    main()
