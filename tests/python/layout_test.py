"""layout_test.py: the C fsdp layout gives each rank exactly the bytes of
torch.chunk(t, world, 0)[rank] (ceil-sized chunks, fewer than world of them
when rows run out), over many shapes and worlds, and the Python side agrees."""
import random

import common
import torch
import wsync
from wsync import _lib, _manifest


def main():
    checks = common.Checks()
    rnd = random.Random(7)
    cases, bad = 0, []
    for trial in range(300):
        world = rnd.randint(1, 9)
        specs = []
        for i in range(rnd.randint(1, 5)):
            rows = rnd.choice([0, 1, 2, 3, world - 1, world, world + 1, rnd.randint(0, 40)])
            shape = (max(rows, 0),) + tuple(rnd.randint(1, 5) for _ in range(rnd.randint(0, 2)))
            specs.append(("t%d" % i, rnd.choice([torch.bfloat16, torch.float32, torch.int8]), shape))
        if rnd.random() < 0.2:
            specs.append(("scalar", torch.float32, ()))
        entries, _, mj = _manifest.build(specs)
        for rank in range(world):
            got = _manifest.owned_extents(mj, _lib.LAYOUT_FSDP, world, rank)
            data = []  # data bytes torch.chunk gives this rank, as image ranges
            for e in entries:
                t = torch.empty(e.shape, dtype=e.dtype)
                if not e.shape or e.shape[0] == 0:
                    if rank == 0 and e.size:
                        data.append((e.offset, e.offset + e.size))
                    continue
                parts = torch.chunk(t, world, 0)
                rb = e.size // e.shape[0]
                start = sum(p.shape[0] for p in parts[:rank])
                n = parts[rank].shape[0] if rank < len(parts) else 0
                if n:
                    data.append((e.offset + start * rb, e.offset + (start + n) * rb))
            # every chunk byte inside an owned extent, no other tensor byte owned
            owned = set()
            for off, ln in got:
                owned.update(range(off, off + ln))
            mine = set()
            for lo, hi in data:
                mine.update(range(lo, hi))
            tensor_bytes = set()
            for e in entries:
                tensor_bytes.update(range(e.offset, e.offset + e.size))
            if owned & tensor_bytes != mine:
                bad.append((world, rank, [(e.name, e.shape) for e in entries]))
            cases += 1
    checks.ok("fsdp_layout_is_torch_chunk_%d_cases" % cases, not bad, "differs for %s" % bad[:3])

    # The Python rule used to check shard shapes is the same one.
    mism = [(r, w, k) for r in range(0, 30) for w in range(1, 9) for k in range(w)
            if (lambda lo_hi, parts: (lo_hi[1] - lo_hi[0]) != (parts[k].shape[0] if k < len(parts) else 0))(
                _manifest.fsdp_rows(r, w, k), torch.chunk(torch.empty(r, 1), w, 0))]
    checks.ok("fsdp_rows_is_torch_chunk", not mism, str(mism[:5]))

    # shard_state_dict on plain tensors is torch.chunk; DTensor is feature-detected.
    sd = {"a": torch.arange(10.0), "s": torch.tensor(1.0)}
    t, shapes, r, w = wsync.shard_state_dict(sd, rank=3, world=4)
    checks.ok("shard_state_dict_plain", torch.equal(t["a"], torch.chunk(sd["a"], 4)[3]) and shapes["a"] == (10,)
              and r == 3 and w == 4 and t["s"].dim() == 0, str(t))
    t, _, _, _ = wsync.shard_state_dict({"a": torch.arange(3.0)}, rank=3, world=4)
    checks.ok("shard_state_dict_rank_past_the_chunks_gets_empty", t["a"].shape == (0,), str(t["a"].shape))
    checks.ok("dtensor_detected_as_torch_has_it", wsync.dtensor_available() ==
              (hasattr(torch.distributed, "tensor") and hasattr(torch.distributed.tensor, "DTensor")
               or hasattr(torch.distributed, "_tensor")), torch.__version__)
    checks.exit()


main()
