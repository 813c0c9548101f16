#!/usr/bin/env python3
"""trace_timeline.py [TRACE_FILE] [--from N]: where the time of a version goes, from WSYNC_TRACE=1 lines.

Reads the TRACE lines a run of a bench (tp_e2e_bench, e2e_cpu_bench, ...) wrote to standard error with
WSYNC_TRACE=1. A version's window opens at the first "publish of version V started" and closes at the
line saying its engine is done ("every local rank verified" or "... hold version V"). Each distinct
event of the window (its numbers blanked, the engine's name kept) gets its first and last time in
milliseconds after the publish started; the table gives, per engine configuration, the median of those
over the versions from --from on (default 3: the first two warm up), in the order the events first happen.

Where the local transport timed its launches ("launch of N put(s) ... B bytes ...: U us on the stream"),
a line per sending process (named by its "trainer rank N" lines) and one for all of them follows: the
medians of its first launch's start, its last launch's end, the time its launches kept the GPU busy
(the union of their [end - U, end] intervals) and the bytes they moved; then, per kind of launch (of one
put, or of several put together), how many, their bytes and those bytes over their summed stream time
(a process waiting for the GPU while another has it counts as stream time).
"""
import re
import statistics
import sys

LINE = re.compile(r"^TRACE (\d+\.\d+) \[(\d+)\] (.*)$")
ENGINE = re.compile(r"engine ([A-Za-z0-9_.-]+)")
VERSION = re.compile(r"publish of version (\d+) started")
DONE = re.compile(r"every local rank verified|hold version \d+")
LAUNCH = re.compile(r"launch of (\d+) put\(s\), \d+ piece\(s\), (\d+) bytes .*: ([\d.]+) us on the stream")
TRAINER = re.compile(r"^trainer rank (\d+):")


def busy(intervals):
    """The length of the union of [a, b] intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def launch_stats(ev, t0, who):
    """Per sender (and "all"): (first start, last end, busy, GB, then for launches of one put and of several:
    count, GB, summed stream ms) in ms / GB of a window's launches."""
    by = {}
    for t, pid, msg in ev:
        m = LAUNCH.search(msg)
        if m:
            ms, us = (t - t0) * 1e3, float(m.group(3))
            by.setdefault(who.get(pid, f"process {pid}"), []).append((ms - us / 1e3, ms, int(m.group(2)), int(m.group(1)), us))
    if by:
        by["all"] = [x for k in list(by) for x in by[k]]

    def kind(v, several):
        sel = [x for x in v if (x[3] > 1) == several]
        return (len(sel), sum(x[2] for x in sel) / 1e9, sum(x[4] for x in sel) / 1e3)

    return {k: (min(x[0] for x in v), max(x[1] for x in v), busy((x[0], x[1]) for x in v), sum(x[2] for x in v) / 1e9)
            + kind(v, False) + kind(v, True) for k, v in by.items()}


def kinds_text(med):
    """The per-kind part of a launches line from the medians of launch_stats' fields."""
    out = []
    for name, (n, gb, ms) in (("of one put", med[4:7]), ("of several", med[7:10])):
        if n > 0:
            out.append(f"{n:g} {name}: {gb:.3f} GB, {gb / ms if ms > 0 else 0:.3f} GB/ms on the stream")
    return "; ".join(out)


def shape(msg):
    """The event with its numbers, digests, request ids and window names blanked (the engine's name kept)."""
    msg = re.sub(r"target [0-9a-f]{16,}", "target H", msg)
    msg = re.sub(r"\(req [0-9a-f]+\)", "(req H)", msg)
    msg = re.sub(r"'wsync-[^']*'", "'W'", msg)
    return re.sub(r"\d+(\.\d+)?", "N", msg)


def windows(lines):
    """(version, configuration, start time, [(t, pid, msg)]) for each version's window."""
    cur = None
    for t, pid, msg in lines:
        m = VERSION.search(msg)
        if m and cur is None:
            cur = {"v": int(m.group(1)), "t0": t, "ev": [], "cfg": None}
        if cur is None:
            continue
        e = ENGINE.search(msg)
        if e and cur["cfg"] is None and msg.startswith("engine"):
            cur["cfg"] = e.group(1)
        cur["ev"].append((t, pid, msg))
        if msg.startswith("engine") and DONE.search(msg):
            yield cur["v"], cur["cfg"], cur["t0"], cur["ev"]
            cur = None


def main():
    args = sys.argv[1:]
    first = 3
    if "--from" in args:
        k = args.index("--from")
        first = int(args[k + 1])
        del args[k : k + 2]
    src = open(args[0]) if args else sys.stdin
    lines = []
    for raw in src:
        m = LINE.match(raw.strip())
        if m:
            lines.append((float(m.group(1)), int(m.group(2)), m.group(3)))
    lines.sort()
    table = {}  # cfg -> event -> [(first, last)]
    order = {}
    launches = {}  # cfg -> sender -> [(first, last, busy, GB)]
    who = {}
    for _, pid, msg in lines:
        m = TRAINER.match(msg)
        if m:
            who[pid] = f"trainer rank {m.group(1)}"
    for v, cfg, t0, ev in windows(lines):
        if v < first:
            continue
        for k, st in launch_stats(ev, t0, who).items():
            launches.setdefault(cfg, {}).setdefault(k, []).append(st)
        seen = {}
        for t, _, msg in ev:
            key = shape(msg)
            ms = (t - t0) * 1e3
            lo, hi = seen.get(key, (ms, ms))
            seen[key] = (min(lo, ms), max(hi, ms))
        for key, span in seen.items():
            table.setdefault(cfg, {}).setdefault(key, []).append(span)
            order.setdefault(cfg, {}).setdefault(key, []).append(span[0])
    if not table:
        sys.exit("trace_timeline.py: no version windows found (was the run made with WSYNC_TRACE=1?)")
    for cfg in table:
        rows = sorted(table[cfg].items(), key=lambda kv: statistics.median(order[cfg][kv[0]]))
        n = max(len(s) for s in table[cfg].values())
        print(f"{cfg}: median ms after the publish started, over {n} versions (first .. last occurrence)")
        for key, spans in rows:
            f = statistics.median(s[0] for s in spans)
            last = statistics.median(s[1] for s in spans)
            print(f"  {f:8.3f} .. {last:8.3f}  {key}")
        for k, st in sorted(launches.get(cfg, {}).items(), key=lambda kv: (kv[0] == "all", kv[0])):
            med = [statistics.median(x[i] for x in st) for i in range(10)]
            print(f"  launches of {k}: {med[0]:.3f} .. {med[1]:.3f} ms, the GPU busy {med[2]:.3f} ms, {med[3]:.3f} GB; "
                  + kinds_text(med))


if __name__ == "__main__":
    main()
