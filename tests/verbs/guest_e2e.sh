#!/usr/bin/env bash
# guest_e2e.sh: inside the verbs VM, the whole data path over --transport
# verbs with separate processes: a control endpoint, two trainer ranks
# publishing safetensors files, and a two-rank engine node whose dumps must
# equal the published files byte for byte. Then faults: a trainer rank killed
# mid-transfer (the engine's pull fails in time naming the rank, the next
# pull succeeds), and a flipped byte caught by the digest. No python here:
# state is read from the processes' logs.
set -u
W=${WSYNC_BIN:?}
T=$(mktemp -d /tmp/e2e.XXXX)
PIDS=()
bg() { "$@" & PIDS+=($!); }
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 10; i++)); do "$@" && return 0; sleep 0.1; done; return 1; }

URL=http://127.0.0.1:8470
echo "vm-token-$$" >"$T/token"   # case 1 runs with a token (every pull and verbs handshake proves it)
bg "$W" serve --listen 127.0.0.1:8470 --token-file "$T/token" 2>"$T/serve.log"
wait_until 20 curl -fsS -o /dev/null "$URL/healthz" || { fail e2e_serve_started "no control endpoint"; exit 1; }

# Sources: two versions of a synthetic model as safetensors, written over tcp
# by an engine that verified them (any correct writer would do).
"$W" demo --trainers 1 --engines 1 --local-ranks 1 --synthetic 12M --versions 2 --chunk 1M --transport tcp \
    --dump "$T/src" >"$T/src.log" 2>&1 || fail e2e_sources "demo over tcp failed: $(tail -3 "$T/src.log")"
S1=$T/src/e0/rank0/v1.safetensors S2=$T/src/e0/rank0/v2.safetensors

# --- 1. a 2-rank engine node pulls both versions over verbs; dumps == sources.
#        With a token: the pull requests and the verbs handshakes prove it.
for r in 0 1; do
    bg "$W" trainer --control "$URL" --rank $r --world 2 --safetensors "$S1,$S2" --versions 2 --chunk 1M \
        --wait-engines 1 --token-file "$T/token" >"$T/t$r.log" 2>&1
done
for r in 0 1; do
    bg "$W" engine --control "$URL" --engine vm --local-rank $r --local-world 2 --versions 2 --transport verbs \
        --dump "$T/dump" --timeout-ms 60000 --token-file "$T/token" >"$T/e$r.log" 2>&1
    E[$r]=$!
done
ok=1
for r in 0 1; do wait "${E[$r]}" || { ok=0; echo "engine rank $r failed: $(tail -3 "$T/e$r.log")"; }; done
if [ $ok = 1 ]; then pass e2e_verbs_engine_holds_both_versions; else fail e2e_verbs_engine_holds_both_versions; fi
ok=1
for r in 0 1; do
    cmp "$S1" "$T/dump/vm/rank$r/v1.safetensors" || ok=0
    cmp "$S2" "$T/dump/vm/rank$r/v2.safetensors" || ok=0
done
if [ $ok = 1 ]; then pass e2e_verbs_dumps_equal_sources; else fail e2e_verbs_dumps_equal_sources "$(ls -R "$T/dump" | head)"; fi
grep -qi 'verbs' "$T/e0.log" "$T/e1.log" && echo "# engine log names verbs"
cleanup; PIDS=()
bg "$W" serve --listen 127.0.0.1:8471 2>"$T/serve2.log"
URL=http://127.0.0.1:8471
wait_until 20 curl -fsS -o /dev/null "$URL/healthz"

# --- 2. a trainer rank killed mid-transfer: the engine's pull fails within its
#        timeout naming the rank; with the rank back, the next pull succeeds.
TR=(--synthetic 4M --chunk 128K --versions 1000 --interval-ms 3000)
bg "$W" trainer --control "$URL" --rank 0 --world 2 "${TR[@]}" >"$T/k0.log" 2>&1
# Rank 1 holds each request 1.5 s before its puts, so the kill lands while
# the engine's pull is in flight (its landing is slowed too).
WSYNC_TEST_SERVE_DELAY_MS=1500 bg "$W" trainer --control "$URL" --rank 1 --world 2 "${TR[@]}" >"$T/k1.log" 2>&1
K1=$!
WSYNC_TEST_LAND_DELAY_MS=100 bg "$W" engine --control "$URL" --engine surv --local-rank 0 --local-world 1 --follow \
    --transport verbs --timeout-ms 8000 >"$T/surv.log" 2>&1
pulling() { curl -fsS "$URL/v1/status" | tr -d ' ' | grep -q '"state":"pulling"'; }
readies() { grep -c 'ready on' "$T/surv.log"; }
wait_until 90 grep -q 'ready on' "$T/surv.log"
wait_until 30 pulling
sleep 0.3
before=$(readies)
kill -9 $K1
t0=$(date +%s)
if wait_until 30 grep -q 'pull failed.*trainer rank 1' "$T/surv.log"; then
    pass e2e_verbs_trainer_killed_pull_fails_naming_rank
    echo "# failed after $(( $(date +%s) - t0 )) s: $(grep -m1 'pull failed' "$T/surv.log" | cut -c1-200)"
else
    fail e2e_verbs_trainer_killed_pull_fails_naming_rank "$(tail -3 "$T/surv.log")"
fi
bg "$W" trainer --control "$URL" --rank 1 --world 2 "${TR[@]}" >"$T/k1b.log" 2>&1
more() { [ "$(readies)" -gt "$before" ]; }
if wait_until 120 more; then pass e2e_verbs_next_pull_succeeds
else fail e2e_verbs_next_pull_succeeds "$(tail -3 "$T/surv.log")"; fi
cleanup; PIDS=()
bg "$W" serve --listen 127.0.0.1:8472 2>"$T/serve3.log"
URL=http://127.0.0.1:8472
wait_until 20 curl -fsS -o /dev/null "$URL/healthz"

# --- 3. a flipped byte is caught by the digest: the version is never ready.
WSYNC_TEST_CORRUPT_PIECE=3 bg "$W" trainer --control "$URL" --rank 0 --world 1 --synthetic 2M --chunk 64K \
    --versions 1 >"$T/c.log" 2>&1
bg "$W" engine --control "$URL" --engine corrupt --local-rank 0 --local-world 1 --versions 1 --transport verbs \
    --timeout-ms 8000 >"$T/corrupt.log" 2>&1
if wait_until 60 grep -q 'failed verification' "$T/corrupt.log"; then
    pass e2e_verbs_flipped_byte_caught_by_digest
    if grep -q 'ready' "$T/corrupt.log"; then fail e2e_verbs_corrupt_version_never_ready "$(grep ready "$T/corrupt.log")"
    else pass e2e_verbs_corrupt_version_never_ready; fi
else
    fail e2e_verbs_flipped_byte_caught_by_digest "$(tail -3 "$T/corrupt.log")"
fi
echo "# logs of the last case:"; tail -2 "$T/corrupt.log" | sed 's/^/#   /'
