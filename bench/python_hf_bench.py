"""python_hf_bench.py: publish-to-ready per version of a transformers model
(Qwen2.5-0.5B's configuration, random init, bf16) between a trainer process
and an engine process sharing cuda:0, three ways on the same bytes:

  (a) wsync.hf: hf.Publisher(pack=True).publish(v) -> hf.Receiver in place
      (Python clock: publish() called -> pull() returned with the model's
      parameters pointing at the verified version; also the C trace clock);
  (b) packed IPC, what colocated frameworks do without wsync (vLLM's "ipc"
      weight-transfer backend): the trainer packs its parameters into one
      CUDA buffer shared once through CUDA IPC (torch.multiprocessing), the
      engine copies them out into its parameters;
  (c) the C command line: wsync trainer --safetensors (the same state dict)
      and wsync engine --mode in-place on cuda:0, timed from the trainer's
      "publish of version v started" to the engine's "reported" trace lines.

Each: 2 warm-up versions, then VERSIONS measured; medians and ratios printed.
  python3 bench/python_hf_bench.py [--versions 8] [--model qwen2.5-0.5b|tiny] [--out results.json]
Run from the repository root after `make` with CUDA (WSYNC_LIB or build/)."""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
WSYNC = os.environ.get("WSYNC_BIN", os.path.join(ROOT, "build", "wsync"))
WARMUP = 2
# --device cpu runs the same three paths on host memory (a smoke test where
# there is no GPU); children read it from the environment.
DEVICE = os.environ.get("WSYNC_BENCH_DEVICE", "cuda:0")


def sync():
    import torch
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def model_cfg(name):
    import tiny_qwen
    return tiny_qwen.QWEN25_05B if name == "qwen2.5-0.5b" else tiny_qwen.CONFIG


def build(name, seed, device=None):
    import tiny_qwen
    return tiny_qwen.make_model(model_cfg(name), device=device or DEVICE, seed=seed)


def step_weights(params, v):
    """A cheap stand-in for an optimizer step: every parameter changes."""
    import torch
    with torch.no_grad():
        torch._foreach_add_(params, 1e-3 * v)


def start_serve():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([WSYNC, "serve", "--listen", "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    import urllib.request
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).close()
            return p, url
        except Exception:
            time.sleep(0.05)
    raise RuntimeError("wsync serve did not start")


# --- (a) wsync.hf ------------------------------------------------------------
def a_trainer(url, name, n, q_ready, q_go, q_t):
    import torch
    import wsync.hf
    model = build(name, 0)
    params = list(model.parameters())
    with wsync.hf.Publisher(url, 0, 1, model, pack=True) as pub:
        for v in range(1, n + 1):
            step_weights(params, v)
            sync()
            q_go.get()  # the engine waits in pull()
            t0 = time.monotonic()
            pub.publish(v)
            q_t.put(("publish", v, t0, time.monotonic()))
            q_ready.get()
        q_go.get()


def a_engine(url, name, n, q_ready, q_go, q_t):
    import torch
    import wsync.hf
    model = build(name, 1)
    with wsync.hf.Receiver(url, "bench-py", 0, 1, model, mode="in-place") as rcv:
        for v in range(1, n + 1):
            q_go.put(v)
            got = rcv.pull(timeout=120)
            t1 = time.monotonic()
            sync()
            q_t.put(("ready", got, t1, model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()))
            q_ready.put(v)
        q_go.put(0)


# --- (b) packed CUDA IPC -----------------------------------------------------
def b_trainer(name, n, q_buf, q_go, q_done, q_t):
    import torch
    from wsync import hf
    model = build(name, 0)
    sd = hf.state_dict(model)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    buf = torch.empty(total, dtype=torch.uint8, device=DEVICE)
    views, off = [], 0
    for t in sd.values():
        nb = t.numel() * t.element_size()
        views.append((buf[off:off + nb], t.reshape(-1).view(torch.uint8)))
        off += nb
    q_buf.put(buf)  # shared once: torch.multiprocessing sends a CUDA IPC handle
    params = list(model.parameters())
    for v in range(1, n + 1):
        step_weights(params, v)
        sync()
        t0 = time.monotonic()
        for dst, src in views:
            dst.copy_(src)
        sync()
        q_go.put(v)
        q_t.put(("publish", v, t0, time.monotonic()))
        q_done.get()
    q_done.get()


def b_engine(name, n, q_buf, q_go, q_done, q_t):
    import torch
    from wsync import hf
    model = build(name, 1)
    sd = hf.state_dict(model)
    buf = q_buf.get()
    views, off = [], 0
    for t in sd.values():
        nb = t.numel() * t.element_size()
        views.append((t.reshape(-1).view(torch.uint8), buf[off:off + nb]))
        off += nb
    for v in range(1, n + 1):
        q_go.get()
        for dst, src in views:
            dst.copy_(src)
        sync()
        q_t.put(("ready", v, time.monotonic(), True))
        q_done.put(v)
    del buf
    q_done.put(0)


def collect(q_t, n):
    pub, ready = {}, {}
    while len(pub) < n or len(ready) < n:
        kind, v, t, extra = q_t.get(timeout=600)
        (pub if kind == "publish" else ready)[v] = (t, extra)
    return [ready[v][0] - pub[v][0] for v in range(WARMUP + 1, n + 1)]


# --- (c) the C command line --------------------------------------------------
def save_safetensors(sd, path):
    """The state dict as a safetensors file (the format is an 8-byte header
    length, a JSON header, then the tensors' bytes), written here so the
    bench needs no safetensors package."""
    from wsync._torch import TO_NAME
    header, off, blobs = {}, 0, []
    for n, t in sd.items():
        b = t.detach().contiguous().cpu().reshape(-1).view(__import__("torch").uint8).numpy().tobytes()
        header[n] = {"dtype": TO_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def c_path(name, n, tmp):
    from wsync import hf
    st = os.path.join(tmp, "model.safetensors")
    save_safetensors(hf.state_dict(build(name, 0)), st)
    serve, url = start_serve()
    env = dict(os.environ, WSYNC_TRACE="1")
    try:
        eng = subprocess.Popen([WSYNC, "engine", "--control", url, "--engine", "bench-c", "--local-rank", "0",
                                "--local-world", "1", "--device", "host" if DEVICE == "cpu" else DEVICE, "--mode", "in-place", "--versions", str(n),
                                "--timeout-ms", "120000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
        tr = subprocess.Popen([WSYNC, "trainer", "--control", url, "--rank", "0", "--world", "1", "--safetensors", st,
                               "--device", "host" if DEVICE == "cpu" else DEVICE, "--versions", str(n), "--wait-engines", "1",
                               "--exit-after-publish"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
        eout, eerr = eng.communicate(timeout=600)
        tr.kill()
        tout, terr = tr.communicate()
    finally:
        serve.kill()
    starts = {int(m.group(2)): float(m.group(1)) for m in
              re.finditer(r"TRACE (\d+\.\d+) \[\d+\] trainer rank 0: publish of version (\d+) started", terr)}
    ready, current = {}, None
    for line in eerr.splitlines():
        m = re.search(r"TRACE (\d+\.\d+) .*version (\d+) is the one to pull", line)
        if m:
            current = int(m.group(2))
        m = re.search(r"TRACE (\d+\.\d+) .*engine bench-c: reported", line)
        if m and current is not None:
            ready[current] = float(m.group(1))
    vs = [v for v in range(WARMUP + 1, n + 1) if v in starts and v in ready]
    if eng.returncode != 0 or not vs:
        raise RuntimeError("C path failed (engine exit %s):\n%s\n%s\n%s" % (eng.returncode, eout[-1500:],
                                                                          eerr[-1500:], terr[-1500:]))
    return [ready[v] - starts[v] for v in vs]


def run_pair(target_a, target_b, args):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    pa = ctx.Process(target=target_a, args=args)
    pb = ctx.Process(target=target_b, args=args)
    pa.start()
    pb.start()
    return pa, pb


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--versions", type=int, default=8, help="measured versions (after %d warm-up)" % WARMUP)
    ap.add_argument("--model", default="qwen2.5-0.5b", choices=["qwen2.5-0.5b", "tiny"])
    ap.add_argument("--out", help="write the figures as JSON here")
    ap.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a smoke run without a GPU")
    a = ap.parse_args()
    global DEVICE
    DEVICE = os.environ["WSYNC_BENCH_DEVICE"] = a.device
    import torch
    import torch.multiprocessing as mp
    if DEVICE != "cpu" and not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    n = a.versions + WARMUP
    ctx = mp.get_context("spawn")
    from wsync import hf
    m = build(a.model, 0)
    nbytes = sum(t.numel() * t.element_size() for t in hf.state_dict(m).values())
    del m
    print("model %s on %s: %.1f MB of bf16 weights (tied lm_head once), %d versions measured after %d warm-up"
          % (a.model, DEVICE, nbytes / 1e6, a.versions, WARMUP), flush=True)

    res = {}
    serve, url = start_serve()
    os.environ["WSYNC_TRACE"] = "0"
    try:
        qs = [ctx.Queue() for _ in range(3)]
        pa, pb = run_pair(a_trainer, a_engine, (url, a.model, n) + tuple(qs))
        res["a_wsync_hf"] = collect(qs[2], n)
        pa.join(120)
        pb.join(120)
    finally:
        serve.kill()
    qs = [ctx.Queue() for _ in range(4)]
    pa, pb = run_pair(b_trainer, b_engine, (a.model, n) + tuple(qs))
    res["b_packed_ipc"] = collect(qs[3], n)
    pa.join(120)
    pb.join(120)
    with tempfile.TemporaryDirectory() as tmp:
        res["c_cli"] = c_path(a.model, n, tmp)

    med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
    for k, v in res.items():
        print("%-14s median %8.2f ms  (per version: %s)" % (k, med[k], " ".join("%.2f" % (x * 1e3) for x in v)))
    print("ratio wsync.hf / C command line: %.3f   (target <= 1.10)" % (med["a_wsync_hf"] / med["c_cli"]))
    print("ratio wsync.hf / packed IPC:     %.3f   (target < 1)" % (med["a_wsync_hf"] / med["b_packed_ipc"]))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"model": a.model, "bytes": nbytes, "ms": res, "median_ms": med}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
