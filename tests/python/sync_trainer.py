"""sync_trainer.py URL RANK WORLD KIND VERSIONS ENGINES: one trainer rank
publishing the tiny Qwen model's bf16 state dict for versions 1..VERSIONS,
each after every engine node in ENGINES (comma-separated, or -) held the one
before. KIND: full (every rank passes every tensor), fsdp (torch.chunk
shards, layout="fsdp"), pack (full tensors from wsync.pack). Env
START_VERSION=s: publish versions s..VERSIONS (a restarted trainer);
MODEL_CFG=tp: the sizes a TP of 2 divides. The C test hooks
(WSYNC_TEST_CORRUPT_PIECE...) are read once per process: set them in the
environment of a trainer started for the versions they should hit.
Keeps serving until stdin closes."""
import os
import sys

import common
import qwen_tiny
import wsync


def main():
    url, rank, world, kind, versions, engines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        int(sys.argv[5]), [e for e in sys.argv[6].split(",") if e and e != "-"]
    cfg = qwen_tiny.CONFIG_TP if os.environ.get("MODEL_CFG") == "tp" else qwen_tiny.CONFIG
    full = qwen_tiny.state(1, cfg=cfg)
    if kind == "fsdp":
        tensors = {n: t.chunk(world, 0)[rank].clone() for n, t in full.items()}
        shapes = {n: tuple(t.shape) for n, t in full.items()}
        pub = wsync.Publisher(url, rank, world, tensors, shapes=shapes, layout="fsdp", chunk=64 << 10)
    else:
        tensors = wsync.pack(full) if kind == "pack" else full
        pub = wsync.Publisher(url, rank, world, tensors, chunk=64 << 10)
    print("trainer rank %d: %d tensors, %d bytes staged, %d owned" % (rank, len(tensors), pub.staged_bytes,
                                                                     pub.owned_bytes), flush=True)
    start = int(os.environ.get("START_VERSION", "1"))
    with pub:
        for v in range(start, versions + 1):
            new = qwen_tiny.state(v, cfg=cfg)
            for n, t in tensors.items():  # in place, as an optimizer step writes
                t.copy_(new[n].chunk(world, 0)[rank] if kind == "fsdp" else new[n])
            pub.publish(v)
            print("trainer rank %d: published version %d" % (rank, v), flush=True)
            if engines and v < versions:
                common.wait_engines(url, engines, v)
        print("trainer rank %d: done" % rank, flush=True)
        common.wait_stdin_closed()


main()
