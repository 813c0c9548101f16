#!/usr/bin/env bash
# The control endpoint under pressure, driven with curl: a cap on registered
# engine nodes (403), on connections per client address (429), /v1/status and
# /v1/trainers for token holders only (--private-status), and a state file
# that cannot be written: the endpoint keeps serving what it has.
source "$(dirname "$0")/lib.sh"

echo -n 'tok-hard' >"$TMP/token"
AUTH=(-H 'Authorization: Bearer tok-hard')
# code URL METHOD PATH [BODY] [curl args...]: the HTTP code; body in $TMP/body
code() {
    local u=$1 m=$2 p=$3 b=${4:-}; shift 4 2>/dev/null || shift $#
    if [ -n "$b" ]; then curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" --data-binary "$b" "$u$p"
    else curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" "$u$p"; fi
}
# expect NAME URL WANT PATTERN -- METHOD PATH [BODY] [curl args]
expect() {
    local n=$1 u=$2 want=$3 pat=$4; shift 5
    local got; got=$(code "$u" "$@")
    if [ "$got" = "$want" ] && { [ -z "$pat" ] || grep -q -- "$pat" "$TMP/body"; }; then pass "$n"
    else fail "$n" "HTTP $got (wanted $want), body: $(head -c 300 "$TMP/body")"; fi
}
eng() { echo "{\"id\":\"$1\",\"host\":\"h\",\"local_ranks\":1}"; }

# --- limits and private status on one endpoint
port=$(free_port); U=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port --token-file "$TMP/token" --max-engines 2 --max-client-connections 4 \
    --private-status >"$TMP/serve.log" 2>&1
wait_http "$U/healthz" || { fail hard_serve_starts "no /healthz: $(tail -3 "$TMP/serve.log")"; exit 1; }
expect max_engines_first_200 "$U" 200 '' -- POST /v1/engines/register "$(eng a)" "${AUTH[@]}"
expect max_engines_second_200 "$U" 200 '' -- POST /v1/engines/register "$(eng b)" "${AUTH[@]}"
expect max_engines_third_403 "$U" 403 'max-engines' -- POST /v1/engines/register "$(eng c)" "${AUTH[@]}"
check max_engines_403_names_limit grep -q '2 engine nodes are registered' "$TMP/body"
expect max_engines_known_node_again_200 "$U" 200 '' -- POST /v1/engines/register "$(eng a)" "${AUTH[@]}"

expect private_status_without_token_401 "$U" 401 'bearer token' -- GET /v1/status
expect private_trainers_without_token_401 "$U" 401 'bearer token' -- GET /v1/trainers
expect private_status_with_token_200 "$U" 200 '"engines"' -- GET /v1/status '' "${AUTH[@]}"
expect private_status_healthz_open "$U" 200 'ok' -- GET /healthz
expect private_status_long_poll_open "$U" 204 '' -- GET '/v1/versions/latest?after=0&timeout_ms=0'
"$WSYNC" status --control "$U" >"$TMP/st.out" 2>&1; rc=$?
check private_status_cli_without_token_fails [ $rc != 0 ]
WSYNC_TOKEN=tok-hard "$WSYNC" status --control "$U" --json >"$TMP/st.out" 2>&1; rc=$?
check private_status_cli_with_token [ $rc = 0 ]

# Six connections held open from 127.0.0.1, the limit is 4: the next request
# is refused with 429 naming the address; once they close it is served.
python3 - "$port" "$TMP/held.ready" <<'PY' &
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(6)]
for s in socks:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")   # incomplete: the server waits
open(sys.argv[2], "w").close()
time.sleep(3)
PY
HOLD=$!
for i in $(seq 1 50); do [ -e "$TMP/held.ready" ] && break; sleep 0.05; done
sleep 0.2
expect client_connections_over_limit_429 "$U" 429 'too many connections from 127.0.0.1' -- GET /healthz
check client_connections_429_names_limit grep -q 'at most 4 per client' "$TMP/body"
wait $HOLD
sleep 0.3
expect client_connections_after_close_200 "$U" 200 'ok' -- GET /healthz

"$WSYNC" serve --listen 127.0.0.1:0 --private-status >"$TMP/bad.out" 2>&1; rc=$?
check private_status_without_token_refused_at_start [ $rc = 2 ]
check private_status_without_token_says_why grep -q 'needs a token' "$TMP/bad.out"

# --- a state file that cannot be written: keeps serving
port=$(free_port); U2=http://127.0.0.1:$port
mkdir -p "$TMP/sd"
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/sd/state.json" >"$TMP/serve2.log" 2>&1; S2=$!
wait_http "$U2/healthz" || { fail state_serve_starts "no /healthz"; exit 1; }
PUB='{"rank":0,"world":1,"version":VER,"layout":{"manifest_digest":"0123456789abcdef0123456789abcdef","chunk_size":1024,"layout":"even","layout_digest":"ab12","image_size":1024,"world":1,"manifest":{"tensors":[]}},"pieces":[{"id":0,"offset":0,"len":1024,"digest":"0011223344556677"}]}'
expect state_publish_1 "$U2" 200 '"published":true' -- POST /v1/publish "${PUB/VER/1}"
rm -rf "$TMP/sd"                     # the state file's directory is gone: writes fail
expect state_unwritable_publish_still_200 "$U2" 200 '"published":true' -- POST /v1/publish "${PUB/VER/2}"
expect state_unwritable_register_still_200 "$U2" 200 '' -- POST /v1/engines/register "$(eng n)"
expect state_unwritable_report_still_200 "$U2" 200 '' -- POST /v1/engines/n/report '{"version":2,"state":"ready"}'
expect state_unwritable_status_serves "$U2" 200 '"latest_version":2' -- GET /v1/status
expect state_unwritable_record_served "$U2" 200 '"version":2' -- GET /v1/versions/2
check state_unwritable_logged grep -q 'state file' "$TMP/serve2.log"
check state_unwritable_server_alive kill -0 $S2
mkdir -p "$TMP/sd"                   # back: the next change is written
expect state_writable_again_publish "$U2" 200 '"published":true' -- POST /v1/publish "${PUB/VER/3}"
check state_writable_again_file python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["latest_version"]==3' \
    "$TMP/sd/state.json"
