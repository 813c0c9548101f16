"""hf_delta_trainer.py URL VERSIONS ENGINE OUTDIR: a trainer with fp32 master
weights (the hf tests' model, HF_TEST_MODEL / HF_TEST_DEVICE) and AdamW at lr
1e-6 on random token batches, publishing the bf16 image of the masters
through wsync.hf: version 1 the initial weights, each later one after an
optimizer step. Before each publish it saves the bf16 state dict
(wsync.hf.state_dict, on the CPU) to OUTDIR/v<N>.pt for the engine to compare
with, and waits for ENGINE to hold each version before the next (its base).
Serves until stdin closes."""
import os
import sys

import common
import qwen_tiny
import torch
import torch.nn.functional as F
import wsync.hf


def main():
    url, versions, engine, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    model, cfg = qwen_tiny.test_model(seed=0)  # bf16: what is published
    master = qwen_tiny.make_model(cfg, dtype=torch.float32, device=qwen_tiny.test_device(), seed=0).train()
    with torch.no_grad():
        for pb, pm in zip(model.parameters(), master.parameters()):
            pb.copy_(pm)
    opt = torch.optim.AdamW(master.parameters(), lr=1e-6)
    gen = torch.Generator().manual_seed(7)
    with wsync.hf.Publisher(url, 0, 1, model) as pub:
        for v in range(1, versions + 1):
            if v > 1:
                ids = torch.randint(0, cfg["vocab"], (4, 128), generator=gen).to(qwen_tiny.test_device())
                logits = qwen_tiny.logits(master, ids)
                loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    for pb, pm in zip(model.parameters(), master.parameters()):
                        pb.copy_(pm)  # rounded to bf16: most elements keep their bytes
            torch.save({n: t.cpu() for n, t in wsync.hf.state_dict(model).items()}, os.path.join(out, "v%d.pt" % v))
            pub.publish(v)
            print("published version %d" % v, flush=True)
            if v < versions:
                common.wait_engines(url, [engine], v, timeout=300)
        common.wait_stdin_closed()


main()
