"""tp_delta_engine.py URL ENGINE LOCAL_RANK VERSIONS SRC_DIR DEVICE: one rank
of a TP=2 node (two local ranks) receiving, in place over tcp, into its own
destination tensors on DEVICE (cpu or cuda:N; filled with 7s first) the
versions `wsync trainer --safetensors` publishes from SRC_DIR/v%04d.safetensors
(tests/tools/adamw_versions.py: version v is file v-1). On a GPU the rank's
image is sparse (engine_side/gpu_sparse.c: the bytes land straight in these
tensors), so a delta's base is gathered out of them (engine_side/delta_land.c).
After each pull every destination tensor is compared bit for bit with the
slices tests/integration/tp_tool.py cuts from the version's file by the rules
(an implementation independent of wsync's); from version 2 on rcv.last_pull
must show pieces applied as deltas and none re-fetched. Prints PASS/FAIL
lines and each version's bytes on the wire."""
import os
import sys

import common
import torch
import wsync

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import tp_tool  # noqa: E402  (the rules' slices, stdlib only)
from st_tool import read  # noqa: E402

DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def raw(t):
    """The tensor's bytes, as the safetensors file holds them."""
    return bytes(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())


def main():
    url, engine, lr, versions, src, dev = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5], sys.argv[6]
    c = common.Checks()
    tag = "tp_delta_rank%d" % lr
    want = tp_tool.expected(read(os.path.join(src, "v0000.safetensors"))[0], 2, lr)
    own = {n: torch.full(shape, 7, dtype=DTYPES[dt], device=dev) for n, (dt, shape, _b) in want.items()}
    with wsync.Receiver(url, engine, lr, 2, tp=2, into=own, mode="in-place", transport="tcp") as rcv:
        for v in range(1, versions + 1):
            got = rcv.pull(version=v, timeout=120)
            want = tp_tool.expected(read(os.path.join(src, "v%04d.safetensors" % (v - 1)))[0], 2, lr)
            bad = [n for n in want
                   if n not in own or list(own[n].shape) != list(want[n][1]) or raw(own[n]) != want[n][2]]
            c.ok("%s_v%d_every_tensor_equal" % (tag, v), got == v and not bad and own.keys() == want.keys(),
                 "version %d, %d of %d tensors differ (%s)" % (got, len(bad), len(want), bad[:3]))
            lp = rcv.last_pull
            image = sum(len(b) for _d, _s, b in want.values())
            print("%s: version %d: %d pieces as deltas, %d bytes saved of %d, %d re-fetched" %
                  (tag, v, lp["delta_pieces"], lp["saved_bytes"], image, lp["refetched"]), flush=True)
            if v > 1:
                c.ok("%s_v%d_deltas" % (tag, v), lp["delta_pieces"] > 0 and lp["refetched"] == 0, str(lp))
    c.exit()


main()
