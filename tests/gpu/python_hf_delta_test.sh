#!/usr/bin/env bash
# Issue 28's H200 check: a transformers Qwen2.5-0.5B-shaped model (random
# init) with fp32 master weights on cuda:0 takes real AdamW steps at lr 1e-6;
# its bf16 image, published through wsync.hf from GPU memory, is received by
# an engine process into its own model on cuda:0 through wsync.hf, staged
# over tcp: every version after the first as deltas (the GPU encoder on the
# trainer's slots, the GPU decoder on the engine's image), every tensor
# torch.equal at every version, the wire below a quarter of the image
# (tests/python/hf_delta_test.py). WSYNC_LOCAL_TRANSPORT=0: tcp stands in
# for a trainer on another host (on one host the engine would copy with the
# local transport, where deltas are not asked). Skips without CUDA or
# transformers.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
if [ -z "$PY" ]; then skip python_hf_delta "no CUDA device visible to a python with torch"; exit 0; fi
if ! "$PY" -c 'import transformers' 2>/dev/null; then skip python_hf_delta "no transformers for $PY"; exit 0; fi
if ! grep -q cuda <<<"$("$WSYNC" --version)"; then skip python_hf_delta "libwsync built without CUDA"; exit 0; fi
export WSYNC_LOCAL_TRANSPORT=0 WSYNC_ROOT WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so WSYNC_REQUIRE_TRANSFORMERS=1
HF_TEST_MODEL=qwen2.5-0.5b HF_TEST_DEVICE=cuda:0 HF_TEST_VERSIONS=4 timeout 500 "$PY" \
    "$WSYNC_ROOT/tests/python/hf_delta_test.py" || echo "FAIL python_hf_delta: hf_delta_test.py exited $?"
