#!/usr/bin/env bash
# Relays serve deltas out of GPU images (docs/DELTA.md, "Relays serve
# deltas"): two trainer ranks holding their publish slots on cuda:0 and a
# chain of two staged engine nodes of one rank each, n0 -> n1, their images
# on cuda:0 (plan relay:1, hosts of their own by host id, over tcp:
# WSYNC_LOCAL_TRANSPORT=0 as in delta_pull_gpu_test, so the trainer ranks
# stand in for another host). Versions from real AdamW steps
# (tests/tools/adamw_versions.py). n0 takes every version after the first
# as deltas from the trainer ranks; n1 gets every version through n0's
# relay, and every one after the first as deltas the relay encoded on the
# GPU (engine_side/relay_delta.c through common/delta/delta_mem.c) against
# the version before, which n0 keeps in its other image slot: both logs say
# so, n1's bytes on the wire stay below a quarter of the image, and every
# tensor of every version on both nodes, dumped from GPU memory, is
# torch.equal to the file it was published from. Skips without CUDA.
source "$(dirname "$0")/../integration/lib.sh"
NEED_CUDA=1 source "$WSYNC_ROOT/tests/python/pick_python.sh"
names="relay_delta_gpu_chain_ready relay_delta_gpu_every_tensor_equal relay_delta_gpu_child_gets_deltas_from_the_relay
       relay_delta_gpu_relay_logs_its_deltas"
skip_unless_cuda_python "$names"
DEV=cuda:0
NV=6
"$PY" "$WSYNC_ROOT/tests/tools/adamw_versions.py" "$TMP/v" --steps $((NV - 1)) --hidden 256 --intermediate 704 \
    --layers 2 --heads 4 --kv-heads 2 --vocab 4096 --batch 2 --seq 32 >"$TMP/gen.log" 2>&1 ||
    { fail relay_delta_gpu_chain_ready "generator failed: $(tail -3 "$TMP/gen.log")"; exit 0; }
FILES=$(ls "$TMP"/v/v*.safetensors | tr '\n' ',' | sed 's/,$//') # version v is file v-1
relays() { # URL: how many engine nodes registered a relay address
    curl -fsS "$1/v1/status" | "$PY" -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["engines"] if (e.get("endpoint") or {}).get("relay")))'
}
dumps_equal() { # ID: every version of node ID
    local v
    for v in $(seq 1 $NV); do
        "$PY" "$WSYNC_ROOT/tests/tools/dump_equal.py" "$TMP/v/v$(printf %04d $((v - 1))).safetensors" \
            "$TMP/d/$1/rank0/v$v.safetensors" || return 1
    done
}

port=$(free_port)
url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$url/healthz" 30 || { fail relay_delta_gpu_chain_ready "control endpoint did not come up"; exit 0; }
pids=()
for i in 0 1; do
    # (relay_stall_ms 30 s: on a loaded host the child does not give its relay up for being slow)
    env WSYNC_LOCAL_TRANSPORT=0 WSYNC_LOG=info WSYNC_TRACE=1 WSYNC_RELAY_STALL_MS=30000 timeout 240 "$WSYNC" engine \
        --control "$url" --engine "n$i" --local-rank 0 --local-world 1 --versions $NV --mode staged --plan relay:1 \
        --transport tcp --device $DEV --host-id "h-n$i" --timeout-ms 120000 --dump "$TMP/d" >"$TMP/n$i.log" 2>&1 &
    pids+=($!)
    WSYNC_PIDS+=($!)
done
for i in $(seq 1 600); do [ "$(relays "$url")" = 2 ] && break; sleep 0.05; done
for r in 0 1; do
    bg env WSYNC_LOCAL_TRANSPORT=0 timeout 240 "$WSYNC" trainer --control "$url" --rank $r --world 2 \
        --safetensors "$FILES" --versions $NV --chunk 256K --device $DEV --host-id h-rt --wait-engines 2 \
        >"$TMP/t$r.log" 2>&1
done
ok=0
for p in "${pids[@]}"; do wait "$p" || ok=1; done
if [ $ok = 0 ]; then pass relay_delta_gpu_chain_ready
else fail relay_delta_gpu_chain_ready "$(tail -n 2 "$TMP"/n*.log | tr '\n' ' ')"; fi
if dumps_equal n0 && dumps_equal n1; then pass relay_delta_gpu_every_tensor_equal
else fail relay_delta_gpu_every_tensor_equal "a dump differs from its file"; fi
# Both nodes: every version after the first as deltas from the one before, below a quarter of the image;
# n1 every version through n0's relay.
if "$PY" - $NV "$TMP/n0.log" "$TMP/n1.log" <<'PY'; then
import re, sys
nv = int(sys.argv[1])
for p in sys.argv[2:]:
    got = {}
    for m in re.finditer(r"version (\d+): (\d+) pieces as deltas from version (\d+) .*on the wire (\d+) of (\d+) bytes",
                         open(p).read()):
        v, n, b, wire, owed = map(int, m.groups())
        assert n > 0 and b == v - 1, m[0]
        got[v] = (wire, owed)
    assert sorted(got) == list(range(2, nv + 1)), (p, sorted(got))
    for v, (wire, owed) in sorted(got.items()):
        print("%s: version %d: %d of %d bytes on the wire (%.1f%%)" % (p.split("/")[-1], v, wire, owed, 100.0 * wire / owed))
        assert wire < owed / 4, (p, v)
child = open(sys.argv[3]).read()
for v in range(1, nv + 1):
    assert re.search(r"version %d from the relay of engine n0 " % v, child), v
PY
    pass relay_delta_gpu_child_gets_deltas_from_the_relay
else
    fail relay_delta_gpu_child_gets_deltas_from_the_relay \
        "$(grep -h 'pieces as deltas\|delta base\|given up\|goes in full' "$TMP"/n[01].log | head -4)"
fi
relayed=$(grep -c "engine n0's relay: version [0-9]* to engine n1 rank 0: [1-9][0-9]* pieces as deltas from version" \
    "$TMP/n0.log")
if [ "$relayed" = $((NV - 1)) ]; then pass relay_delta_gpu_relay_logs_its_deltas
else fail relay_delta_gpu_relay_logs_its_deltas "$relayed relay lines: $(grep -h 'relay' "$TMP/n0.log" | tail -3)"; fi
exit 0
