"""common.py: what the Python test scripts share: importing wsync from the
repository, waiting on the control endpoint, reporting PASS/FAIL."""
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("WSYNC_ROOT", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
if os.environ.get("WSYNC_BUILD") and not os.environ.get("WSYNC_LIB"):
    os.environ["WSYNC_LIB"] = os.path.join(os.environ["WSYNC_BUILD"], "libwsync.so")

# Bit-identical logits on two processes of one GPU: deterministic cuBLAS.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

torch.set_num_threads(1)  # the box is shared; and both sides compute alike


def status(url):
    with urllib.request.urlopen(url + "/v1/status", timeout=10) as r:
        return json.load(r)


def engine_version(url, engine):
    for e in status(url).get("engines", []):
        if e.get("id") == engine:
            return e.get("version") or 0
    return 0


def wait_engines(url, engines, version, timeout=90.0):
    """Until every engine node in `engines` holds `version` (or a newer one)."""
    end = time.time() + timeout
    while time.time() < end:
        if all(engine_version(url, e) >= version for e in engines):
            return
        time.sleep(0.05)
    raise RuntimeError("engines %s did not reach version %d in %.0f s: %s"
                       % (engines, version, timeout, status(url).get("engines")))


def wait_stdin_closed():
    """Trainers keep serving until the driver closes their stdin (or kills them)."""
    try:
        sys.stdin.read()
    except Exception:
        pass


class Checks:
    """PASS/FAIL lines, one per check; exit status 1 when any failed."""

    def __init__(self):
        self.failed = 0

    def ok(self, name, cond, why=""):
        if cond:
            print("PASS " + name, flush=True)
        else:
            self.failed += 1
            print("FAIL %s: %s" % (name, why), flush=True)

    def raises(self, name, fn, cls, *needles):
        """fn() must raise `cls` whose message contains every needle."""
        import wsync
        try:
            fn()
        except cls as e:
            msg = str(e)
            missing = [n for n in needles if n not in msg]
            self.ok(name, not missing and isinstance(e, wsync.Error),
                    "message %r lacks %s" % (msg, missing))
            return e
        except Exception as e:  # noqa: BLE001
            self.ok(name, False, "raised %s: %s, wanted %s" % (type(e).__name__, e, cls.__name__))
            return e
        self.ok(name, False, "raised nothing, wanted %s" % cls.__name__)
        return None

    def exit(self):
        sys.exit(1 if self.failed else 0)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Serve:
    """A control endpoint of its own (`wsync serve`), for one test: .url."""

    def __init__(self, token_file=None):
        import subprocess
        binary = os.environ.get("WSYNC_BIN", os.path.join(ROOT, "build", "wsync"))
        port = free_port()
        self.url = "http://127.0.0.1:%d" % port
        extra = ["--token-file", token_file] if token_file else []
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port] + extra,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 20
        while time.time() < end:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=2).close()
                return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("wsync serve did not come up at " + self.url)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def spawn(script, *args, env=None):
    """A Python test process (this interpreter) with stdin a pipe: closing it
    ends a trainer. Its output lines are collected by a thread (wait_line)."""
    import subprocess
    e = dict(os.environ)
    e.update(env or {})
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script)] + [str(a) for a in args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e, text=True)
    return watch(proc)


def watch(proc):
    """Collect proc.stdout's lines on a thread into proc.lines (a queue; None at EOF)."""
    import queue
    import threading
    proc.lines = queue.Queue()

    def pump():
        for line in proc.stdout:
            proc.lines.put(line)
        proc.lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return proc


def wait_line(proc, needle, timeout=180.0):
    """Lines of a spawn()ed process until one containing needle (returns the lines read)."""
    import queue
    lines, end = [], time.time() + timeout
    while time.time() < end:
        try:
            line = proc.lines.get(timeout=max(0.01, end - time.time()))
        except queue.Empty:
            break
        if line is None:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise RuntimeError("no line with %r from the process; it printed: %s" % (needle, "".join(lines)[-2000:]))
