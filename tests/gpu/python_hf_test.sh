#!/usr/bin/env bash
# wsync.hf on a GPU with a real transformers model: Qwen2.5-0.5B's
# configuration, random init, bf16 on cuda:0. A trainer process takes AdamW
# steps and publishes; this engine process holds its own copy and receives in
# place (and staged); its logits on a fixed batch are bit-identical to the
# trainer's, version after version. Skips without CUDA or transformers.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
if [ -z "$PY" ]; then skip python_hf "no CUDA device visible to a python with torch"; exit 0; fi
if ! "$PY" -c 'import transformers' 2>/dev/null; then skip python_hf "no transformers for $PY"; exit 0; fi
if ! grep -q cuda <<<"$("$WSYNC" --version)"; then skip python_hf "libwsync built without CUDA"; exit 0; fi
export WSYNC_ROOT WSYNC_LIB=${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so WSYNC_REQUIRE_TRANSFORMERS=1
HF_TEST_MODEL=qwen2.5-0.5b HF_TEST_DEVICE=cuda:0 HF_TEST_VERSIONS=3 timeout 500 "$PY" "$WSYNC_ROOT/tests/python/hf_test.py" \
    || echo "FAIL python_hf: hf_test.py exited $?"
# DTensor shards (FSDP2's parameters) through wsync.shard_state_dict: this
# host's torch has DTensor, Debian's 1.13 does not (gloo on the CPU).
timeout 300 "$PY" "$WSYNC_ROOT/tests/python/dtensor_test.py" || echo "FAIL python_dtensor: dtensor_test.py exited $?"
