"""delta_bases.py URL VDIR: one process drives both sides, in an order no
timing decides: a wsync.Publisher (host memory, the setting delta_bases from
the environment) publishes the AdamW versions of VDIR (adamw_versions.py's
safetensors files, version v is file v-1), and a wsync.Receiver (staged,
tcp) pulls versions 1, 3, 5 (each two behind the one held) and 6. Each pull:
every tensor's bytes equal the file's; prints one line per pull with its
last_pull, for delta_bases_test.sh to judge."""
import json
import struct
import sys

import torch
import wsync


def load(vdir, v):
    b = open("%s/v%04d.safetensors" % (vdir, v - 1), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, x in h.items():
        if k == "__metadata__":
            continue
        raw = bytearray(b[8 + n + x["data_offsets"][0]:8 + n + x["data_offsets"][1]])
        assert x["dtype"] == "BF16", (k, x["dtype"])
        out[k] = torch.frombuffer(raw, dtype=torch.bfloat16).reshape(x["shape"])
    return out


def main():
    url, vdir = sys.argv[1], sys.argv[2]
    tensors = {k: t.clone() for k, t in load(vdir, 1).items()}
    pub = wsync.Publisher(url, 0, 1, tensors)
    rcv = wsync.Receiver(url, "skipper", 0, 1, mode="staged", transport="tcp")

    def publish(v):
        for k, t in load(vdir, v).items():
            tensors[k].copy_(t)
        pub.publish(v)

    def pull(v):
        assert rcv.pull(version=v, timeout=60) == v
        want, got = load(vdir, v), rcv.tensors()
        assert set(want) == set(got), sorted(set(want) ^ set(got))[:3]
        for k, t in want.items():
            assert torch.equal(got[k].view(torch.int16), t.view(torch.int16)), (v, k)
        print("pulled version %d: equal, last_pull %s" % (v, json.dumps(rcv.last_pull, sort_keys=True)), flush=True)

    publish(1)
    pull(1)
    for v in (2, 3):
        publish(v)
    pull(3)  # held 1: two behind
    for v in (4, 5):
        publish(v)
    pull(5)  # held 3: two behind
    publish(6)
    pull(6)  # held 5: one behind
    rcv.close()
    pub.close()


main()
