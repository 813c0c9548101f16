"""packed_ipc_torch.py: the colocated packed-IPC weight sync, written with
PyTorch alone, as the second implementation next to bench/gpu_colocated_bench
(its C/CUDA version).

What colocated RL frameworks do on one GPU (vLLM's `ipc` weight-transfer
backend, SGLang's update_weights_from_tensor): the trainer packs its
parameters into one CUDA buffer that it shared with the engine process once
through CUDA IPC (torch.multiprocessing); per step it packs, signals, and the
engine copies every parameter out into tensors of its own. No verification.

Per step, timed on the trainer's clock: pack start -> the engine reports its
copies done (both sides synchronize their streams). Also in the same run: one
device-to-device copy of the packed buffer (the floor of a one-copy sync).
Model: Qwen2.5-7B's tensor list (339 bf16 tensors, 15.23 GB, the same shapes
as bench/qwen7b.h), or scaled down with --div (sizes divided, bytes by div^2).

    python3 bench/packed_ipc_torch.py [--div 1] [--steps 7] [--device cuda:0]

Prints `skipped: <reason>` without CUDA.
"""
import argparse
import statistics
import sys
import time


def qwen7b_shapes(div):
    H, I, V, KV = 3584 // div, 18944 // div, 152064 // div, 4 * 128 // div
    s = [("model.embed_tokens.weight", (V, H))]
    for l in range(28):
        p = "model.layers.%d." % l
        s += [(p + "input_layernorm.weight", (H,)),
              (p + "self_attn.q_proj.weight", (H, H)), (p + "self_attn.q_proj.bias", (H,)),
              (p + "self_attn.k_proj.weight", (KV, H)), (p + "self_attn.k_proj.bias", (KV,)),
              (p + "self_attn.v_proj.weight", (KV, H)), (p + "self_attn.v_proj.bias", (KV,)),
              (p + "self_attn.o_proj.weight", (H, H)), (p + "post_attention_layernorm.weight", (H,)),
              (p + "mlp.gate_proj.weight", (I, H)), (p + "mlp.up_proj.weight", (I, H)),
              (p + "mlp.down_proj.weight", (H, I))]
    return s + [("model.norm.weight", (H,)), ("lm_head.weight", (V, H))]


def layout(shapes):
    """Offsets (elements) of each tensor in the packed buffer, 256-byte aligned."""
    offs, at = [], 0
    for _, sh in shapes:
        n = 1
        for d in sh:
            n *= d
        offs.append((at, n))
        at += (n + 127) // 128 * 128  # bf16: 128 elements = 256 bytes
    return offs, at


def engine(conn, buf, shapes, device):
    import torch
    torch.cuda.set_device(device)
    offs, _ = layout(shapes)
    own = [torch.empty(sh, dtype=torch.bfloat16, device=device) for _, sh in shapes]
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg == "stop":
            break
        for (o, n), t in zip(offs, own):
            t.view(-1).copy_(buf[o:o + n])
        torch.cuda.synchronize()
        if msg == "check":  # every tensor equals what the trainer packed
            bad = sum(int(not torch.equal(t.view(-1), buf[o:o + n])) for (o, n), t in zip(offs, own))
            conn.send(bad)
        else:
            conn.send("done")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--div", type=int, default=1)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--device", default="cuda:0")
    a = ap.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("skipped: no torch")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    torch.cuda.set_device(a.device)
    shapes = qwen7b_shapes(a.div)
    offs, total = layout(shapes)
    params = [torch.randn(sh, device=a.device).to(torch.bfloat16) for _, sh in shapes]
    buf = torch.empty(total, dtype=torch.bfloat16, device=a.device)
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=engine, args=(theirs, buf, shapes, a.device))  # buf travels once, by CUDA IPC
    child.start()
    if mine.recv() != "ready":
        sys.exit("packed_ipc_torch: the engine process did not start")
    nbytes = sum(n for _, n in offs) * 2
    times = []
    for step in range(a.steps + 2):  # 2 warm-up steps
        for p in params:
            p.add_(1)  # an optimizer step: new bytes every version
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for (o, n), p in zip(offs, params):
            buf[o:o + n].copy_(p.view(-1))
        torch.cuda.synchronize()
        mine.send("step")
        if mine.recv() != "done":
            sys.exit("packed_ipc_torch: the engine failed")
        if step >= 2:
            times.append(time.perf_counter() - t0)
    mine.send("check")
    bad = mine.recv()
    mine.send("stop")
    child.join()
    other = torch.empty_like(buf)
    floor = []
    for _ in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        other.copy_(buf)
        torch.cuda.synchronize()
        floor.append(time.perf_counter() - t0)
    med, fl = statistics.median(times), statistics.median(floor)
    print("packed IPC (torch), %d tensors, %.2f GB, %s: per step median %.2f ms (min %.2f, max %.2f) over %d steps"
          % (len(shapes), nbytes / 1e9, torch.cuda.get_device_name(), med * 1e3, min(times) * 1e3,
             max(times) * 1e3, len(times)))
    print("  one D2D copy of the packed buffer: %.2f ms (%.0f GB/s); packed IPC / D2D copy = %.2f"
          % (fl * 1e3, total * 2 / fl / 1e9, med / fl))
    print("  engine tensors equal the trainer's: %s" % ("yes" if bad == 0 else "NO (%d differ)" % bad))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
