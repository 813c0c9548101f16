#!/usr/bin/env bash
# Issue 25.13: `wsync trainer --listen 127.0.0.1:0` without --advertise
# registered the machine's primary address, where nothing listens, and
# engines could not pull. It advertises the host it bound when --listen
# names one address (the primary one still for 0.0.0.0).
source "$(dirname "$0")/lib.sh"
export WSYNC_HOST_ID=advertise-$$
port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }
bg "$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 1M --versions 1 --listen 127.0.0.1:0 \
    >"$TMP/t.log" 2>&1
for _ in $(seq 100); do grep -q 'published version' "$TMP/t.log" && break; sleep 0.05; done
check loopback_listen_advertises_loopback sh -c "curl -s '$url/v1/trainers' | grep -q '\"pull\":\"127.0.0.1:'"
timeout 30 "$WSYNC" engine --control "$url" --engine adv --local-rank 0 --local-world 1 --versions 1 \
    --timeout-ms 10000 --max-failures 1 >"$TMP/e.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -3 "$TMP/e.log" >&2
check engine_pulls_from_a_loopback_trainer [ $rc = 0 ]
