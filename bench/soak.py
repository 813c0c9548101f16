#!/usr/bin/python3
"""soak.py: N versions (default 2000) through a 2-trainer, 2-node (x2 local
ranks) deployment on this machine, with restarts sprinkled in (an engine rank,
a trainer rank and the control endpoint, at 10, 20 and 30% of the run), sampling every process's RSS, open
file descriptors and mappings (all, and the shared-memory windows) as the
versions go by. Prints per process the least-squares slope of each figure per
1000 versions after warm-up (20% of the run from the process's start), the state file's size,
and exits 1 if a process grows from the first to the last quarter of its
samples after warm-up (RSS by > 4 MiB, fds by > 16: an attempt holds a
few dozen at most, windows by > 2) or the
state file grows past its bound."""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def latest(url):
    try:
        with urllib.request.urlopen(url + "/v1/status", timeout=3) as r:
            return json.loads(r.read())["latest_version"]
    except Exception:
        return None


def sample(pid):
    try:
        rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/maps" % pid) as f:
            maps = f.readlines()
        windows = sum(1 for m in maps if "memfd:" in m or "/dev/shm/" in m or "wsync" in m)
        return rss, fds, len(maps), windows
    except OSError:
        return None


def slope(points):
    """Least-squares slope of y over x, per 1000 x."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    return 1000 * sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wsync", required=True)
    ap.add_argument("--versions", type=int, default=2000)
    ap.add_argument("--size", default="2M")
    ap.add_argument("--chunk", default="256K")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="wsync-soak.")
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    state = os.path.join(d, "state.json")
    procs = {}

    def start(name, argv):
        log = open(os.path.join(d, name + ".log"), "a")
        procs[name] = {"p": subprocess.Popen([a.wsync] + argv, stdout=log, stderr=subprocess.STDOUT),
                       "argv": argv, "samples": [], "born": latest(url) or 0, "log": log}

    def restart(name):
        procs[name]["p"].kill()
        procs[name]["p"].wait()
        old = procs.pop(name)
        procs[name + "'" * sum(1 for k in procs if k.startswith(name))] = old   # keep its samples
        start(name, old["argv"])

    start("serve", ["serve", "--listen", "127.0.0.1:%d" % port, "--state", state])
    for _ in range(100):
        if latest(url) is not None:
            break
        time.sleep(0.1)
    for r in range(2):
        start("trainer%d" % r, ["trainer", "--control", url, "--rank", str(r), "--world", "2", "--synthetic", a.size,
                                "--chunk", a.chunk, "--versions", "100000000", "--interval-ms", "0"])
    for e in range(2):
        for r in range(2):
            start("n%d-rank%d" % (e, r), ["engine", "--control", url, "--engine", "n%d" % e, "--local-rank", str(r),
                                          "--local-world", "2", "--follow", "--timeout-ms", "10000"])
    # Restarts at these fractions of the run.
    plan = {0.1: "n1-rank1", 0.2: "trainer1", 0.3: "serve"}
    done = set()
    t0 = time.time()
    state_sizes = []
    v = 0
    while True:
        v = latest(url) or v
        for frac, name in plan.items():
            if frac not in done and v >= frac * a.versions:
                done.add(frac)
                restart(name)
                print("soak: restarted %s at version %d" % (name, v), flush=True)
        for name, pr in procs.items():
            if pr["p"].poll() is None:
                s = sample(pr["p"].pid)
                if s:
                    pr["samples"].append((v,) + s)
        if os.path.exists(state):
            state_sizes.append((v, os.path.getsize(state)))
        if v >= a.versions:
            break
        if time.time() - t0 > 3600:
            print("soak: only %d versions within an hour" % v)
            break
        time.sleep(0.25)
    elapsed = time.time() - t0
    for pr in procs.values():
        pr["p"].kill()
    warm = a.versions * 0.2
    ok = True
    print("soak: %d versions in %.0f s (%.1f versions/s), %s model; slopes per 1000 versions after a warm-up of %d"
          % (v, elapsed, v / elapsed, a.size, warm))
    print("%-14s %8s %8s %10s %9s %9s %9s %9s" % ("process", "samples", "RSS MiB", "RSS KiB/k", "fds", "fds/k",
                                                  "maps/k", "windows/k"))
    for name in sorted(procs):
        # Warm-up: the first 20% of the run, counted from the process's start.
        pts = [s for s in procs[name]["samples"] if s[0] >= procs[name]["born"] + warm]
        if len(pts) < 3:
            continue
        rs, fs, ms, ws = (slope([(p[0], p[i]) for p in pts]) for i in (1, 2, 3, 4))
        # Growth: the median of the last quarter of samples against the first
        # (slopes alone see the noise of connections opening and closing).
        q = max(1, len(pts) // 4)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        d_rss, d_fds, d_win = (med([p[i] for p in pts[-q:]]) - med([p[i] for p in pts[:q]]) for i in (1, 2, 4))
        grows = d_rss > 4096 or d_fds > 16 or d_win > 2
        ok = ok and not grows
        print("%-14s %8d %8.1f %10.1f %9d %9.2f %9.2f %9.2f  (first->last quarter: RSS %+d KiB, fds %+d, "
              "windows %+d)%s" % (name, len(pts), pts[-1][1] / 1024, rs, pts[-1][2], fs, ms, ws, d_rss, d_fds, d_win,
                                  "  GROWS" if grows else ""))
    if state_sizes:
        mx = max(s for _, s in state_sizes)
        late = [s for vv, s in state_sizes if vv >= warm]
        print("state file: %d bytes at the end, at most %d; slope after warm-up %.0f bytes per 1000 versions"
              % (state_sizes[-1][1], mx, slope([(vv, s) for vv, s in state_sizes if vv >= warm])))
        ok = ok and (not late or max(late) < 2 * min(late) + 65536)
    print("soak: %s (logs in %s)" % ("PASS" if ok else "FAIL", d))
    if ok:
        shutil.rmtree(d, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
