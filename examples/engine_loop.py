"""engine_loop.py: an inference engine's loop with wsync: pull the newest
weights straight into the model's parameters, then generate.

    python3 examples/engine_loop.py --control http://127.0.0.1:8470 --versions 3

One process is one local rank of engine node --engine (start --local-world
of them, --local-rank 0..N-1). Where an engine framework takes new weights,
this pull is what it would call:
  - vLLM: in a weight-transfer engine (vllm.distributed.weight_transfer, the
    update_weights step of init_weight_transfer_engine / start_weight_update /
    update_weights / finish_weight_update), or in a worker extension method
    reached through LLM.collective_rpc(...); each worker holds a
    wsync.Receiver and pulls into model_runner.model's parameters (or hands
    rcv.tensors().items() to model.load_weights(...) where names need
    vLLM's fused-layer mapping).
  - SGLang: where Engine.update_weights_from_tensor /
    update_weights_from_distributed land in the model runner; the runner's
    ranks pull instead of receiving a broadcast.
Pause generation for the pull in mode "in-place" (the parameters are written
during it); mode "staged" keeps serving the held version until the new one
verified."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import tiny_qwen  # noqa: E402
import wsync  # noqa: E402
import wsync.hf  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--control", required=True)
    ap.add_argument("--engine", default="engine-0", help="engine node id (its local ranks share it)")
    ap.add_argument("--local-rank", type=int, default=0)
    ap.add_argument("--local-world", type=int, default=1)
    ap.add_argument("--versions", type=int, default=3, help="stop after holding this version")
    ap.add_argument("--mode", default="in-place", choices=["in-place", "staged"])
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    model = tiny_qwen.make_model(device=a.device, seed=1)  # its own weights until the first pull
    prompt = tiny_qwen.batch_ids(device=a.device)[:, :4]
    with wsync.hf.Receiver(a.control, a.engine, a.local_rank, a.local_world, model, mode=a.mode) as rcv:
        while rcv.version < a.versions:
            try:
                v = rcv.pull(timeout=120)
            except wsync.TimeoutError:
                raise  # no new version for 2 minutes: the trainer is gone
            except wsync.Error as e:
                # e.g. the trainer moved on to a newer version mid-pull. Staged,
                # the held version is intact; in place, the weights are invalid
                # until a pull succeeds, so generate only after one does.
                print("engine %s rank %d: pull failed, retrying: %s" % (a.engine, a.local_rank, e), flush=True)
                continue
            out = tiny_qwen.generate(model, prompt, steps=6)
            print("engine %s rank %d: version %d, generated %s" % (a.engine, a.local_rank, v,
                                                                   out[0, 4:].tolist()), flush=True)


if __name__ == "__main__":
    main()
