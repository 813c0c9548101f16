"""hf_delta_test.py: versions from real AdamW steps (hf_delta_trainer.py:
fp32 masters, their bf16 image published through wsync.hf) received by this
engine process through wsync.hf.Receiver, staged over tcp: every version
after the first as delta wires from the one held (on a GPU the trainer's
slots and this engine's image are GPU memory: the GPU encoder and decoder),
every tensor torch.equal to the trainer's saved copy at every version, the
bytes on the wire below a quarter of the image, none re-fetched. Beside it
two more engine nodes receive the same versions into their own tensors
(wsync.Receiver into=), one staged, one in place (its base the caller's
tensors where bytes land straight in them), also as deltas, every tensor
equal; a byte flipped in the in-place node's tensors is caught and its piece
re-fetched (into_check)."""
import contextlib
import os
import tempfile
import time

import common
import qwen_tiny
import torch
import wsync.hf


def flip_kept(own, want):
    """Flips a bit of one element of the caller's tensors (the version the
    node holds) that the next version `want` leaves unchanged, so that a
    delta applied onto it cannot mend it; returns its name and index."""
    for n, x in own.items():
        held, nxt = x.view(-1).view(torch.uint8), want[n].view(-1).view(torch.uint8)
        same = (held.cpu() == nxt).nonzero()
        if len(same):
            i = int(same[len(same) // 2])
            held[i] ^= 0x10
            return n, i
    raise AssertionError("no byte the next version keeps")


def into_check(c, tag, v, mode, into, own, want):
    """A node that receives into its own tensors (staged or in place):
    version v pulled, every tensor equal to the trainer's, and from version
    2 on as deltas. In place on the CPU, where the caller's tensors hold the
    base (bytes land straight in them), version 3 finds a byte of its base
    flipped: verification catches it and that piece comes again in full."""
    name = mode.replace("-", "_")
    flipped = None
    if mode == "in-place" and v == 3 and next(iter(own.values())).device.type == "cpu":
        flipped = flip_kept(own, want)
    got = into.pull(version=v, timeout=300)
    bad = [n for n in want if not torch.equal(own[n].cpu(), want[n])]
    c.ok("%s_into_%s_v%d_every_tensor_equal" % (tag, name, v), got == v and not bad,
         "version %d, differing %s" % (got, bad[:3]))
    lp = into.last_pull
    if flipped:
        c.ok("%s_into_%s_v%d_flipped_base_refetched" % (tag, name, v),
             lp["refetched"] == 1, "%s after flipping %s byte %d" % (lp, *flipped))
    elif v > 1:
        c.ok("%s_into_%s_v%d_deltas" % (tag, name, v), lp["delta_pieces"] > 0 and lp["refetched"] == 0, str(lp))


def main():
    c = common.Checks()
    versions = int(os.environ.get("HF_TEST_VERSIONS", "4"))
    tag = "hf_delta" if os.environ.get("HF_TEST_MODEL", "tiny") == "tiny" else "qwen05b_hf_delta"
    with common.Serve() as srv, tempfile.TemporaryDirectory() as out:
        t = common.spawn("hf_delta_trainer.py", srv.url, versions, tag, out)
        try:
            model, _cfg = qwen_tiny.test_model(seed=1)  # different weights until the first pull
            dev = next(model.parameters()).device
            with wsync.hf.Receiver(srv.url, tag, 0, 1, model, mode="staged", transport="tcp") as rcv, \
                    contextlib.ExitStack() as stack:
                intos = None
                for v in range(1, versions + 1):
                    common.wait_line(t, "published version %d" % v, timeout=600)
                    want = torch.load(os.path.join(out, "v%d.pt" % v))
                    if intos is None:  # the trainer waits for `tag` only: these nodes pull each version first
                        intos = []
                        for mode in ("staged", "in-place"):
                            own = {n: torch.zeros_like(x).to(dev) for n, x in want.items()}
                            intos.append((mode, own, stack.enter_context(wsync.Receiver(
                                srv.url, "%s_into_%s" % (tag, mode.replace("-", "_")), 0, 1, into=own, mode=mode, transport="tcp",
                                device=dev))))
                    for mode, own, into in intos:
                        into_check(c, tag, v, mode, into, own, want)
                    t0 = time.time()
                    got = rcv.pull(version=v, timeout=300)
                    secs = time.time() - t0
                    mine = wsync.hf.state_dict(model)
                    bad = [n for n in want if n not in mine or not torch.equal(mine[n].cpu(), want[n])]
                    c.ok("%s_v%d_every_tensor_equal" % (tag, v), got == v and not bad and mine.keys() == want.keys(),
                         "version %d, differing %s" % (got, bad[:3]))
                    lp = rcv.receiver.last_pull
                    image = sum(x.numel() * x.element_size() for x in want.values())
                    wire = image - lp["saved_bytes"]
                    print("%s: version %d (%s) pulled in %.3f s, %d pieces as deltas, %d of %d bytes on the wire "
                          "(%.2f%%)" % (tag, v, str(mine[next(iter(mine))].device), secs, lp["delta_pieces"], wire,
                                        image, 100.0 * wire / image), flush=True)
                    if v > 1:
                        c.ok("%s_v%d_deltas_below_full" % (tag, v),
                             lp["delta_pieces"] > 0 and lp["refetched"] == 0 and wire < image / 4, str(lp))
        finally:
            t.stdin.close()
            t.kill()
            t.wait()
    c.exit()


main()
