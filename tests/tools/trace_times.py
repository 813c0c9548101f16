"""Publish -> ready per version, read from WSYNC_TRACE=1 logs (the netns benches share it).

usage: trace_times.py V TRAINER_RANK0_LOG ENGINE_LOG...
prints, for versions 2..V seen in both: "version seconds wire_bytes image_bytes"
(seconds from trainer rank 0's "publish of version v started" to the last engine
rank's "reported" after its "pull of version v opened"; wire bytes summed over the
engine logs' "on the wire" lines, or the image's size where none was logged; image
bytes the sum of those lines' bytes owed (a node of targets: its puts) where there
are some, else rank 0's image)."""
import re
import sys


def main():
    versions = int(sys.argv[1])
    pub, ready, wire, owed, image = {}, {}, {}, {}, 0
    for line in open(sys.argv[2]):
        m = re.match(r"TRACE (\d+\.\d+) .*trainer rank 0: publish of version (\d+) started", line)
        if m:
            pub[int(m.group(2))] = float(m.group(1))
    for path in sys.argv[3:]:
        cur = None
        for line in open(path):
            m = re.match(r"TRACE (\d+\.\d+) .*pull of version (\d+) opened", line)
            if m:
                cur = int(m.group(2))
            m = re.match(r"TRACE (\d+\.\d+) .*engine \S+: reported", line)
            if m and cur is not None:
                ready[cur] = max(ready.get(cur, 0.0), float(m.group(1)))
            m = re.search(r"version (\d+): .*on the wire (\d+) of (\d+) bytes", line)
            if m:
                wire[int(m.group(1))] = wire.get(int(m.group(1)), 0) + int(m.group(2))
                owed[int(m.group(1))] = owed.get(int(m.group(1)), 0) + int(m.group(3))
            m = re.search(r"rank 0's image (\d+) bytes", line)
            if m:
                image = int(m.group(1))
    for v in range(2, versions + 1):
        if v in pub and v in ready:
            print("%d %.4f %d %d" % (v, ready[v] - pub[v], wire.get(v, image), owed.get(v, image)))


main()
