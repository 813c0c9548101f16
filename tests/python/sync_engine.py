"""sync_engine.py URL ENGINE LOCAL_RANK LOCAL_WORLD KIND VERSIONS: one local
rank of an engine node pulling versions 1..VERSIONS and comparing every
tensor with torch.equal against the state it regenerates itself. KIND:
  views    in place, no into=: the rank's tensors are rcv.tensors(), taken once;
           every later pull must land in those same tensors
  staged   into= the rank's own tensors, mode "staged"
  inplace  into= the rank's own tensors, mode "in-place"
  tp       tp=2 (vLLM's slices, TP rank = local rank % 2), staged, compared with
           slices cut here with torch ops (qwen_tiny.tp_slices)
  tpinto   tp=2, into= the rank's own destination tensors (filled with 7s
           first: vocabulary padding must come out zero), mode "in-place";
           with WSYNC_TEST_DEVICE (e.g. cuda:0) those tensors are on that GPU
Prints PASS/FAIL lines."""
import os
import sys

import common
import qwen_tiny
import torch
import wsync


def main():
    url, engine, lr, lw, kind, versions = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5], int(sys.argv[6])
    checks = common.Checks()
    tag = "%s_rank%d" % (kind, lr)
    own = {n: torch.zeros(s, dtype=torch.bfloat16) for n, s in qwen_tiny.specs()}
    if kind == "views":
        rcv = wsync.Receiver(url, engine, lr, lw, mode="in-place")
    elif kind == "tp":
        rcv = wsync.Receiver(url, engine, lr, lw, tp=2)
    elif kind == "tpinto":
        dev = os.environ.get("WSYNC_TEST_DEVICE", "cpu")
        own = {n: torch.full_like(t, 7, device=dev) for n, t in
               qwen_tiny.tp_slices(qwen_tiny.state(1, cfg=qwen_tiny.CONFIG_TP), 2, lr % 2).items()}
        own_ptrs = {n: t.data_ptr() for n, t in own.items()}
        rcv = wsync.Receiver(url, engine, lr, lw, tp=2, into=own, mode="in-place")
    else:
        rcv = wsync.Receiver(url, engine, lr, lw, into=own, mode="in-place" if kind == "inplace" else "staged")
    with rcv:
        mine, ptrs = None, None
        for v in range(1, versions + 1):
            got = rcv.pull(timeout=60)
            want = qwen_tiny.state(v)
            if kind == "tpinto":
                want = qwen_tiny.tp_slices(qwen_tiny.state(v, cfg=qwen_tiny.CONFIG_TP), 2, lr % 2)
                held = own
                checks.ok("%s_v%d_tensors_are_into" % (tag, v),
                          own_ptrs == {n: t.data_ptr() for n, t in rcv.tensors().items() if n in own},
                          "tensors() does not hand out the into= tensors")
            elif kind == "tp":
                want = qwen_tiny.tp_slices(qwen_tiny.state(v, cfg=qwen_tiny.CONFIG_TP), 2, lr % 2)
                held = rcv.tensors()
                shapes = [n for n in want if n in held and tuple(held[n].shape) != tuple(want[n].shape)]
                checks.ok("%s_v%d_destination_names_and_shapes" % (tag, v), set(held) == set(want) and not shapes,
                          "names differ: %s; shapes differ: %s" % (sorted(set(held) ^ set(want))[:4],
                                                                   [(n, tuple(held[n].shape), tuple(want[n].shape))
                                                                    for n in shapes[:3]]))
                if set(held) != set(want) or shapes:
                    continue
            elif kind == "views":
                if mine is None:
                    mine = rcv.tensors()
                    ptrs = {n: t.data_ptr() for n, t in mine.items()}
                held = mine
                checks.ok("%s_v%d_same_memory" % (tag, v), ptrs == {n: t.data_ptr() for n, t in rcv.tensors().items()},
                          "the in-place image moved")
            else:
                held = own
            bad = [n for n in want if not torch.equal(held[n].cpu(), want[n])]
            checks.ok("%s_v%d_every_tensor_equal" % (tag, v), got == v and not bad and len(held) == len(want),
                      "got version %d, %d of %d tensors differ (%s)" % (got, len(bad), len(want), bad[:3]))
    checks.exit()


main()
