"""hf_trainer.py URL PACK VERSIONS ENGINE OUTDIR: a trainer holding the tiny
Qwen2 model: per version an AdamW step, wsync.hf publish, and the logits of
the fixed batch saved to OUTDIR/logits_v<N>.pt for the engine to compare
(after the engine held the version before). Serves until stdin closes."""
import os
import sys

import common
import qwen_tiny
import torch
import wsync.hf


def main():
    url, pack, versions, engine, out = sys.argv[1], sys.argv[2] == "pack", int(sys.argv[3]), sys.argv[4], sys.argv[5]
    model, cfg = qwen_tiny.test_model(seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = qwen_tiny.batch(cfg, qwen_tiny.test_device())
    with wsync.hf.Publisher(url, 0, 1, model, pack=pack) as pub:
        print("published tensors: %s" % ",".join(wsync.hf.state_dict(model)), flush=True)
        for v in range(1, versions + 1):
            loss = qwen_tiny.logits(model, ids).float().square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                torch.save(qwen_tiny.logits(model, ids), os.path.join(out, "logits_v%d.pt" % v))
            pub.publish(v)
            print("published version %d (tie kept: %s)" % (
                v, model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()), flush=True)
            if v < versions:
                common.wait_engines(url, [engine], v)
        common.wait_stdin_closed()


main()
