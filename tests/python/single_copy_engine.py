"""single_copy_engine.py URL ENGINE MODE VERSIONS: an engine rank for
single_copy_test.py. After each pull it says "held V", waits for the
trainer's "scribbled V" on stdin (the trainer wrote other bytes where this
engine copied V from), then compares every tensor it holds with the tiny
model's version V and says "checked V"."""
import sys

import common
import qwen_tiny
import torch
import wsync


def main():
    url, engine, mode, versions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    checks = common.Checks()
    with wsync.Receiver(url, engine, 0, 1, mode=mode, host_id="py-single-copy") as r:
        print("registered", flush=True)
        for _ in range(versions):
            v = r.pull(timeout=120.0)
            print("held %d" % v, flush=True)
            line = sys.stdin.readline().split()
            if line != ["scribbled", str(v)]:
                checks.ok("%s_v%d_trainer_said_scribbled" % (mode, v), False, "got %r" % line)
                break
            want = qwen_tiny.state(v)
            got = r.tensors()
            bad = [n for n, t in want.items() if n not in got or not torch.equal(got[n], t)]
            checks.ok("%s_v%d_intact_after_trainer_wrote" % (mode.replace("-", "_"), v), not bad,
                      "tensors differ from version %d: %s" % (v, bad[:5]))
            print("checked %d" % v, flush=True)
    checks.exit()


main()
