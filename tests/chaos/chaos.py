#!/usr/bin/python3
"""chaos.py: a seeded fault campaign against a real wsync deployment on this
machine: `wsync serve` (with --state), 2 trainer ranks and 2 engine nodes x 2
local ranks, all real processes. Faults are drawn at random: engine ranks,
trainer ranks and the control endpoint SIGKILLed and restarted, ranks stalled
with SIGSTOP for seconds, a trainer rank restarted with a corrupting fault
hook (WSYNC_TEST_CORRUPT_PIECE) for a while, garbage on the control port and
on a trainer's pull port. With --hosts (tests/integration/chaos_test.sh writes
it as root) every host is a network namespace and network faults join the
draw, each healed after seconds: 50 ms each way and 1% loss on an engine
node's link (tests/tools/delay_link started in its middle namespace, then
stopped), a node's link cut (eth0 down, then up), the trainers' host
partitioned from one node and the control endpoint's host from everyone
(nftables drop rules, added then removed). The first faults are one of each
kind in a random order, so that a short run has them all; later kinds are
drawn by weight. A checker compares every version
an engine rank holds (its --dump, written after the rank verified the
version) with the trainers' synthetic content, computed here independently
(numpy). Prints a table and exits 1 on any torn version, crash, exit the
campaign did not cause, failed fault tool, or missed convergence after the
last fault."""
import argparse, glob, heapq, json, os, random, shutil, signal, socket, struct, subprocess, sys, tempfile
import threading, time, urllib.request

import numpy as np

M1, M2 = np.uint64(0xff51afd7ed558ccd), np.uint64(0xc4ceb9fe1a85ec53)


def fmix64(x):
    x = x ^ (x >> np.uint64(33))
    x = x * M1
    x = x ^ (x >> np.uint64(33))
    x = x * M2
    return x ^ (x >> np.uint64(33))


def synthetic(off, length, version):
    """Image bytes [off, off+length) of a synthetic model's version: byte k of
    word w is byte k of fmix64(w ^ version), little endian (wsync_fill_pattern)."""
    w0, w1 = off // 8, (off + length + 7) // 8
    words = fmix64(np.arange(w0, w1, dtype=np.uint64) ^ np.uint64(version))
    return words.view(np.uint8)[off - w0 * 8: off - w0 * 8 + length]


def check_dump(path, version):
    """'' when every tensor of the dumped file equals the synthetic source."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    data = np.frombuffer(b, dtype=np.uint8, offset=8 + n)
    for name, t in header.items():
        if name == "__metadata__":
            continue
        s, e = t["data_offsets"]
        if not np.array_equal(data[s:e], synthetic(s, e - s, version)):
            bad = int(np.argmax(data[s:e] != synthetic(s, e - s, version)))
            return "tensor %s differs from the source at byte %d" % (name, bad)
    return ""


class Proc:
    def __init__(self, camp, name, argv, env=None, ns=None):
        self.camp, self.name, self.argv, self.env = camp, name, argv, env or {}
        # `ip netns exec` execs the command, so the pid is wsync's own.
        self.prefix = ["ip", "netns", "exec", ns] if ns else []
        self.p, self.expected_exit, self.stopped, self.starts = None, False, False, 0
        self.log = os.path.join(camp.dir, name + ".log")

    def start(self, extra_env=None):
        self.kill()                     # never two processes of one name
        env = dict(os.environ)
        env.update(self.env)
        env.update(extra_env or {})
        self.logf = open(self.log, "a")
        self.logf.write("=== start %d at %.2f\n" % (self.starts, time.time()))
        self.logf.flush()
        self.p = subprocess.Popen(self.prefix + [self.camp.wsync] + self.argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env)
        self.expected_exit, self.stopped = False, False
        self.starts += 1

    def restart(self):
        """A heal: starts the process unless it runs already (two heals can be
        due for one process: a kill's restart and a corrupting run's clean
        restart; starting twice would leave an orphan with the same rank)."""
        if not self.alive():
            self.start()

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.expected_exit = True
            self.p.send_signal(sig)
            self.stopped = sig == signal.SIGSTOP

    def kill(self):
        if self.alive():
            self.expected_exit = True
            if self.stopped:
                self.p.send_signal(signal.SIGCONT)
            self.p.kill()
            self.p.wait()
            self.logf.close()

    def tail(self, n=4):
        try:
            with open(self.log, errors="replace") as f:
                return " | ".join(l.strip() for l in f.readlines()[-n:])
        except OSError:
            return ""


class Campaign:
    def __init__(self, a):
        self.a, self.rng = a, random.Random(a.seed)
        self.wsync = a.wsync
        self.dir = tempfile.mkdtemp(prefix="wsync-chaos.")
        self.dumps = os.path.join(self.dir, "dump")
        # Hosts: {"control": {"ns", "ip"}, "trainers": {"ns", "ip"}, "nodes":
        # [{"ns", "ip", "mid"}], "netns_sh": path}, or None for loopback.
        self.hosts = h = json.load(open(a.hosts)) if a.hosts else None
        self.port = free_port()
        self.control_ip = h["control"]["ip"] if h else "127.0.0.1"
        self.url = "http://%s:%d" % (self.control_ip, self.port)
        self.net_active, self.tool_errors = set(), []
        self.first_round = None
        self.faults, self.heals = {}, []          # kind -> count; heap of (time, seq, fn, what)
        self.seq = 0
        self.verified, self.torn, self.torn_what = {}, 0, []
        self.unexpected, self.crashes = [], 0
        self.lock = threading.Lock()
        self.stop_checker = False
        size = a.size
        state = os.path.join(self.dir, "state.json")
        self.serve = Proc(self, "serve", ["serve", "--listen", "%s:%d" % (self.control_ip, self.port), "--state", state],
                          ns=h and h["control"]["ns"])
        self.trainers = [Proc(self, "trainer%d" % r, self.trainer_argv(r), ns=h and h["trainers"]["ns"])
                         for r in range(2)]
        self.engines = [[Proc(self, "n%d-rank%d" % (e, r),
                              ["engine", "--control", self.url, "--engine", "n%d" % e, "--local-rank", str(r),
                               "--local-world", "2", "--follow", "--timeout-ms", "5000", "--dump", self.dumps] +
                              (["--transport", "tcp", "--bind", h["nodes"][e]["ip"]] if h else []),
                              ns=h and h["nodes"][e]["ns"])
                         for r in range(2)] for e in range(2)]
        # Trainers break a link whose receiver reads nothing for 3 s (default 10).
        for t in self.trainers:
            t.env["WSYNC_TCP_STALL_MS"] = "3000"
        self.all = [self.serve] + self.trainers + [p for n in self.engines for p in n]

    def trainer_argv(self, r):
        ip = self.hosts and self.hosts["trainers"]["ip"]
        return ["trainer", "--control", self.url, "--rank", str(r), "--world", "2", "--synthetic", self.a.size,
                "--chunk", self.a.chunk, "--versions", "100000000", "--interval-ms", "300"] + \
            (["--listen", ip + ":0", "--advertise", ip] if ip else [])

    # --- the endpoint, read with plain HTTP (an independent client)
    def status(self):
        try:
            with urllib.request.urlopen(self.url + "/v1/status", timeout=3) as r:
                return json.loads(r.read())
        except Exception:
            return None

    # --- checker: every dumped version against the source
    def checker(self):
        while True:
            stop = self.stop_checker
            for path in sorted(glob.glob(os.path.join(self.dumps, "*", "rank*", "v*.safetensors"))):
                node, rank = path.split(os.sep)[-3], path.split(os.sep)[-2]
                v = int(os.path.basename(path)[1:].split(".")[0])
                try:
                    why = check_dump(path, v)
                except Exception as e:   # a truncated or unparsable dump is torn too
                    why = "unreadable dump: %s" % e
                with self.lock:
                    self.verified.setdefault(node, {}).setdefault(rank, set())
                    if why:
                        self.torn += 1
                        self.torn_what.append("%s %s v%d: %s" % (node, rank, v, why))
                    else:
                        self.verified[node][rank].add(v)
                os.unlink(path)
            if stop:
                return
            time.sleep(0.3)

    def watch(self):
        """Exits the campaign did not cause are counted (a signal or a
        sanitizer report is a crash) and the process is started again."""
        for p in self.all:
            if p.p is not None and not p.alive() and not p.expected_exit:
                rc = p.p.returncode
                text = p.tail(6)
                crash = rc < 0 or "Sanitizer" in text or "Segmentation" in text
                self.crashes += crash
                self.unexpected.append("%s exited with %d: %s" % (p.name, rc, text))
                self.event("unexpected exit of %s (%d)" % (p.name, rc))
                p.expected_exit = True
                self.later(0.5, p.restart, "restart %s after an unexpected exit" % p.name)

    def event(self, what):
        """A line of events.log in the work directory: the campaign's timeline."""
        with open(os.path.join(self.dir, "events.log"), "a") as f:
            f.write("%.2f %s\n" % (time.time(), what))

    def later(self, delay, fn, what):
        self.event("  then in %.1f s: %s" % (delay, what))
        self.seq += 1
        heapq.heappush(self.heals, (time.time() + delay, self.seq, fn, what))

    def run_heals(self, all_now=False):
        while self.heals and (all_now or self.heals[0][0] <= time.time()):
            _, _, fn, what = heapq.heappop(self.heals)
            self.event(what)
            fn()

    # --- faults
    def healthy(self, procs):
        return [p for p in procs if p.alive() and not p.stopped]

    # --- network faults (--hosts only), applied with netns.sh, healed later
    NET_KINDS = ["net_delay_loss"] * 2 + ["net_link_cut"] * 2 + ["net_partition_node"] * 2 + \
        ["net_partition_control"]

    def netns(self, *args):
        """Runs a function of netns.sh; a failure is the fault tool's, counted."""
        try:
            r = subprocess.run(["bash", self.hosts["netns_sh"]] + [str(x) for x in args], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=30)
            why = (r.stderr or r.stdout).strip()[-300:] if r.returncode else ""
        except subprocess.TimeoutExpired:
            why = "did not finish in 30 s"
        if why:
            self.tool_errors.append("netns.sh %s: %s" % (" ".join(map(str, args)), why))
        return not why

    def net_fault(self, kind):
        r, h = self.rng, self.hosts
        e = r.randrange(len(h["nodes"]))
        node, tns, cns = h["nodes"][e], h["trainers"]["ns"], h["control"]["ns"]
        if kind == "net_delay_loss":      # 50 ms each way, 1% loss, for 3-8 s
            key, hold = ("delay", e), r.uniform(3.0, 8.0)
            on, off = ("netns_delay_on", node["mid"], 50, 0.01, r.getrandbits(32)), ("netns_delay_off", node["mid"])
        elif kind == "net_link_cut":      # mid-pull as often as not: pulls run back to back
            key, hold = ("link", e), r.uniform(1.0, 4.0)
            on, off = ("netns_link", node["ns"], "down"), ("netns_link", node["ns"], "up")
        elif kind == "net_partition_node":
            key, hold = ("part", e), r.uniform(1.0, 5.0)
            on, off = ("netns_block", tns, "chaos_n%d" % e, node["ip"]), ("netns_unblock", tns, "chaos_n%d" % e)
        else:
            key, hold = ("control",), r.uniform(1.0, 5.0)
            on, off = ("netns_isolate", cns, "chaos_ctl"), ("netns_unblock", cns, "chaos_ctl")
        if key in self.net_active or not self.netns(*on):
            return False
        self.net_active.add(key)
        self.later(hold, lambda: (self.netns(*off), self.net_active.discard(key)), "heal %s n%d" % (kind, e) if key[0] != "control" else "heal " + kind)
        return True

    def fault(self):
        """Draws and applies a fault; its kind, or None when it could not be
        applied now (nobody to stop, the link already cut)."""
        kinds = ["kill_engine"] * 4 + ["kill_trainer"] * 2 + ["kill_control"] * 2 + ["stop_engine"] * 3 + \
                ["stop_trainer"] * 2 + ["corrupt_trainer"] + ["garbage_control"] * 2 + ["garbage_pull"] + \
                (self.NET_KINDS if self.hosts else [])
        if self.first_round is None:    # every kind once, in a random order, then draws by weight
            self.first_round = sorted(set(kinds))
            self.rng.shuffle(self.first_round)
        kind = self.first_round.pop() if self.first_round else self.rng.choice(kinds)
        done = self.apply(kind)
        if done is None and kind not in self.faults and kind not in self.first_round:
            self.first_round.insert(0, kind)    # not applied: its first turn comes again
        return done

    def apply(self, kind):
        engines = [p for n in self.engines for p in n]
        r = self.rng
        if kind in ("kill_engine", "stop_engine", "kill_trainer", "stop_trainer", "corrupt_trainer"):
            pool = self.healthy(engines if "engine" in kind else self.trainers)
            if not pool:
                return None
            p = r.choice(pool)
            if kind.startswith("kill"):
                p.kill()
                self.later(r.uniform(0.2, 2.0), p.restart, "restart " + p.name)
            elif kind.startswith("stop"):
                p.signal(signal.SIGSTOP)
                self.later(r.uniform(1.0, 4.0), lambda p=p: (p.signal(signal.SIGCONT)), "resume " + p.name)
            else:
                rank = self.trainers.index(p)
                half = self.npieces // 2
                piece = rank * half + r.randrange(max(half, 1))
                p.kill()
                p.start({"WSYNC_TEST_CORRUPT_PIECE": str(piece)})
                self.later(r.uniform(2.0, 4.0), lambda p=p: (p.kill(), p.start()), "clean restart " + p.name)
        elif kind == "kill_control":
            if not self.serve.alive():
                return None
            self.serve.kill()
            self.later(r.uniform(0.5, 3.0), self.serve.restart, "restart serve")
        elif kind == "garbage_control":
            garbage(self.port, r)
        elif kind == "garbage_pull":
            st = self.status()
            pulls = [t.get("endpoint", {}).get("pull") for t in (st or {}).get("trainers", [])]
            pulls = [x for x in pulls if x]
            if not pulls:
                return None
            host, port = r.choice(pulls).rsplit(":", 1)
            garbage(int(port), r, host)
        elif kind.startswith("net_") and not self.net_fault(kind):
            return None
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.event("fault " + kind)
        return kind

    def run(self):
        a = self.a
        self.npieces = max(2, parse_size(a.size) // parse_size(a.chunk))
        self.serve.start()
        wait_for(lambda: self.status() is not None, 20)
        for p in self.all[1:]:
            p.start()
        checker = threading.Thread(target=self.checker)
        checker.start()
        t_begin = time.time()
        ok = wait_for(lambda: all(e["version"] > 0 for e in (self.status() or {}).get("engines", [{"version": 0}])) and
                      len((self.status() or {}).get("engines", [])) == 2, 60)
        if not ok:
            print("chaos: the deployment did not come up: " + " ; ".join(p.name + ": " + p.tail(2) for p in self.all))
        first = (self.status() or {}).get("latest_version", 0)
        n = 0
        while ok and n < a.faults and time.time() - t_begin < a.time_limit:
            self.run_heals()
            self.watch()
            if self.fault():
                n += 1
            time.sleep(self.rng.uniform(0.4, 1.6))
        timed_out = n < a.faults
        self.run_heals(all_now=True)            # every process back, un-stopped, clean
        for p in self.all:
            if p.stopped:
                p.signal(signal.SIGCONT)
        t_last = time.time()
        # Convergence: every rank of every node holds (and dumped, verified)
        # a version at least as new as the latest published after the heal.
        target = 0
        deadline = time.time() + a.converge_s
        converged = None
        while ok and time.time() < deadline:
            self.watch()
            self.run_heals()
            st = self.status()
            if st and target == 0:
                target = st["latest_version"]
            with self.lock:
                have = [max(self.verified.get("n%d" % e, {}).get("rank%d" % r, {0}) or {0})
                        for e in range(2) for r in range(2)]
            if target and min(have) >= target:
                converged = time.time() - t_last
                break
            time.sleep(0.2)
        st = self.status() or {}
        self.stop_checker = True
        checker.join()
        for p in reversed(self.all):
            p.kill()
        return self.report(ok, n, timed_out, converged, target, first, st)

    def report(self, ok, n, timed_out, converged, target, first, st):
        caught = 0
        for p in self.all:
            try:
                caught += open(p.log, errors="replace").read().count("failed verification")
            except OSError:
                pass
        print("chaos campaign: seed %d, %d faults in %.0f s max, %s model, workdir %s" %
              (self.a.seed, n, self.a.time_limit, self.a.size, self.dir))
        h = self.hosts
        print("hosts: " + ("network namespaces: control %s, trainers %s, nodes %s (each through a middle namespace)" %
                           (h["control"]["ip"], h["trainers"]["ip"], ", ".join(x["ip"] for x in h["nodes"]))
                           if h else "this machine's loopback"))
        print("%-22s %6s" % ("fault", "count"))
        for k in sorted(self.faults):
            print("%-22s %6d" % (k, self.faults[k]))
        print("%-22s %6d" % ("total", n))
        if not self.hosts:
            print("skipped fault kinds: %s (%s)" % (", ".join(sorted(set(self.NET_KINDS))), self.a.no_net_reason))
        print("versions published: %d (latest %d)" % (st.get("latest_version", 0) - first,
                                                      st.get("latest_version", 0)))
        print("%-6s %-6s %9s %8s" % ("node", "rank", "verified", "newest"))
        for e in range(2):
            for r in range(2):
                vs = self.verified.get("n%d" % e, {}).get("rank%d" % r, set())
                print("%-6s %-6s %9d %8d" % ("n%d" % e, "rank%d" % r, len(vs), max(vs) if vs else 0))
        print("corrupt or stale pulls caught by the digests: %d" % caught)
        print("torn: %d" % self.torn)
        for t in self.torn_what[:10]:
            print("  " + t)
        print("fault tool errors: %d" % len(self.tool_errors))
        for t in self.tool_errors[:10]:
            print("  " + t)
        print("crashes: %d" % self.crashes)
        print("exits not caused by the campaign: %d" % len(self.unexpected))
        for u in self.unexpected[:10]:
            print("  " + u)
        if converged is not None:
            print("time to converge after the last fault: %.1f s (every rank verified version >= %d)" %
                  (converged, target))
        else:
            print("time to converge after the last fault: NOT within %d s (wanted version >= %d)" %
                  (self.a.converge_s, target))
        good = ok and not timed_out and self.torn == 0 and self.crashes == 0 and not self.unexpected and \
            converged is not None and not self.tool_errors
        if timed_out:
            print("chaos: only %d of %d faults within the %d s limit" % (n, self.a.faults, self.a.time_limit))
        print("chaos: %s" % ("PASS" if good else "FAIL"))
        if good and not self.a.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return good


def garbage(port, r, host="127.0.0.1"):
    junk = [bytes(r.getrandbits(8) for _ in range(r.randrange(1, 3000))),
            b"POST /v1/publish HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{",
            b"GET /v1/versions/latest?after=x HTTP/1.1\r\n\r\n", struct.pack("<I", 0xffffffff) + b"zz",
            b"\x00" * 64]
    for j in r.sample(junk, 3):
        try:
            s = socket.create_connection((host, port), timeout=1)
            s.sendall(j)
            s.close()
        except OSError:
            pass


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(cond, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wsync", required=True, help="the wsync binary")
    ap.add_argument("--faults", type=int, default=120)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--time-limit", type=float, default=600, help="seconds for the faults (fails if not all fit)")
    ap.add_argument("--converge-s", type=int, default=120)
    ap.add_argument("--size", default="4M")
    ap.add_argument("--chunk", default="256K")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) even on success")
    ap.add_argument("--hosts", help="JSON: the network namespace and address of each host and the path of netns.sh "
                    "(written by tests/integration/chaos_test.sh as root); network faults join the draw")
    ap.add_argument("--no-net-reason", default="no --hosts: the deployment runs on loopback",
                    help="why there are no network faults, for the table")
    a = ap.parse_args()
    camp = Campaign(a)
    old = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        good = camp.run()
    finally:
        for p in camp.all:
            p.kill()
        signal.signal(signal.SIGTERM, old)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
