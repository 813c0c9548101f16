#!/usr/bin/env python3
"""qwen_fp8.py: issue 29's model test on the GPU host (tests/gpu/qwen_fp8_test.sh).

  qwen_fp8.py gen OUT.safetensors     a transformers Qwen2.5-0.5B-shaped model (24 layers, hidden 896, 14 heads,
                                      2 KV heads, MLP 4864, vocabulary 151936, tied embeddings), random init
                                      (seed 29), in BF16
  qwen_fp8.py check SRC DUMP K        every FP8 tensor and scale of DUMP/rank<k>/v1.safetensors (k < K) against
                                      torch's float8_e4m3fn of each 128 x 128 block computed here from docs/FP8.md
                                      (amax, scale = amax / 448 in fp32, (x / scale).clamp(+-448) converted),
                                      every BF16 tensor equal to the source; then rank 0's FP8 weights, dequantized
                                      (codes x scales) into a BF16 copy of the model on cuda:0, and the largest
                                      logit difference to the BF16 model on a fixed batch (4 x 64 tokens, seed 7)
Prints PASS/FAIL lines and the figure.
"""
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2Config, Qwen2ForCausalLM

B = 128


def config():
    return Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1000000.0)


def model(dev):
    torch.manual_seed(29)
    m = Qwen2ForCausalLM(config()).to(dtype=torch.bfloat16)
    return m.to(dev).eval()


def gen(out):
    m = model("cpu")
    sd = {k: v.contiguous() for k, v in m.state_dict().items() if k != "lm_head.weight"}  # tied to the embeddings
    save_file(sd, out)
    print("generated %d tensors, %.1f M parameters" % (len(sd), sum(v.numel() for v in sd.values()) / 1e6))


def expand(s, r, c):
    return s.repeat_interleave(B, 0).repeat_interleave(B, 1)[:r, :c]


def reference(x):
    """docs/FP8.md in torch ops: the codes (as bytes) and scales of x's 128 x 128 blocks."""
    r, c = x.shape
    xf = x.float()
    pad = torch.nn.functional.pad(xf.abs(), (0, -c % B, 0, -r % B))
    amax = pad.reshape(pad.shape[0] // B, B, pad.shape[1] // B, B).amax(dim=(1, 3))
    s = torch.where(amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, 448.0))  # IEEE division: torch turns a scalar divisor into a multiply
    q = (xf / expand(s, r, c)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(torch.uint8), s


def check(src_path, dump, ranks):
    dev = "cuda:0"
    src = {k: v.to(dev) for k, v in load_file(src_path).items()}
    bad = nfp8 = 0
    for k in range(ranks):
        got = {n: v.to(dev) for n, v in load_file("%s/rank%d/v1.safetensors" % (dump, k)).items()}
        for name, t in got.items():
            if name.endswith("_scale_inv"):
                continue
            if t.dtype == torch.float8_e4m3fn:
                nfp8 += 1
                q, s = reference(src[name])
                if not torch.equal(t.view(torch.uint8), q) or not torch.equal(got[name + "_scale_inv"], s):
                    bad += 1
                    print("rank %d: FP8 tensor %s differs from torch's float8_e4m3fn" % (k, name))
            elif not torch.equal(t, src[name]):
                bad += 1
                print("rank %d: BF16 tensor %s differs from the source" % (k, name))
        if k == 0:
            rank0 = got
    print(("PASS" if bad == 0 and nfp8 > 0 else "FAIL") +
          " qwen_fp8_every_fp8_tensor_equals_torch (%d FP8 tensors over %d ranks, %d differ)" % (nfp8, ranks, bad))
    ref = model(dev)
    ref.load_state_dict(src, strict=False)
    ref.tie_weights()
    deq = {}
    for name, t in rank0.items():
        if name.endswith("_scale_inv"):
            continue
        if t.dtype == torch.float8_e4m3fn:
            s = rank0[name + "_scale_inv"]
            t = (t.float() * expand(s, *t.shape)).to(torch.bfloat16)
        deq[name] = t
    fp8 = model(dev)
    fp8.load_state_dict(deq, strict=False)
    fp8.tie_weights()
    torch.manual_seed(7)
    ids = torch.randint(0, config().vocab_size, (4, 64), device=dev)
    with torch.no_grad():
        a = ref(ids).logits.float()
        b = fp8(ids).logits.float()
    diff = (a - b).abs().max().item()
    print("qwen_fp8: largest logit difference, FP8 weights dequantized vs BF16: %.6g (BF16 logits' largest |x|: %.4g)"
          % (diff, a.abs().max().item()))
    print(("PASS" if diff == diff and diff != float("inf") else "FAIL") + " qwen_fp8_logits_finite")
    return bad == 0 and nfp8 > 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(0 if check(sys.argv[2], sys.argv[3], int(sys.argv[4])) else 1)
