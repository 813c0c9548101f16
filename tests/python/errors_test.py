"""errors_test.py: every failure is a wsync.Error naming what was wrong:
tensors refused before anything is sent (non-contiguous, mixed devices,
wrong shard shape, unknown name, wrong dtype or shape vs the manifest, on
either side), a dead trainer (at once, not at the timeout), a version
waited for before it is published, a timeout (wsync.TimeoutError), and a version
that fails verification leaving the staged `into` tensors as they were (and,
in place, raising with nothing held, the next clean version landing in the
same `into` tensors)."""
import os
import signal
import time

import common
import qwen_tiny
import torch
import wsync
from wsync import _lib, _manifest


def refused_before_sending(c):
    sd = qwen_tiny.state(1)
    url = "http://127.0.0.1:9"  # nothing listens: the checks come before any connection
    nc = dict(sd, **{"model.norm.weight": torch.zeros(64, 2, dtype=torch.bfloat16)[:, 0]})
    c.raises("publisher_non_contiguous", lambda: wsync.Publisher(url, 0, 1, nc), wsync.Error,
             "model.norm.weight", "not contiguous")
    mixed = dict(sd, **{"model.norm.weight": torch.zeros(64, dtype=torch.bfloat16, device="meta")})
    c.raises("publisher_mixed_devices", lambda: wsync.Publisher(url, 0, 1, mixed), wsync.Error,
             "model.norm.weight", "meta")
    shapes = {n: tuple(t.shape) for n, t in sd.items()}
    shards = {n: t.chunk(2, 0)[1] for n, t in sd.items()}
    bad = dict(shards, **{"model.embed_tokens.weight": sd["model.embed_tokens.weight"][:100]})
    c.raises("publisher_fsdp_wrong_shard_shape",
             lambda: wsync.Publisher(url, 1, 2, bad, shapes=shapes, layout="fsdp"), wsync.Error,
             "model.embed_tokens.weight", "(128, 64)", "torch.chunk")
    extra = dict(shards, **{"model.bogus.weight": torch.zeros(3, dtype=torch.bfloat16)})
    c.raises("publisher_unknown_name", lambda: wsync.Publisher(url, 1, 2, extra, shapes=shapes, layout="fsdp"),
             wsync.Error, "model.bogus.weight")
    c.raises("publisher_device_mismatch", lambda: wsync.Publisher(url, 0, 1, sd, device="cuda:0"), wsync.Error,
             "cuda:0")
    mj = _manifest.build([(n, t.dtype, tuple(t.shape)) for n, t in sd.items()])[2]  # what rank 0 builds
    f32 = dict(sd, **{"model.layers.1.mlp.up_proj.weight": sd["model.layers.1.mlp.up_proj.weight"].float()})
    c.raises("publisher_wrong_dtype_vs_manifest", lambda: wsync.Publisher(url, 1, 2, f32, manifest=mj),
             wsync.Error, "model.layers.1.mlp.up_proj.weight", "F32", "BF16")
    c.raises("receiver_tp_and_target_exclusive", lambda: wsync.Receiver(url, "e", 0, 1, tp=2, target={}),
             wsync.Error, "tp=", "target=")
    c.raises("publisher_zero_copy_needs_in_place_extents",
             lambda: wsync.Publisher(url, 0, 1, sd, zero_copy=True), wsync.Error, "zero_copy", "wsync.pack")


def into_mismatch(c, srv):
    """One published version; engines whose into= does not match it."""
    sd = qwen_tiny.state(1)
    with wsync.Publisher(srv.url, 0, 1, sd) as pub:
        pub.publish(1)
        cases = [("dtype", "model.norm.weight", torch.zeros(64, dtype=torch.float32), "float32"),
                 ("shape", "model.norm.weight", torch.zeros(65, dtype=torch.bfloat16), "(65,)"),
                 ("unknown_name", "model.nope.weight", torch.zeros(64, dtype=torch.bfloat16), "not in the")]
        for i, (what, name, t, needle) in enumerate(cases):
            own = {n: torch.zeros_like(v) for n, v in sd.items() if n != "model.norm.weight"}
            own[name] = t
            with wsync.Receiver(srv.url, "bad-%d" % i, 0, 1, into=own) as r:
                c.raises("receiver_into_wrong_%s" % what, lambda: r.pull(timeout=30), wsync.Error, name, needle)
                c.ok("receiver_into_wrong_%s_left_untouched" % what,
                     all(float(v.abs().sum()) == 0 for v in own.values()), "into= was written")
        with wsync.Receiver(srv.url, "tp-odd", 0, 1, tp=2) as r:  # the MLP width 129 does not split in 2
            c.raises("receiver_tp_that_does_not_divide_named", lambda: r.pull(timeout=30), wsync.Error,
                     "mlp.gate_proj.weight")
        with wsync.Receiver(srv.url, "tmo", 0, 1) as r:
            c.ok("pull_first_version", r.pull(timeout=30) == 1)
            e = c.raises("pull_timeout_is_TimeoutError", lambda: r.pull(timeout=0.5), wsync.TimeoutError)
            c.ok("timeout_error_is_an_Error_with_status", isinstance(e, wsync.Error) and e is not None
                 and e.status == _lib.WSYNC_ERR_TIMEOUT and e.status_name == "WSYNC_ERR_TIMEOUT", repr(e))


def dead_trainer(c):
    with common.Serve() as srv:
        t = common.spawn("sync_trainer.py", srv.url, 0, 1, "full", 1, "-")
        common.wait_line(t, "published version 1")
        os.kill(t.pid, signal.SIGKILL)
        t.wait()
        with wsync.Receiver(srv.url, "orphan", 0, 1) as r:
            t0 = time.monotonic()
            c.raises("dead_trainer_named", lambda: r.pull(timeout=20), wsync.Error, "trainer rank 0", "refused")
            took = time.monotonic() - t0
            # it refuses at once: the pull ends then, not at its timeout (it took 20 s)
            c.ok("dead_trainer_fails_before_timeout", took < 10, "%.1f s" % took)
            c.ok("dead_trainer_nothing_held", r.version == 0 and r.tensors() == {}, str(r.version))


def future_version(c):
    """pull(version=v) before v is published waits for it, up to the timeout
    (an engine started before its trainer); one never published times out."""
    with common.Serve() as srv:
        with wsync.Receiver(srv.url, "early", 0, 1) as r:
            t = common.spawn("sync_trainer.py", srv.url, 0, 1, "full", 1, "-")
            try:
                c.ok("future_version_waited_for", r.pull(version=1, timeout=120) == 1, str(r.version))
                c.ok("future_version_tensors", all(torch.equal(r.tensors()[n], v)
                                                   for n, v in qwen_tiny.state(1).items()))
                c.raises("future_version_times_out", lambda: r.pull(version=3, timeout=1), wsync.TimeoutError,
                         "version 3 was not published")
            finally:
                t.stdin.close()
                t.wait()


def corrupt_version(c):
    """Version 1 comes from a clean trainer; version 2 from a restarted rank 0
    whose piece 0 is corrupted after its digest (WSYNC_TEST_CORRUPT_PIECE):
    the staged pull fails verification and `into` (and the held version)
    stay version 1; the in-place pull (into= written during the pull) fails
    too, holding nothing; version 3, clean, lands in place in the same
    tensors."""
    with common.Serve() as srv:
        clean = common.spawn("sync_trainer.py", srv.url, 0, 1, "full", 1, "-")
        bad = good = None
        try:
            own = {n: torch.zeros(s, dtype=torch.bfloat16) for n, s in qwen_tiny.specs()}
            mine = {n: torch.zeros(s, dtype=torch.bfloat16) for n, s in qwen_tiny.specs()}
            ptrs = {n: t.data_ptr() for n, t in mine.items()}
            with wsync.Receiver(srv.url, "corrupt", 0, 1, into=own, mode="staged") as r, \
                    wsync.Receiver(srv.url, "corrupt-ip", 0, 1, into=mine, mode="in-place") as ip:
                v1 = qwen_tiny.state(1)
                c.ok("corrupt_case_v1_received", r.pull(timeout=120) == 1
                     and all(torch.equal(own[n], v1[n]) for n in v1))
                c.ok("in_place_into_v1_received", ip.pull(timeout=120) == 1
                     and all(torch.equal(mine[n], v1[n]) for n in v1)
                     and all(ip.tensors()[n].data_ptr() == ptrs[n] for n in mine))
                held = {n: x.data_ptr() for n, x in r.tensors().items()}
                clean.kill()
                clean.wait()
                bad = common.spawn("sync_trainer.py", srv.url, 0, 1, "full", 2, "-",
                                   env={"START_VERSION": "2", "WSYNC_TEST_CORRUPT_PIECE": "0"})
                common.wait_line(bad, "published version 2")
                e = c.raises("corrupt_version_fails_verification", lambda: r.pull(timeout=60), wsync.Error)
                c.ok("corrupt_version_error_says_digest", e is not None and "digest" in str(e).lower(), str(e))
                c.ok("corrupt_version_into_unchanged", all(torch.equal(own[n], v1[n]) for n in v1),
                     "into= changed by a version that failed verification")
                views = r.tensors()
                c.ok("corrupt_version_staged_image_unchanged", r.version == 1 and all(
                    torch.equal(views[n], v1[n]) for n in v1) and held == {n: x.data_ptr() for n, x in views.items()},
                    "held version %d" % r.version)
                e = c.raises("in_place_corrupt_version_raises", lambda: ip.pull(timeout=60), wsync.Error)
                c.ok("in_place_corrupt_version_error_says_digest", e is not None and "digest" in str(e).lower(),
                     str(e))
                c.ok("in_place_corrupt_version_nothing_held", ip.version == 0 and ip.tensors() == {},
                     "held version %d" % ip.version)
                bad.kill()
                bad.wait()
                good = common.spawn("sync_trainer.py", srv.url, 0, 1, "full", 3, "-", env={"START_VERSION": "3"})
                common.wait_line(good, "published version 3")
                v3 = qwen_tiny.state(3)
                c.ok("in_place_into_next_clean_version", ip.pull(timeout=60) == 3
                     and all(torch.equal(mine[n], v3[n]) for n in v3)
                     and ptrs == {n: t.data_ptr() for n, t in mine.items()})
        finally:
            for t in (clean, bad, good):
                if t is not None:
                    t.kill()
                    t.wait()


def token(c):
    """A control endpoint that requires a bearer token: the right token= on
    both sides syncs, a wrong one is refused as WSYNC_ERR_AUTH."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
        f.write("s3cret-token-for-the-test\n")
        f.flush()
        with common.Serve(token_file=f.name) as srv:
            sd = qwen_tiny.state(1)
            e = c.raises("wrong_token_refused", lambda: wsync.Publisher(srv.url, 0, 1, sd, token="nope"),
                         wsync.Error, "WSYNC_ERR_AUTH")
            with wsync.Publisher(srv.url, 0, 1, sd, token="s3cret-token-for-the-test") as pub:
                pub.publish(1)
                with wsync.Receiver(srv.url, "tok", 0, 1, token="s3cret-token-for-the-test") as r:
                    v = r.pull(timeout=60)
                    c.ok("token_sync_every_tensor_equal", v == 1 and all(
                        torch.equal(r.tensors()[n], sd[n]) for n in sd))
            del e


def main():
    c = common.Checks()
    token(c)
    refused_before_sending(c)
    with common.Serve() as srv:
        into_mismatch(c, srv)
    dead_trainer(c)
    future_version(c)
    corrupt_version(c)
    c.exit()


main()
