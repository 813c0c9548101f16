"""hf_test.py: wsync.hf between a trainer process (AdamW steps, publish) and
this engine process, each holding its own tiny Qwen2-named model with tied
embeddings: tied weights published once, received in place into the model's
parameters with the tie restored, and the engine's logits on a fixed batch
bit-identical to the trainer's, version after version (packed and staged
variants)."""
import os
import tempfile

import common
import qwen_tiny
import torch
import wsync
import wsync.hf


def case(c, name, pack, mode, versions=2):
    with common.Serve() as srv, tempfile.TemporaryDirectory() as out:
        t = common.spawn("hf_trainer.py", srv.url, "pack" if pack else "plain", versions, name, out)
        try:
            lines = common.wait_line(t, "published tensors")
            published = lines[-1].split(":", 1)[1].strip().split(",")
            c.ok("%s_tied_weight_published_once" % name,
                 "lm_head.weight" not in published and "model.embed_tokens.weight" in published, str(published))
            model, cfg = qwen_tiny.test_model(seed=1)  # different weights until the first pull
            ids = qwen_tiny.batch(cfg, qwen_tiny.test_device())
            with wsync.hf.Receiver(srv.url, name, 0, 1, model, mode=mode) as rcv:
                ptrs = None
                for v in range(1, versions + 1):
                    got = rcv.pull(timeout=60)
                    with torch.no_grad():
                        mine = qwen_tiny.logits(model, ids)
                    theirs = torch.load("%s/logits_v%d.pt" % (out, v), map_location=mine.device)
                    c.ok("%s_v%d_logits_bit_identical" % (name, v), got == v and torch.equal(mine, theirs),
                         "version %d, max diff %s" % (got, (mine.float() - theirs.float()).abs().max().item()))
                    c.ok("%s_v%d_tie_restored" % (name, v),
                         model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr())
                    views = rcv.receiver.tensors()
                    c.ok("%s_v%d_parameters_are_the_received_tensors" % (name, v), all(
                        p.data_ptr() == views[n].data_ptr() for n, p in model.named_parameters()), "")
                    now = [p.data_ptr() for p in model.parameters()]
                    if mode == "in-place" and ptrs is not None:
                        c.ok("%s_v%d_in_place_same_memory" % (name, v), now == ptrs, "parameters moved")
                    ptrs = now
            with torch.no_grad():
                held = qwen_tiny.logits(model, ids)
            c.ok("%s_close_keeps_weights" % name, torch.equal(held, theirs), "")
        finally:
            t.stdin.close()
            t.kill()
            t.wait()


def mismatch(c):
    """A model whose shapes differ from the published one is refused, naming
    the tensor, and keeps its own weights."""
    with common.Serve() as srv, tempfile.TemporaryDirectory() as out:
        t = common.spawn("hf_trainer.py", srv.url, "plain", 1, "other", out)
        try:
            common.wait_line(t, "published version 1")
            cfg = dict(qwen_tiny.CONFIG, intermediate=130)
            model = qwen_tiny.TinyQwen(cfg).bfloat16()
            before = {n: p.clone() for n, p in model.state_dict().items()}
            with wsync.hf.Receiver(srv.url, "other", 0, 1, model) as rcv:
                c.raises("hf_shape_mismatch_named", lambda: rcv.pull(timeout=60), wsync.Error,
                         "model.layers.0.mlp.gate_proj.weight", "(130, 64)")
            c.ok("hf_shape_mismatch_model_unchanged",
                 all(torch.equal(before[n], p) for n, p in model.state_dict().items()))
        finally:
            t.stdin.close()
            t.kill()
            t.wait()


def main():
    c = common.Checks()
    versions = int(os.environ.get("HF_TEST_VERSIONS", "2"))
    tag = "" if os.environ.get("HF_TEST_MODEL", "tiny") == "tiny" else "qwen05b_"
    case(c, tag + "hf_inplace", pack=True, mode="in-place", versions=versions)
    case(c, tag + "hf_staged", pack=False, mode="staged", versions=versions)
    if not tag:
        mismatch(c)
    c.exit()


main()
