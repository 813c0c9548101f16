#!/usr/bin/env python3
"""control_probe.py: hostile clients of the control endpoint, for
control_hostile_test.sh. Each subcommand prints PASS/FAIL lines.

  fields HOST PORT TOKEN           every integer field of every route at its edges
  bigbody HOST PORT PID CLIENTS MB  CLIENTS token-less bodies of MB MiB at once; RSS of PID
  trickle SRC HOST PORT N SECS OUT  N connections from SRC sending a header byte at a time
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

DIGEST = "0123456789abcdef0123456789abcdef"


def post(host, port, path, body, token, raw=None):
    c = http.client.HTTPConnection(host, port, timeout=10)
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    c.request("POST", path, body=raw if raw is not None else json.dumps(body), headers=h)
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    c.close()
    return r.status, text


# route, valid body, the integer (or number) fields as paths into it
ROUTES = [
    ("/v1/trainers/register",
     {"rank": 0, "world": 1, "host": "127.0.0.1", "endpoint": {"transport": "tcp", "pull": "127.0.0.1:9"}},
     [("rank",), ("world",)]),
    ("/v1/engines/register", {"id": "probe", "host": "h", "local_ranks": 1, "endpoint": {}}, [("local_ranks",)]),
    ("/v1/publish",
     {"rank": 0, "world": 1, "version": 5,
      "layout": {"manifest_digest": DIGEST, "chunk_size": 4096, "layout": "even", "layout_digest": "ab",
                 "image_size": 256, "world": 1},
      "pieces": [{"id": 0, "offset": 0, "len": 256, "digest": "00"}]},
     [("rank",), ("world",), ("version",), ("layout", "chunk_size"), ("layout", "image_size"), ("layout", "world"),
      ("pieces", 0, "id"), ("pieces", 0, "offset"), ("pieces", 0, "len")]),
    ("/v1/engines/probe/report", {"version": 0, "state": "pulling"},
     [("version",), ("bytes",), ("total",), ("duration_s",)]),
]
# JSON texts of the hostile classes; 0 is valid for some fields.
VALUES = ["-1", "2147483648", "4294967296", "4294967297", "9223372036854775807", "-9223372036854775808",
          "18446744073709551616", "-18446744073709551617", "1e300", "1.5", "\"1\"", "true", "[]", "{}"]
MARK = "\"@@PROBE@@\""
# The ranges docs/API.md gives; a number inside its field's range is valid.
B62, V = 1 << 62, (1 << 53) - 1
RANGES = {"rank": (0, 4095), "world": (1, 4096), "version": (1, V), "chunk_size": (1, 1 << 40),
          "image_size": (0, B62), "id": (0, (1 << 31) - 1), "offset": (0, B62), "len": (0, B62),
          "local_ranks": (1, 4096), "bytes": (0, B62), "total": (0, B62), "duration_s": (0, 1e7)}


def in_range(route, path, text):
    lo, hi = RANGES[path[-1]]
    if route.endswith("/report") and path[-1] == "version":
        lo = 0
    try:
        v = json.loads(text)
    except ValueError:
        return False
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, float) and path[-1] != "duration_s":
        return False
    return lo <= v <= hi


def name_of(path):
    out = ""
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else ("." if out else "") + p
    return out


def with_marker(body, path):
    b = json.loads(json.dumps(body))
    o = b
    for p in path[:-1]:
        o = o[p]
    o[path[-1]] = "@@PROBE@@"
    return json.dumps(b)


def fields(host, port, token):
    post(host, port, "/v1/engines/register", ROUTES[1][1], token)  # the report route needs the node
    bad = 0
    n = 0
    for route, body, paths in ROUTES:
        for path in paths:
            name = name_of(path)
            for v in VALUES + ["0"]:
                valid = in_range(route, path, v)
                raw = with_marker(body, path).replace(MARK, v)
                try:
                    code, text = post(host, port, route, None, token, raw=raw)
                except Exception as e:  # the endpoint died or hung
                    print("FAIL hostile_%s_%s_%s: no answer: %s" % (route, name, v, e))
                    return 1
                n += 1
                msg = ""
                try:
                    msg = json.loads(text)["error"]["message"]
                except Exception:
                    pass
                if code >= 500 or (not valid and (code != 422 or ("field '%s' must be" % name) not in msg)):
                    bad += 1
                    print("  %s %s=%s: HTTP %d %s" % (route, name, v, code, text[:200]), file=sys.stderr)
    if bad:
        print("FAIL hostile_fields_422_naming_the_field: %d of %d probes answered otherwise" % (bad, n))
    else:
        print("PASS hostile_fields_422_naming_the_field (%d probes)" % n)
    return 0


def rss_kib(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bigbody(host, port, pid, clients, mb):
    size = mb << 20
    before = rss_kib(pid)
    peak = [before]
    answers = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.01)

    def one(i):
        s = socket.create_connection((host, port), timeout=10)
        hdr = ("POST /v1/publish HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n%s\r\n" % (size, "Authorization: Bearer wrong\r\n" if i % 2 else ""))
        t0 = time.time()
        s.sendall(hdr.encode())
        chunk = b"0" * (1 << 20)
        got = b""
        sent = 0
        s.settimeout(0.05)
        try:
            while sent < size and not got:
                s.sendall(chunk)
                sent += len(chunk)
                try:
                    got = s.recv(4096)
                except socket.timeout:
                    pass
        except OSError:
            pass
        s.settimeout(5)
        try:
            while b"\r\n\r\n" not in got:
                more = s.recv(4096)
                if not more:
                    break
                got += more
        except OSError:
            pass
        answers.append((got.split(b"\r\n", 1)[0].decode(errors="replace"), sent, time.time() - t0))
        s.close()

    w = threading.Thread(target=watch)
    w.start()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    time.sleep(0.3)
    done.set()
    w.join()
    grew = (peak[0] - before) / 1024.0
    codes = [a[0] for a in answers]
    refused = sum(1 for c in codes if " 401 " in c + " ")
    print("  %d clients x %d MiB: RSS %.1f -> peak %.1f MiB (+%.1f); answers %s; sent before the answer %s MiB"
          % (clients, mb, before / 1024.0, peak[0] / 1024.0, grew, sorted(set(codes)),
             sorted(set(a[1] >> 20 for a in answers))), file=sys.stderr)
    if refused == clients:
        print("PASS bigbody_tokenless_refused_401")
    else:
        print("FAIL bigbody_tokenless_refused_401: answers %s" % codes)
    if grew < 32:
        print("PASS bigbody_memory_flat (+%.1f MiB for %d x %d MiB bodies)" % (grew, clients, mb))
    else:
        print("FAIL bigbody_memory_flat: RSS grew %.1f MiB for %d x %d MiB token-less bodies" % (grew, clients, mb))
    return 0


def trickle(src, host, port, n, secs, out):
    """Opens n connections from src, each sending one header byte every
    0.5 s; writes to `out` (JSON) how many were open after 1 s and when the
    last one was closed by the server."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        try:
            s.connect((host, port))
            s.setblocking(False)
            socks.append(s)
        except OSError:
            s.close()
    line = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 10000
    t0 = time.time()
    open_at_1s = None
    closed_at = {}
    k = 0
    while time.time() - t0 < secs and len(closed_at) < len(socks):
        for i, s in enumerate(socks):
            if i in closed_at:
                continue
            try:
                if s.recv(1) == b"":
                    closed_at[i] = time.time() - t0
                    continue
            except BlockingIOError:
                pass
            except OSError:
                closed_at[i] = time.time() - t0
                continue
            try:
                s.send(line[k % len(line):k % len(line) + 1])
            except OSError:
                closed_at[i] = time.time() - t0
        k += 1
        if open_at_1s is None and time.time() - t0 >= 1.0:
            open_at_1s = len(socks) - len(closed_at)
        time.sleep(0.5)
    still = len(socks) - len(closed_at)
    with open(out, "w") as f:
        json.dump({"opened": len(socks), "open_at_1s": open_at_1s, "still_open": still,
                   "last_closed_s": max(closed_at.values()) if closed_at else None}, f)
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "fields":
        sys.exit(fields(args[0], int(args[1]), args[2]))
    if cmd == "bigbody":
        sys.exit(bigbody(args[0], int(args[1]), args[2], int(args[3]), int(args[4])))
    if cmd == "trickle":
        sys.exit(trickle(args[0], args[1], int(args[2]), int(args[3]), float(args[4]), args[5]))
    sys.exit("unknown subcommand " + cmd)
