#!/usr/bin/python3
"""page_driver.py: drives headless Chromium through the DevTools protocol
(stdlib + Debian's python3-websocket) for status_page_test.sh.

  page_driver.py --url URL [--size WxH] STEP...

Steps run in order, in one browser tab that stays open (so the page's long
poll and refresh keep running between steps):
  wait:SECONDS:JS   until the JavaScript expression JS is true (FAIL after SECONDS)
  eval:JS           run JS in the page
  run:COMMAND       run a shell command here (e.g. publish a version); must exit 0
  shot:PATH         write a PNG screenshot of the whole page
  text:PATH         write the page's visible text
Prints "step ok: ..." per step, then one "console: LEVEL SOURCE TEXT" line per
console message of level error or warning (and per uncaught exception), and
exits 1 at the first failed step ("step failed: ...")."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Tab:
    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.console = []

    def _event(self, m):
        method, p = m.get("method"), m.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.console.append((p["type"], "console-api", text))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.console.append(("error", "exception", text))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") in ("error", "warning"):
                self.console.append((e["level"], e.get("source", ""), e.get("text", "") + " " + e.get("url", "")))

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == my:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self._event(m)

    def pump(self, seconds):
        """Reads events for up to `seconds` (console messages arrive unasked)."""
        self.ws.settimeout(seconds)
        try:
            while True:
                self._event(json.loads(self.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.ws.settimeout(30)

    def eval(self, js):
        r = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluating %r: %s" % (js, r["exceptionDetails"].get("text")))
        return r.get("result", {}).get("value")


def start_browser(profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("page_driver: no chromium on PATH (Debian: apt-get install chromium)")
    # --no-sandbox: tests run as root, where Chromium's sandbox refuses to start.
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir=" + profile, "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(profile, "..", "chromium.log"), "w"))
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if lines:
                return proc, int(lines[0])
        if proc.poll() is not None:
            sys.exit("page_driver: chromium exited with %s at start (see chromium.log)" % proc.returncode)
        time.sleep(0.1)
    proc.kill()
    sys.exit("page_driver: chromium gave no DevTools port within 60 s")


def main():
    argv = sys.argv[1:]
    url, size, steps = None, "1400x1000", []
    while argv:
        a = argv.pop(0)
        if a == "--url":
            url = argv.pop(0)
        elif a == "--size":
            size = argv.pop(0)
        else:
            steps.append(a)
    if url is None:
        sys.exit(__doc__)
    work = tempfile.mkdtemp(prefix="wsync-page-")
    profile = os.path.join(work, "profile")
    os.mkdir(profile)
    proc, port = start_browser(profile)
    rc = 0
    try:
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=30))
        page = [t for t in targets if t.get("type") == "page"][0]
        tab = Tab(page["webSocketDebuggerUrl"])
        tab.call("Runtime.enable")
        tab.call("Log.enable")
        tab.call("Page.enable")
        w, h = (int(x) for x in size.split("x"))
        tab.call("Emulation.setDeviceMetricsOverride", width=w, height=h, deviceScaleFactor=1, mobile=False)
        tab.call("Page.navigate", url=url)
        for step in steps:
            kind, _, arg = step.partition(":")
            if kind == "wait":
                secs, _, js = arg.partition(":")
                deadline = time.time() + float(secs)
                # false until the page has loaded far enough to answer
                probe = "(() => { try { return !!(%s); } catch (e) { return false; } })()" % js
                while not tab.eval(probe):
                    if time.time() > deadline:
                        raise RuntimeError("not true within %s s: %s" % (secs, js))
                    tab.pump(0.2)
            elif kind == "eval":
                tab.eval(arg)
            elif kind == "run":
                r = subprocess.run(arg, shell=True)
                if r.returncode != 0:
                    raise RuntimeError("command exited %d: %s" % (r.returncode, arg))
            elif kind == "shot":
                png = tab.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                with open(arg, "wb") as f:
                    f.write(base64.b64decode(png["data"]))
            elif kind == "text":
                with open(arg, "w") as f:
                    f.write(tab.eval("document.body.innerText"))
            else:
                raise RuntimeError("unknown step %r" % step)
            print("step ok: %s" % step, flush=True)
        tab.pump(0.5)
    except Exception as e:  # a failed step: say which and why, keep the console lines
        print("step failed: %s" % e, flush=True)
        rc = 1
    for level, source, text in getattr(locals().get("tab"), "console", []):
        print("console: %s %s %s" % (level, source, " ".join(text.split())), flush=True)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
