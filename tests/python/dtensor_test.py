"""dtensor_test.py: wsync.shard_state_dict over real DTensors (torch 2.x):
2 trainer processes (gloo, CPU) hold the tiny model's bf16 state dict as
DTensors sharded Shard(0) on a 1-D mesh (uneven dim-0 sizes included),
publish their local shards with layout="fsdp"; this process receives and
compares every tensor with torch.equal. SKIP where torch has no DTensor
(Debian's torch 1.13)."""
import os
import sys

import common
import qwen_tiny
import torch
import wsync


def trainer(rank, url, port):
    import torch.distributed as dist
    try:
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        from torch.distributed._tensor import Shard, distribute_tensor
        from torch.distributed._tensor.device_mesh import init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    sd = {n: distribute_tensor(t, mesh, [Shard(0)]) for n, t in qwen_tiny.state(1).items()}
    tensors, shapes, r, w = wsync.shard_state_dict(sd)
    assert (r, w) == (rank, 2), (r, w)
    with wsync.Publisher(url, r, w, tensors, shapes=shapes, layout="fsdp") as pub:
        pub.publish(1)
        dist.barrier()  # both published
        common.wait_engines(url, ["dtensor"], 1)
    dist.destroy_process_group()


def main():
    c = common.Checks()
    if not wsync.dtensor_available():
        print("SKIP dtensor_shards_published: skipped: torch %s has no DTensor" % torch.__version__)
        return
    import torch.multiprocessing as mp
    with common.Serve() as srv:
        port = common.free_port()
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=trainer, args=(r, srv.url, port)) for r in range(2)]
        for p in procs:
            p.start()
        with wsync.Receiver(srv.url, "dtensor", 0, 1) as rcv:
            got = rcv.pull(timeout=120)
            want, held = qwen_tiny.state(1), rcv.tensors()
            bad = [n for n in want if not torch.equal(held[n], want[n])]
            c.ok("dtensor_shards_published_every_tensor_equal", got == 1 and not bad, str(bad[:3]))
        for p in procs:
            p.join(60)
        c.ok("dtensor_trainers_exit_0", all(p.exitcode == 0 for p in procs), str([p.exitcode for p in procs]))
    c.exit()


if __name__ == "__main__":
    sys.exit(main())
