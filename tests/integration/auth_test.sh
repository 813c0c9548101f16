#!/usr/bin/env bash
# Data-plane authentication with real processes. A deployment with a token
# (control endpoint --token-file, trainers and engines WSYNC_TOKEN): engines
# with it sync and verify; engines without it, or with another, are refused
# with what to do; a client that knows only the unauthenticated GET routes
# (the pull address, the layout digest) asks a trainer for the weights, first
# without proof, then by replaying a genuine exchange captured on the wire
# (a recording relay sits on the advertised pull address), verbatim and
# pointed at its own listener: its listener receives nothing. A raw client
# writing into an engine's tcp receive port is dropped.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
ATTACK="$WSYNC_ROOT/tests/integration/auth_attack.py"
TOKEN="tok-$$-$RANDOM"
echo "$TOKEN" >"$TMP/token"

wait_until() { local t=$1 i; shift; for ((i = 0; i < t * 20; i++)); do "$@" && return 0; sleep 0.05; done; return 1; }
# engine_field URL ID FIELD: a field of engine ID in URL's /v1/status.
engine_field() {
    curl -fsS "$1/v1/status" | "$PY" -c '
import json, sys
for e in json.load(sys.stdin).get("engines", []):
    if e.get("id") == sys.argv[1]:
        v = e.get(sys.argv[2]); print("" if v is None else v); break' "$2" "$3"
}
field_is() { [ "$(engine_field "$1" "$2" "$3")" = "$4" ]; }
# jget JSON PATH...: a field of a JSON line ("a.b" style, one key per argument).
jget() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[k]
print(v)' "$@"; }

# --- deployment A: everything holds the token -----------------------------
port=$(free_port)
URL="http://127.0.0.1:$port"
bg "$WSYNC" serve --listen "127.0.0.1:$port" --token-file "$TMP/token" 2>"$TMP/serve.log"
wait_http "$URL/healthz" || { fail serve_started "control endpoint did not come up"; exit 1; }
P=$(free_port)
# The trainer listens on 127.0.0.2 and advertises 127.0.0.3, where the relay
# records what crosses it, as anyone on the path could.
bg "$PY" "$ATTACK" relay "127.0.0.3:$P" "127.0.0.2:$P" "$TMP/cap"
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 8M --chunk 1M --versions 1 \
    --listen "127.0.0.2:$P" --advertise 127.0.0.3 --token-file "$TMP/token" >"$TMP/trainer.log" 2>&1
TR=$!
wait_until 30 grep -q 'published version 1' "$TMP/trainer.log" || { fail trainer_published "$(tail -3 "$TMP/trainer.log")"; exit 1; }

# (a) engines with the token sync and verify (2 local ranks: the node board
#     handshake too), through the relay; one takes it from the file, one from
#     the environment.
bg "$WSYNC" engine --control "$URL" --engine good-$$ --local-rank 1 --local-world 2 --versions 1 \
    --bind 127.0.0.1 --timeout-ms 20000 --token-file "$TMP/token" >"$TMP/good1.log" 2>&1
G1=$!
WSYNC_TOKEN=$TOKEN timeout 60 "$WSYNC" engine --control "$URL" --engine good-$$ --local-rank 0 --local-world 2 \
    --versions 1 --bind 127.0.0.1 --timeout-ms 20000 >"$TMP/good0.log" 2>&1
rc0=$?
wait $G1
rc1=$?
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && field_is "$URL" good-$$ version 1; then
    pass token_engines_sync_and_verify
else
    fail token_engines_sync_and_verify "rc $rc0/$rc1: $(tail -2 "$TMP"/good*.log)"
fi
check captured_pull_requests_went_through_the_relay [ -n "$(ls "$TMP"/cap/*.c2s 2>/dev/null)" ]

# An engine with another token does not get past the control endpoint.
WSYNC_TOKEN=wrong-$TOKEN timeout 30 "$WSYNC" engine --control "$URL" --engine wrongctl-$$ --local-rank 0 --local-world 1 \
    --versions 1 --max-failures 1 --timeout-ms 5000 >"$TMP/wrongctl.log" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q 'bearer token' "$TMP/wrongctl.log"; then pass wrong_token_refused_by_control_endpoint
else fail wrong_token_refused_by_control_endpoint "rc=$rc: $(tail -2 "$TMP/wrongctl.log")"; fi

# A victim engine, holding version 1, with a known receive port.
Q=$(free_port)
WSYNC_TOKEN=$TOKEN WSYNC_TCP_PORT=$Q bg "$WSYNC" engine --control "$URL" --engine victim-$$ --local-rank 0 \
    --local-world 1 --follow --bind 127.0.0.1 --timeout-ms 20000 >"$TMP/victim.log" 2>&1
V=$!
wait_until 30 field_is "$URL" victim-$$ version 1 || fail victim_ready "$(tail -2 "$TMP/victim.log")"
digest=$(curl -fsS "$URL/v1/versions/1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["layout_digest"])')

# (c) a client without the token asks the trainer for the weights.
for mode in old noproof replay retarget; do
    out=$("$PY" "$ATTACK" pull $mode "127.0.0.2:$P" "$digest" "$TMP/cap" 2>&1)
    conns=$(jget "$out" sink_conns 2>/dev/null); bytes=$(jget "$out" sink_bytes 2>/dev/null)
    status=$(jget "$out" status 2>/dev/null); why=$(jget "$out" why 2>/dev/null)
    case $mode in
    old) want_status=-4 want_why='' ;;   # garbage: the reason may be lost to the reset
    noproof) want_status=-16 want_why='no proof: the engine has no token but the trainer requires one' ;;
    *) want_status=-16 want_why='proof does not match' ;;
    esac
    if [ "$conns" = 0 ] && [ "$bytes" = 0 ] && [ "$status" = "$want_status" ] && [[ "$why" == *"$want_why"* ]]; then
        pass "pull_without_token_${mode}_gets_zero_bytes"
    else
        fail "pull_without_token_${mode}_gets_zero_bytes" "$out"
    fi
done
check trainer_says_whom_it_refused grep -q 'trainer rank 0: pull request from 127.0.0.1:[0-9]* refused: proof does not match' \
    "$TMP/trainer.log"
check trainer_survives_the_attempts kill -0 $TR

# (d) a raw client writes into the victim's tcp receive port (nonce and
#     region taken from its captured pull request).
out=$("$PY" "$ATTACK" put "$Q" "$TMP/cap" 2>&1)
if [ "$(jget "$out" old closed 2>/dev/null)" = True ] && [ "$(jget "$out" noproof status 2>/dev/null)" = -16 ] &&
    [ "$(jget "$out" noproof closed 2>/dev/null)" = True ] &&
    [[ "$(jget "$out" noproof why 2>/dev/null)" == *"no proof: the trainer has no token"* ]]; then
    pass put_without_token_is_dropped
else
    fail put_without_token_is_dropped "$out"
fi
check engine_says_whom_it_refused grep -q 'tcp: tcp connection from 127.0.0.1:[0-9]* refused: no proof' "$TMP/victim.log"
if kill -0 $V 2>/dev/null && field_is "$URL" victim-$$ state ready && field_is "$URL" victim-$$ version 1; then
    pass victim_engine_keeps_its_version
else
    fail victim_engine_keeps_its_version "state=$(engine_field "$URL" victim-$$ state)"
fi
kill $V $TR 2>/dev/null
wait $V $TR 2>/dev/null

# --- deployment B: the trainer holds a token, engines do not or hold another
#     (the control endpoint is open here, so the refusal is the data plane's).
port2=$(free_port)
URL2="http://127.0.0.1:$port2"
bg "$WSYNC" serve --listen "127.0.0.1:$port2" 2>"$TMP/serve2.log"
wait_http "$URL2/healthz" || { fail serve2_started "control endpoint did not come up"; exit 1; }
WSYNC_TOKEN=$TOKEN bg "$WSYNC" trainer --control "$URL2" --rank 0 --world 1 --synthetic 4M --chunk 1M --versions 1 \
    >"$TMP/trainer2.log" 2>&1
wait_until 30 grep -q 'published version 1' "$TMP/trainer2.log" || fail trainer2_published "$(tail -3 "$TMP/trainer2.log")"
for who in none wrong; do
    tok=""; [ $who = wrong ] && tok="other-$TOKEN"
    WSYNC_TOKEN=$tok timeout 60 "$WSYNC" engine --control "$URL2" --engine $who-$$ --local-rank 0 --local-world 1 \
        --versions 1 --max-failures 1 --timeout-ms 5000 >"$TMP/$who.log" 2>&1
    rc=$?
    if [ $who = none ]; then
        want="pull request refused: no proof: the engine has no token but the trainer requires one; set the same --token-file / WSYNC_TOKEN on both"
    else
        want="pull request refused: proof does not match: the engine's token differs from the trainer's"
    fi
    if [ $rc != 0 ] && grep -qF "$want" "$TMP/$who.log"; then pass "engine_with_${who}_token_refused_with_the_message"
    else fail "engine_with_${who}_token_refused_with_the_message" "rc=$rc: $(tail -2 "$TMP/$who.log")"; fi
done
WSYNC_TOKEN=$TOKEN timeout 60 "$WSYNC" engine --control "$URL2" --engine right-$$ --local-rank 0 --local-world 1 \
    --versions 1 --timeout-ms 20000 >"$TMP/right.log" 2>&1
check engine_with_the_token_then_syncs [ $? = 0 ]
