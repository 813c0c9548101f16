"""trainer_loop.py: an RL trainer's loop with wsync: optimizer step, then
publish the new weights as the next version.

    python3 examples/trainer_loop.py --control http://127.0.0.1:8470 --steps 3

Runs on the CPU with a tiny Qwen2-shaped model (a real transformers
Qwen2ForCausalLM when transformers is installed); --device cuda:0 on a GPU.
One process is one trainer rank (--rank/--world for more; each passes full
weights here, as after an FSDP full-state-dict gather or with DDP)."""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))  # the repository's wsync, if not installed
import tiny_qwen  # noqa: E402
import wsync.hf  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--control", required=True, help="control endpoint URL (wsync serve)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--linger", type=float, default=30.0, help="seconds to keep serving after the last step")
    a = ap.parse_args()

    model = tiny_qwen.make_model(device=a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = tiny_qwen.batch_ids(device=a.device)
    # pack=True moves the weights into wsync's image layout once: publish()
    # then digests them where the optimizer wrote them.
    with wsync.hf.Publisher(a.control, a.rank, a.world, model, pack=True) as pub:
        for step in range(1, a.steps + 1):
            loss = tiny_qwen.logits(model, ids[:, :-1]).float().log_softmax(-1).gather(
                -1, ids[:, 1:, None]).neg().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            t0 = time.perf_counter()
            pub.publish(step)  # returns once the tensors may be written again
            print("trainer: step %d loss %.4f, published version %d in %.1f ms"
                  % (step, loss.item(), step, (time.perf_counter() - t0) * 1e3), flush=True)
        time.sleep(a.linger)  # engines may still be pulling the last version


if __name__ == "__main__":
    main()
