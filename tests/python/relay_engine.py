"""relay_engine.py: one engine node (one local rank) of the relay test
(tests/integration/relay_netns_test.sh) that receives into tensors of its
own: the test's model (N bf16 tensors model.layers.{k}.weight of ROWSxCOLS),
allocated here with torch and given as `into`, so the C receiver holds the
caller's destination tensors. The `plan` setting comes from the environment
(WSYNC_PLAN=relay:1). After each version it writes its tensors, as torch
holds them, to DUMP/ID/rank0/v<version>.safetensors for the test to compare
with the source files.

  relay_engine.py URL ID MODE VERSIONS BIND DUMP N ROWS COLS
"""
import os
import sys

import common
import torch
import wsync

sys.path.insert(0, os.path.join(common.ROOT, "tests", "integration"))
import st_tool  # noqa: E402


def main():
    url, eid, mode, versions, bind, dump = sys.argv[1:7]
    n, rows, cols = (int(a) for a in sys.argv[7:10])
    into = {"model.layers.%d.weight" % k: torch.zeros(rows, cols, dtype=torch.bfloat16) for k in range(n)}
    rx = wsync.Receiver(url, eid, 0, 1, into=into, mode=mode, transport="tcp", bind_host=bind,
                        token=os.environ.get("WSYNC_TOKEN"))
    out = os.path.join(dump, eid, "rank0")
    os.makedirs(out, exist_ok=True)
    for _ in range(int(versions)):
        v = rx.pull(timeout=60.0)
        tensors = [(name, "BF16", list(t.shape), t.contiguous().view(torch.int16).numpy().tobytes())
                   for name, t in into.items()]
        st_tool.write(os.path.join(out, "v%d.safetensors" % v), tensors, {"format": "pt"})
        print("engine %s: version %d ready in its own tensors (%s)" % (eid, v, mode), flush=True)
    rx.close()


if __name__ == "__main__":
    main()
