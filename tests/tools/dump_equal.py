"""dump_equal.py FILE DUMP... [-- FILE DUMP...]...: every tensor of each DUMP
(a safetensors file an engine wrote with --dump) equals its group's FILE's,
bit for bit (torch.equal on the raw bytes as int16), with the same names.
Groups are separated by "--", so one process (one torch import, ~2 s on the
test machine) checks every version of a node. Reads both with struct and
json, not wsync. Exits non-zero, naming the dump and the tensors, at the
first that differs."""
import json
import struct
import sys

import torch


def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: torch.frombuffer(bytearray(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) or
                                bytearray(2), dtype=torch.int16)
            for k, v in h.items() if k != "__metadata__"}


def groups(args):
    g = []
    for a in args:
        if a == "--":
            if g:
                yield g
            g = []
        else:
            g.append(a)
    if g:
        yield g


for group in groups(sys.argv[1:]):
    want = load(group[0])
    for d in group[1:]:
        got = load(d)
        assert got.keys() == want.keys(), (d, sorted(set(got) ^ set(want))[:3])
        bad = [k for k in want if not torch.equal(got[k], want[k])]
        assert not bad, (d, bad[:3])
