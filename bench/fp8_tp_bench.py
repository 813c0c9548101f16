"""fp8_tp_bench.py: the Qwen2.5-7B tensor list (bench/qwen7b.h's shapes, random BF16) to an FP8 TP=2 node on one
GPU, against what an FP8 engine does without FP8 on the way, in the same run:

  fp8       wsync.Receiver(tp=2, rules=configs/rules/deepseek-fp8.json): each rank receives its slices with
            every linear weight (fused qkv and gate_up, o_proj, down_proj) as float8_e4m3fn + 128 x 128 scales
  bf16+torch  wsync.Receiver(tp=2) (the built-in vLLM rules: BF16, wsync today), then each rank quantizes those
            weights with torch ops (docs/FP8.md's definition) into FP8 parameters it holds

2 trainer ranks (`wsync trainer --device cuda:0 --layout fsdp`) publish one version; once both said
"published", each configuration's node (2 engine ranks, one process each, in place on cuda:0) pulls it. Printed
per configuration: each rank's time from its pull's start to ready (for bf16+torch, plus its quantization),
the node's (the slower rank), and each engine rank's peak GPU memory (nvidia-smi's per-process used_memory,
sampled every 50 ms: its CUDA context, the image, and with bf16+torch the FP8 parameters and temporaries).
Needs a GPU, torch with float8_e4m3fn and safetensors.

    python3 bench/fp8_tp_bench.py [--wsync build/wsync] [--div 1] [--dir /tmp]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from soak import free_port  # noqa: E402  (bench/soak.py)

LINEAR = ("qkv_proj.weight", "o_proj.weight", "gate_up_proj.weight", "down_proj.weight")


def qwen7b(div):
    H, I, V, KV = 3584 // div, 18944 // div, 152064 // div, 512 // div
    t = [("model.embed_tokens.weight", [V, H])]
    for l in range(28):
        p = "model.layers.%d." % l
        t += [(p + "self_attn.q_proj.weight", [H, H]), (p + "self_attn.q_proj.bias", [H]),
              (p + "self_attn.k_proj.weight", [KV, H]), (p + "self_attn.k_proj.bias", [KV]),
              (p + "self_attn.v_proj.weight", [KV, H]), (p + "self_attn.v_proj.bias", [KV]),
              (p + "self_attn.o_proj.weight", [H, H]), (p + "mlp.gate_proj.weight", [I, H]),
              (p + "mlp.up_proj.weight", [I, H]), (p + "mlp.down_proj.weight", [H, I]),
              (p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H])]
    return t + [("model.norm.weight", [H]), ("lm_head.weight", [V, H])]


def gen(path, div):
    import torch
    from safetensors.torch import save_file
    g = torch.Generator(device="cuda:0").manual_seed(7)
    sd = {n: (torch.randn(s, generator=g, device="cuda:0") * 0.02).to(torch.bfloat16).cpu() for n, s in qwen7b(div)}
    save_file(sd, path)
    return sum(v.numel() * 2 for v in sd.values())


def quantize(x, q, s):
    """docs/FP8.md with torch ops: x (BF16, both dims multiples of 128) into q (float8_e4m3fn) and s (scales)."""
    import torch
    r, c = x.shape
    xb = x.float().reshape(r // 128, 128, c // 128, 128)
    amax = xb.abs().amax(dim=(1, 3))
    sc = torch.where(amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, 448.0))
    q.copy_((xb / sc[:, None, :, None]).clamp(-448.0, 448.0).reshape(r, c).to(torch.float8_e4m3fn))
    s.copy_(sc)


def rank_main(a):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import wsync
    rules = open(os.path.join(ROOT, "configs/rules/deepseek-fp8.json")).read() if a.kind == "fp8" else None
    rcv = wsync.Receiver(a.url, a.engine, a.rank, 2, tp=2, rules=rules, device="cuda:0", mode="in-place")
    t0 = time.perf_counter()
    rcv.pull(version=1, timeout=300)
    t1 = time.perf_counter()
    setup_s = rcv.progress()["last_setup_s"]
    views = rcv.tensors()
    nfp8 = sum(1 for v in views.values() if v.dtype == torch.float8_e4m3fn)
    quant_s, held = 0.0, 0
    if a.kind == "bf16":
        names = [n for n in views if n.endswith(LINEAR)]
        params = {n: (torch.empty(views[n].shape, dtype=torch.float8_e4m3fn, device="cuda:0"),
                      torch.empty(views[n].shape[0] // 128, views[n].shape[1] // 128, device="cuda:0"))
                  for n in names}
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        for n in names:
            quantize(views[n], *params[n])
        torch.cuda.synchronize()
        quant_s = time.perf_counter() - t2
        nfp8 = len(params)
        held = sum(q.numel() + 4 * s.numel() for q, s in params.values())
    print(json.dumps({"rank": a.rank, "pull_s": t1 - t0, "setup_s": setup_s, "quant_s": quant_s, "fp8_tensors": nfp8,
                      "fp8_param_bytes": held}), flush=True)
    time.sleep(0.3)  # one more memory sample at the peak
    rcv.close()


def sample(pids, peak, stop):
    while not stop.is_set():
        try:
            out = subprocess.check_output(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                           "--format=csv,noheader,nounits"], text=True)
            for line in out.splitlines():
                pid, mib = (int(x) for x in line.split(","))
                if pid in pids:
                    peak[pid] = max(peak.get(pid, 0), mib)
        except (subprocess.CalledProcessError, ValueError):
            pass
        time.sleep(0.05)


def node(a, url, kind):
    env = dict(os.environ, WSYNC_LIB=os.path.join(os.path.dirname(os.path.abspath(a.wsync)), "libwsync.so"))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-main", "--url", url, "--engine",
                               "%s-%d" % (kind, os.getpid()), "--rank", str(r), "--kind", kind],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for r in (0, 1)]
    peak, stop = {}, threading.Event()
    th = threading.Thread(target=sample, args=({p.pid for p in procs}, peak, stop), daemon=True)
    th.start()
    res = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            raise SystemExit("%s rank failed (%s): %s" % (kind, p.returncode, err[-2000:]))
        res.append(dict(json.loads(lines[-1]), peak_mib=peak.get(p.pid, 0)))
    stop.set()
    th.join()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wsync", default=os.path.join(ROOT, "build/wsync"))
    ap.add_argument("--div", type=int, default=1)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rank-main", action="store_true")
    ap.add_argument("--url")
    ap.add_argument("--engine")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--kind")
    a = ap.parse_args()
    if a.rank_main:
        return rank_main(a)
    d = tempfile.mkdtemp(dir=a.dir)
    path = os.path.join(d, "qwen7b.safetensors")
    t = time.time()
    size = gen(path, a.div)
    print("fp8_tp_bench: Qwen2.5-7B list / %d, %.2f GB BF16 (written in %.1f s)" % (a.div, size / 1e9, time.time() - t))
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    procs = [subprocess.Popen([a.wsync, "serve", "--listen", "127.0.0.1:%d" % port], stderr=subprocess.DEVNULL)]
    logs = [os.path.join(d, "trainer%d.log" % r) for r in (0, 1)]
    try:
        time.sleep(1.0)
        for r in (0, 1):
            procs.append(subprocess.Popen([a.wsync, "trainer", "--control", url, "--rank", str(r), "--world", "2",
                                           "--layout", "fsdp", "--safetensors", path, "--versions", "1",
                                           "--wait-engines", "2", "--device", "cuda:0"],
                                          stdout=open(logs[r], "w"), stderr=subprocess.STDOUT))
        deadline = time.time() + 300
        while not all(re.search("published version 1", open(f).read()) for f in logs):
            if time.time() > deadline or any(p.poll() is not None for p in procs[1:]):
                raise SystemExit("the trainers did not publish: %s" % " | ".join(open(f).read()[-500:] for f in logs))
            time.sleep(0.2)
        for kind, what in (("fp8", "wsync FP8 on the way (tp=2, FP8 rules)"),
                           ("bf16", "wsync BF16 (tp=2) + torch quantization")):
            res = node(a, url, kind)
            for r in res:
                print("  %-40s rank %d: pull %.1f ms (set-up %.1f ms of it), quantize %.1f ms, %d FP8 tensors, "
                      "peak GPU memory %d MiB" % (what, r["rank"], 1e3 * r["pull_s"], 1e3 * r["setup_s"],
                                                  1e3 * r["quant_s"], r["fp8_tensors"], r["peak_mib"]))
            print("%-44s node ready in %.1f ms (slower rank), %.1f ms without the pulls' set-up, peak GPU memory "
                  "per rank %d MiB" % (what, 1e3 * max(r["pull_s"] + r["quant_s"] for r in res),
                                      1e3 * max(r["pull_s"] - r["setup_s"] + r["quant_s"] for r in res),
                                      max(r["peak_mib"] for r in res)))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        os.remove(path)


if __name__ == "__main__":
    main()
