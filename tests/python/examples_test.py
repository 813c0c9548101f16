"""examples_test.py: examples/trainer_loop.py and examples/engine_loop.py run
as written: a trainer of 3 optimizer steps and an engine node of 2 local
ranks that pulls until it holds version 3 and generates after each pull."""
import os
import subprocess
import sys

import common


def main():
    c = common.Checks()
    ex = os.path.join(common.ROOT, "examples")
    env = dict(os.environ)
    with common.Serve() as srv:
        trainer = subprocess.Popen([sys.executable, os.path.join(ex, "trainer_loop.py"), "--control", srv.url,
                                    "--steps", "3", "--linger", "60"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env=env)
        engines = [subprocess.Popen([sys.executable, os.path.join(ex, "engine_loop.py"), "--control", srv.url,
                                     "--engine", "example", "--local-rank", str(r), "--local-world", "2",
                                     "--versions", "3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env) for r in range(2)]
        outs = [e.communicate(timeout=240)[0] for e in engines]
        trainer.kill()
        tout = trainer.communicate()[0]
    c.ok("example_trainer_published_3_versions", "published version 3" in tout, tout[-800:])
    for r, (e, out) in enumerate(zip(engines, outs)):
        c.ok("example_engine_rank%d_held_version_3_and_generated" % r,
             e.returncode == 0 and "version 3, generated" in out, "exit %s: %s" % (e.returncode, out[-800:]))
    c.exit()


main()
