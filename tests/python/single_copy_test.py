"""single_copy_test.py: Publisher.publish(v, single_copy=True) and
Publisher.wait_held with a real engine process on this host (one host id):
the engine copies each version straight out of the trainer's tensors; the
trainer writes other bytes into them as soon as wait_held returns True, and
the engine must still hold the version intact (compared with torch.equal),
staged and in place. Then the timeout path: no engine pulls, wait_held
returns False naming the engine node; and wait_held of a version published
through a slot is refused."""
import common
import qwen_tiny
import wsync

HOST_ID = "py-single-copy"


def run(checks, mode):
    name = mode.replace("-", "_")
    with common.Serve() as srv:
        eng = common.spawn("single_copy_engine.py", srv.url, "pysc-" + name, mode, 2)
        try:
            common.wait_line(eng, "registered")
            tensors = wsync.pack(qwen_tiny.state(1))
            with wsync.Publisher(srv.url, 0, 1, tensors, host_id=HOST_ID, chunk=64 << 10) as pub:
                for v in (1, 2):
                    new = qwen_tiny.state(v)
                    for n, t in tensors.items():
                        t.copy_(new[n])
                    pub.publish(v, single_copy=True)
                    held = pub.wait_held(v, timeout_ms=60000)
                    checks.ok("%s_v%d_wait_held_true" % (name, v), held, pub.hold_error)
                    for t in tensors.values():  # the next optimizer step, at once
                        t.fill_(7)
                    common.wait_line(eng, "held %d" % v)
                    eng.stdin.write("scribbled %d\n" % v)
                    eng.stdin.flush()
                    for line in common.wait_line(eng, "checked %d" % v):
                        if line.startswith(("PASS ", "FAIL ")):
                            print(line.strip(), flush=True)
                            checks.failed += line.startswith("FAIL ")
                eng.wait(timeout=60)
                # The engine is gone (still registered, holding 2): a timeout.
                pub.publish(3, single_copy=True)
                held = pub.wait_held(3, timeout_ms=300)
                checks.ok("%s_wait_held_timeout_names_engine" % name,
                          not held and "pysc-" + name in pub.hold_error and "within 300 ms" in pub.hold_error,
                          "held=%r error=%r" % (held, pub.hold_error))
                pub.publish(4, single_copy=False)
                checks.raises("%s_wait_held_of_slot_version_refused" % name, lambda: pub.wait_held(4),
                              wsync.Error, "not published single-copy")
        finally:
            if eng.poll() is None:
                eng.kill()
            eng.wait()


def main():
    checks = common.Checks()
    for mode in ("staged", "in-place"):
        run(checks, mode)
    checks.exit()


main()
