#!/usr/bin/env bash
# Faults on the CPU data path, each with real processes: a newer version while
# engines pull, an engine rank killed mid-pull, a trainer rank killed while
# serving, a corrupted byte, garbage on a trainer's pull port.
source "$(dirname "$0")/lib.sh"

port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" 2>"$TMP/serve.log"
wait_http "$URL/healthz" || { fail serve_started "control endpoint did not come up"; exit 1; }

# engine_field ID FIELD: a field of engine ID in /v1/status.
engine_field() {
    curl -fsS "$URL/v1/status" | python3 -c '
import json, sys
s = json.load(sys.stdin)
for e in s.get("engines", []):
    if e.get("id") == sys.argv[1]:
        print(e.get(sys.argv[2]) if e.get(sys.argv[2]) is not None else ""); break' "$1" "$2"
}
latest() { curl -fsS "$URL/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("latest_version", 0))'; }
# field_is ID FIELD VALUE: engine ID's FIELD equals VALUE now.
field_is() { [ "$(engine_field "$1" "$2")" = "$3" ]; }
# version_above ID N: engine ID holds a version above N.
version_above() { local v; v=$(engine_field "$1" version); [ -n "$v" ] && [ "$v" -gt "$2" ]; }
# error_has ID REGEX: engine ID's last error matches.
error_has() { engine_field "$1" last_error | grep -q "$2"; }
# wait_until SECONDS CMD...: until CMD succeeds.
wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 20; i++)); do "$@" && return 0; sleep 0.05; done; return 1; }

# --- 1. newer versions published while engines pull: engines take the newest,
#        every version they hold is verified (a torn version cannot pass the digests).
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 2 --synthetic 24M --chunk 1M --versions 12 --interval-ms 30 \
    >"$TMP/t0.log" 2>&1; T0=$!
bg "$WSYNC" trainer --control "$URL" --rank 1 --world 2 --synthetic 24M --chunk 1M --versions 12 --interval-ms 30 \
    >"$TMP/t1.log" 2>&1; T1=$!
for r in 0 1; do
    bg "$WSYNC" engine --control "$URL" --engine fast-$$ --local-rank $r --local-world 2 --follow --timeout-ms 20000 \
        >"$TMP/fast$r.log" 2>&1
done
ok=0
for i in $(seq 1 400); do
    l=$(latest); v=$(engine_field fast-$$ version)
    if [ "${l:-0}" -ge 12 ] && [ "$v" = "$l" ]; then ok=1; break; fi
    sleep 0.05
done
held=$(grep -c 'ready on 2 ranks' "$TMP/fast0.log")
if [ $ok = 1 ] && [ "$held" -ge 1 ] && ! grep -q 'failed verification' "$TMP"/fast*.log; then
    pass newer_version_while_pulling_engines_take_newest
else
    fail newer_version_while_pulling_engines_take_newest "latest=$(latest) engine=$(engine_field fast-$$ version) held=$held"
fi
kill $T0 $T1 2>/dev/null; wait $T0 $T1 2>/dev/null
pkill -f -- "--engine fast-$$" 2>/dev/null

# --- 2. an engine rank killed mid-pull: the node reports failed; restarted,
#        the rank catches up to the latest version.
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 8M --chunk 128K --versions 1 >"$TMP/k.log" 2>&1; TK=$!
wait_until 20 grep -q 'published version' "$TMP/k.log"
V=$(latest)
WSYNC_TEST_LAND_DELAY_MS=100 bg "$WSYNC" engine --control "$URL" --engine kill-$$ --local-rank 0 --local-world 2 --follow \
    --timeout-ms 30000 >"$TMP/kill0.log" 2>&1
WSYNC_TEST_LAND_DELAY_MS=100 bg "$WSYNC" engine --control "$URL" --engine kill-$$ --local-rank 1 --local-world 2 --follow \
    --timeout-ms 30000 >"$TMP/kill1.log" 2>&1; K1=$!
wait_until 20 field_is kill-$$ state pulling
sleep 0.5
kill -9 $K1
if wait_until 20 field_is kill-$$ state failed; then pass engine_rank_killed_node_reports_failed
else fail engine_rank_killed_node_reports_failed "state=$(engine_field kill-$$ state)"; fi
check engine_rank_killed_error_names_the_rank grep -q 'local rank 1' <(engine_field kill-$$ last_error)
bg "$WSYNC" engine --control "$URL" --engine kill-$$ --local-rank 1 --local-world 2 --follow --timeout-ms 30000 \
    >"$TMP/kill1b.log" 2>&1
# Caught up: ready at V (the version field names V while the node pulls it too).
caught_up() { field_is kill-$$ version "$V" && field_is kill-$$ state ready; }
if wait_until 40 caught_up; then
    pass engine_rank_restarted_catches_up
else
    fail engine_rank_restarted_catches_up "state=$(engine_field kill-$$ state) version=$(engine_field kill-$$ version) want $V"
fi
pkill -f -- "--engine kill-$$" 2>/dev/null
kill $TK 2>/dev/null; wait $TK 2>/dev/null

# --- 3. a trainer rank killed while serving: the pull fails within the engine's
#        timeout with a clear error, the engine keeps its version (staged), and
#        once the rank is back the next pull succeeds. A version every 2.5 s:
#        rank 1 serves each request 1.5 s late, and a trainer holds 2 versions
#        (publish slots), so the engine gets one before it pulls the next
#        (with one every 0.7 s the version it asked rank 1 for was gone by
#        then, every pull failed, and the engine held none: the wait below
#        ran out after ~2 min and "keeps its version" compared 0 with 0).
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 2 --synthetic 4M --chunk 256K --versions 1000 --interval-ms 2500 \
    >"$TMP/s0.log" 2>&1; S0=$!
WSYNC_TEST_SERVE_DELAY_MS=1500 bg "$WSYNC" trainer --control "$URL" --rank 1 --world 2 --synthetic 4M --chunk 256K \
    --versions 1000 --interval-ms 2500 >"$TMP/s1.log" 2>&1; S1=$!
bg "$WSYNC" engine --control "$URL" --engine surv-$$ --local-rank 0 --local-world 1 --follow --timeout-ms 4000 \
    >"$TMP/surv.log" 2>"$TMP/surv.err"
wait_until 30 version_above surv-$$ 0 || fail trainer_killed_engine_held_a_version_first \
    "version=$(engine_field surv-$$ version) error=$(engine_field surv-$$ last_error)"
wait_until 10 field_is surv-$$ state pulling
held_before=$(engine_field surv-$$ version)
sleep 0.3
kill -9 $S1
if wait_until 15 field_is surv-$$ state failed; then
    pass trainer_killed_pull_fails
    check trainer_killed_error_names_trainer_rank grep -q 'trainer rank 1' <(engine_field surv-$$ last_error)
    held_after=$(engine_field surv-$$ version)
    check trainer_killed_engine_keeps_previous_version [ "$held_after" = "$held_before" ]
else
    fail trainer_killed_pull_fails "state=$(engine_field surv-$$ state) error=$(engine_field surv-$$ last_error)"
fi
WSYNC_TEST_SERVE_DELAY_MS=0 bg "$WSYNC" trainer --control "$URL" --rank 1 --world 2 --synthetic 4M --chunk 256K \
    --versions 1000 --interval-ms 2500 >"$TMP/s1b.log" 2>&1; S1B=$!
# Both at once: with trainers publishing every 2.5 s the engine may already be
# pulling the next version when the first check passes.
newer_and_ready() { version_above "$1" "$2" && field_is "$1" state ready; }
if wait_until 40 newer_and_ready surv-$$ "${held_before:-0}"; then
    pass trainer_back_next_pull_succeeds
else
    fail trainer_back_next_pull_succeeds "state=$(engine_field surv-$$ state) version=$(engine_field surv-$$ version)"
fi
pkill -f -- "--engine surv-$$" 2>/dev/null
kill $S0 $S1B 2>/dev/null; wait $S0 $S1B 2>/dev/null
sleep 0.2

# --- 4. a corrupted byte is caught by the digest; the version is not ready.
WSYNC_TEST_CORRUPT_PIECE=3 bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 2M --chunk 64K \
    --versions 1 >"$TMP/c.log" 2>&1; TC=$!
wait_until 20 grep -q 'published version' "$TMP/c.log"
bg "$WSYNC" engine --control "$URL" --engine corrupt-$$ --local-rank 0 --local-world 1 --versions 1 --timeout-ms 5000 \
    >"$TMP/corrupt.log" 2>"$TMP/corrupt.err"; EC=$!
if wait_until 20 field_is corrupt-$$ state failed; then
    pass corrupted_byte_not_ready
    check corrupted_byte_error_names_piece error_has corrupt-$$ 'piece 3 .*failed verification'
else
    fail corrupted_byte_not_ready "state=$(engine_field corrupt-$$ state)"
fi
kill $EC $TC 2>/dev/null; wait $EC $TC 2>/dev/null

# --- 5. garbage on a trainer's pull port does not crash it.
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 64K --versions 1 >"$TMP/g.log" 2>&1; TG=$!
wait_until 20 grep -q 'published version' "$TMP/g.log"
pull=$(curl -fsS "$URL/v1/status" | python3 -c '
import json,sys
s=json.load(sys.stdin)
for t in s.get("trainers", []):
    ep = t.get("endpoint") or {}
    if ep.get("pull"): print(ep["pull"]); break')
host=${pull%:*}; p=${pull##*:}
python3 - "$host" "$p" <<'PY'
import os, socket, struct, sys
for payload in [os.urandom(4096), struct.pack("<I", 0xffffffff) + b"x" * 10, struct.pack("<I", 5) + b"{bad}",
                struct.pack("<I", 2) + b"{}", b""]:
    try:
        s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
        s.sendall(payload); s.settimeout(2)
        try: s.recv(100)
        except Exception: pass
        s.close()
    except Exception as e:
        print("connect failed", e)
PY
sleep 0.2
check garbage_on_pull_port_trainer_survives kill -0 $TG
bg "$WSYNC" engine --control "$URL" --engine after-garbage-$$ --local-rank 0 --local-world 1 --versions 1 --timeout-ms 10000 \
    >"$TMP/ag.log" 2>&1; EA=$!
wait $EA; rc=$?
check garbage_on_pull_port_then_pull_succeeds [ $rc = 0 ]
kill $TG 2>/dev/null
check control_endpoint_still_healthy curl -fsS -o /dev/null "$URL/healthz"
