"""wire_check.py NV UNIT [--below F] [--each] LOG...: each LOG (an engine rank's, WSYNC_LOG=info) says
that rank took every version 2..NV as deltas of UNIT (pieces or puts) from the version before, and the
bytes on the wire of each version are below F (default 1/4) of what it was owed in full: summed over
the LOGs (the ranks of one node), or with --each log by log (nodes of their own). Reads the lines
engine_side/delta_end.c writes; prints the figures, exits non-zero naming the log and version."""
import argparse
import os
import re
import sys

ap = argparse.ArgumentParser(usage=__doc__)
ap.add_argument("nv", type=int)
ap.add_argument("unit", choices=("pieces", "puts"))
ap.add_argument("--below", type=float, default=0.25)
ap.add_argument("--each", action="store_true")
ap.add_argument("logs", nargs="+")
a = ap.parse_args()
line = re.compile(r"version (\d+): (\d+) %s as deltas from version (\d+) .*on the wire (\d+) of (\d+) bytes" % a.unit)


def check(logs, label):
    wire, owed = {}, {}
    for p in logs:
        got = set()
        for m in line.finditer(open(p).read()):
            v, n, b = int(m[1]), int(m[2]), int(m[3])
            assert n > 0 and b == v - 1, (p, m[0])
            got.add(v)
            wire[v] = wire.get(v, 0) + int(m[4])
            owed[v] = owed.get(v, 0) + int(m[5])
        assert sorted(got) == list(range(2, a.nv + 1)), (p, "versions as deltas", sorted(got))
    for v in sorted(wire):
        print("%s: version %d: %d of %d bytes on the wire (%.1f%%)" % (label, v, wire[v], owed[v],
                                                                        100.0 * wire[v] / owed[v]))
        assert wire[v] < owed[v] * a.below, (label, v, "not below %g of full" % a.below)


for group in ([[p] for p in a.logs] if a.each else [a.logs]):
    check(group, os.path.basename(group[0]) if a.each or len(group) == 1 else
          os.path.commonprefix([os.path.basename(p) for p in group]) + "*")
sys.exit(0)
