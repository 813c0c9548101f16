"""abi_test.py: the ctypes structures of python/wsync/_lib.py against the C
headers: a C program compiled here prints every field's offset and each
structure's size; they must equal what ctypes computes."""
import os
import subprocess
import tempfile

import common
from wsync import _lib

STRUCTS = {
    "wsync_publisher_config_t": (_lib.PublisherConfig, "trainer_side/wsync_publisher.h"),
    "wsync_receiver_config_t": (_lib.ReceiverConfig, "engine_side/wsync_receiver.h"),
    "wsync_owned_t": (_lib.Owned, "trainer_side/wsync_publisher.h"),
    "wsync_publish_opts_t": (_lib.PublishOpts, "trainer_side/wsync_publisher.h"),
    "wsync_tensor_info_t": (_lib.TensorInfo, "common/wsync.h"),
    "wsync_dest_tensor_t": (_lib.DestTensor, "engine_side/wsync_receiver.h"),
    "wsync_pull_progress_t": (_lib.PullProgress, "engine_side/wsync_receiver.h"),
}


def main():
    checks = common.Checks()
    lines = ["#include <stdio.h>", "#include <stddef.h>"]
    lines += sorted({'#include "%s"' % h for _, h in STRUCTS.values()})
    lines.append("int main(void) {")
    for cname, (cls, _) in STRUCTS.items():
        lines.append('printf("%s @sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in cls._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, f[0], cname, f[0]))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
        open(src, "w").write("\n".join(lines) + "\n")
        r = subprocess.run(["cc", "-std=gnu11", "-I", common.ROOT, src, "-o", exe], capture_output=True, text=True)
        checks.ok("abi_compiles_against_headers", r.returncode == 0, r.stderr[-800:])
        if r.returncode:
            checks.exit()
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split("\n")
    c = {tuple(l.split()[:2]): int(l.split()[2]) for l in out if l}
    for cname, (cls, _) in STRUCTS.items():
        bad = ["size C %d ctypes %d" % (c[(cname, "@sizeof")], __import__("ctypes").sizeof(cls))] \
            if c[(cname, "@sizeof")] != __import__("ctypes").sizeof(cls) else []
        bad += ["%s: C %d ctypes %d" % (f[0], c[(cname, f[0])], getattr(cls, f[0]).offset)
                for f in cls._fields_ if c[(cname, f[0])] != getattr(cls, f[0]).offset]
        checks.ok("abi_%s_matches_ctypes" % cname, not bad,
                  "; ".join(bad) + " (a field changed in the header: update python/wsync/_lib.py)")
    checks.exit()


main()
