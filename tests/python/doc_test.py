"""doc_test.py: the examples in docs/PYTHON.md run as written: the trainer and
engine blocks against a control endpoint on 127.0.0.1:8470 (taken for the
test if free, else the blocks run with their URL pointed at another port),
the others as they are."""
import os
import re
import subprocess
import sys
import tempfile

import common


def main():
    c = common.Checks()
    text = open(os.path.join(common.ROOT, "docs", "PYTHON.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    c.ok("doc_has_examples", len(blocks) >= 4, "%d python blocks" % len(blocks))
    with common.Serve() as srv, tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PYTHONPATH=os.path.join(common.ROOT, "python"))
        procs = []
        for i, b in enumerate(blocks):
            code = b.replace("http://127.0.0.1:8470", srv.url)
            path = os.path.join(d, "block%d.py" % i)
            open(path, "w").write(code)
            procs.append((i, code, path))
        trainer = None
        for i, code, path in procs:
            if "input(" in code:
                trainer = subprocess.Popen([sys.executable, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, env=env)
                common.watch(trainer)
                common.wait_line(trainer, "serving")
                continue
            r = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=120)
            c.ok("doc_block_%d_runs" % i, r.returncode == 0, (r.stdout + r.stderr)[-600:])
        if trainer is not None:
            trainer.stdin.write("\n")
            trainer.stdin.flush()
            c.ok("doc_trainer_block_runs", trainer.wait(timeout=60) == 0, "exit %s" % trainer.returncode)
        else:
            c.ok("doc_trainer_block_found", False, "no trainer block")
    c.exit()


main()
