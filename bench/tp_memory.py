"""tp_memory.py: peak memory of the ranks of one TP engine node receiving into
their own tensors (wsync.Receiver(tp=T, into=...)), host memory.

A control endpoint and 2 trainer ranks (`wsync serve`, `wsync trainer
--synthetic SIZE`) publish VERSIONS versions; one engine node of T local
ranks (one process each, TP rank = local rank) pulls every version into
tensors of its own, sized from `wsync target --json`. Each rank samples its
own proportional set size (Pss: shared pages split among the processes that
map them, so the node's Pss adds up to what it really holds) every 10 ms
from /proc/self/smaps_rollup, from before it creates the receiver to after
its last pull. Printed per rank: its destination bytes, the peak Pss above
the baseline (torch and the `into` tensors, touched), i.e. what wsync adds,
in units of the rank's destination bytes, and the node's total. In place,
the image is sparse (setting sparse_image, default 1; WSYNC_SPARSE_IMAGE=0
keeps a whole one): Pss sees its pages, since each is allocated by a write
through a mapping.

With --device cuda:0 the tensors are on that GPU (all ranks share it) and
what is sampled is each rank's GPU memory (nvidia-smi's per-process
used_memory, every 50 ms, from after the tensors are allocated to the
end). In place, the image is then a sparse GPU one (gpu_sparse.c) that
holds only the bytes passing through it (WSYNC_SPARSE_IMAGE=0: a whole one).

    /usr/bin/python3 bench/tp_memory.py [--wsync build/wsync] [--size 1G] [--tp 4]
        [--mode staged|in-place] [--versions 3] [--device cuda:0]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from soak import free_port  # noqa: E402  (bench/soak.py)


def pss_kib():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def rank_main(a):
    """One engine rank: allocate `into`, sample Pss, pull, print one JSON line."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("WSYNC_LIB", os.path.dirname(os.path.abspath(a.wsync)))  # the library beside the binary
    import torch
    import wsync
    target = json.loads(subprocess.check_output(
        [a.wsync, "target", "--synthetic", a.size, "--tp", str(a.tp), "--rank", str(a.rank), "--json"]))
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    into, held = {}, 0
    dev = a.device or "cpu"
    for d in target["tensors"]:
        t = torch.empty(d["shape"], dtype=dtypes[d["dtype"]], device=dev)
        t.view(torch.uint8).fill_(1)  # resident before the baseline
        into[d["name"]] = t
        held += t.numel() * t.element_size()
    if a.device:  # the parent samples this process's GPU memory from here on
        torch.cuda.synchronize()
        print(json.dumps({"ready": os.getpid()}), flush=True)
        sys.stdin.readline()
    base = pss_kib()
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], pss_kib())
            time.sleep(0.01)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    if a.device:
        os.environ.setdefault("WSYNC_LOG", "info")  # the image's backing, one line per rank
    with wsync.Receiver(a.control, "tpmem", a.rank, a.tp, tp=a.tp, into=into, mode=a.mode,
                        host_id="tpmem-engine", transport="tcp", bind_host="127.0.0.1") as r:
        for _ in range(a.versions):
            r.pull(timeout=120)
        stop.set()
        th.join()
        peak[0] = max(peak[0], pss_kib())
        time.sleep(1.0)  # no rank unmaps its windows while another still samples (its Pss would grow)
    print(json.dumps({"rank": a.rank, "held": held, "base_kib": base, "peak_kib": peak[0], "pid": os.getpid()}),
          flush=True)


def gpu_used_kib():
    """{pid: KiB of GPU memory} from nvidia-smi's compute processes."""
    out = subprocess.check_output(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                   "--format=csv,noheader,nounits"], text=True)
    used = {}
    for line in out.splitlines():
        if "," in line:
            pid, mib = line.split(",")
            used[int(pid)] = int(mib) * 1024
    return used


def gpu_sampler(ranks):
    """Once every rank's tensors are allocated (its "ready" line): each rank's
    GPU memory then is its baseline; tells the ranks to go and samples every
    50 ms until stopped (the thread's base and peak, by pid)."""
    pids = [json.loads(p.stdout.readline())["ready"] for p in ranks]
    th = threading.Thread(daemon=True)
    th.stop, th.peak = threading.Event(), {}
    time.sleep(0.5)
    th.base = {pid: gpu_used_kib().get(pid, 0) for pid in pids}
    th.peak = dict(th.base)

    def run():
        while not th.stop.is_set():
            for pid, kib in gpu_used_kib().items():
                if pid in th.peak:
                    th.peak[pid] = max(th.peak[pid], kib)
            time.sleep(0.05)
    th.run = run
    th.start()
    for p in ranks:
        p.stdin.write("go\n")
        p.stdin.flush()
    return th


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wsync", default=os.path.join(ROOT, "build", "wsync"))
    ap.add_argument("--size", default="1G")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--mode", default="staged", choices=["staged", "in-place"])
    ap.add_argument("--versions", type=int, default=3)
    ap.add_argument("--device", default="", help="cuda:N: the tensors on that GPU, GPU memory sampled")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--control", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank >= 0:
        return rank_main(a)
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    procs = [subprocess.Popen([a.wsync, "serve", "--listen", "127.0.0.1:%d" % port], stderr=subprocess.DEVNULL)]
    try:
        time.sleep(0.5)
        ranks = [subprocess.Popen([sys.executable, __file__, "--wsync", a.wsync, "--size", a.size, "--tp", str(a.tp),
                                   "--mode", a.mode, "--versions", str(a.versions), "--rank", str(k),
                                   "--control", url] + (["--device", a.device] if a.device else []),
                                  stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
                 for k in range(a.tp)]
        gpu = gpu_sampler(ranks) if a.device else None
        if not a.device:
            time.sleep(2.0)  # the ranks allocate and sample their baseline first
        for w in range(2):
            procs.append(subprocess.Popen(
                [a.wsync, "trainer", "--control", url, "--rank", str(w), "--world", "2", "--synthetic", a.size,
                 "--chunk", "64M", "--versions", str(a.versions), "--wait-engines", "1", "--host-id", "tpmem-trainer",
                 "--listen", "127.0.0.1:0", "--advertise", "127.0.0.1"], stderr=subprocess.DEVNULL))
        out = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in ranks]
        if gpu:
            gpu.stop.set()
            gpu.join()
            for o in out:
                o["base_kib"], o["peak_kib"] = gpu.base[o["pid"]], gpu.peak[o["pid"]]
        if any(p.returncode for p in ranks):
            sys.exit("tp_memory: an engine rank failed")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
    total = 0
    print("TP=%d node, %s, %s synthetic model, %d versions, into the ranks' own tensors (%s)" %
          (a.tp, a.mode, a.size, a.versions, "GPU memory on " + a.device if a.device else "host memory"))
    for o in out:
        extra = (o["peak_kib"] - o["base_kib"]) * 1024
        total += extra
        print("  rank %d: destination bytes %.1f MiB; wsync adds %.1f MiB at peak (%.2f x the destination bytes)"
              % (o["rank"], o["held"] / 2**20, extra / 2**20, extra / o["held"]))
    held = sum(o["held"] for o in out)
    print("  node: wsync adds %.1f MiB over the tensors' %.1f MiB (%.2f x); a rank's peak is its tensors plus that"
          % (total / 2**20, held / 2**20, total / held))


if __name__ == "__main__":
    main()
