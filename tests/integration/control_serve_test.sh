#!/usr/bin/env bash
# control_serve_test.sh: `wsync serve` driven with curl as an operator would:
# every route, error bodies, auth, body cap, garbage on the socket (the server
# must keep answering /healthz), restart with --state, a corrupt state file
# refused, and `wsync status` (table and --json).
. "$(dirname "$0")/lib.sh"

port=$(free_port)
U=http://127.0.0.1:$port
echo -n 'tok-123' >"$TMP/token"
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/state.json" --token-file "$TMP/token" 2>"$TMP/serve.log"
SERVE=$!
wait_http "$U/healthz" || { fail serve_starts "no /healthz on $U"; cat "$TMP/serve.log" >&2; exit 1; }
pass serve_starts

AUTH=(-H 'Authorization: Bearer tok-123')
# code METHOD PATH [BODY] [curl args...]: prints the HTTP code, body in $TMP/body
code() {
    local m=$1 p=$2 b=${3:-}; shift 3 2>/dev/null || shift $#
    if [ -n "$b" ]; then
        curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" --data-binary "$b" "$U$p"
    else
        curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$@" "$U$p"
    fi
}
# expect NAME WANT_CODE [grep-pattern-in-body] -- METHOD PATH [BODY] [curl args]
expect() {
    local n=$1 want=$2 pat=$3; shift 4
    local got; got=$(code "$@")
    if [ "$got" = "$want" ] && { [ -z "$pat" ] || grep -q -- "$pat" "$TMP/body"; }; then pass "$n"
    else fail "$n" "HTTP $got (wanted $want), body: $(head -c 300 "$TMP/body")"; fi
}

ENG='{"id":"node-1","host":"10.1.0.5","local_ranks":8,"endpoint":{"transport":"tcp","addr":"10.1.0.5:42000"}}'
TR='{"rank":0,"world":1,"host":"10.0.0.1","endpoint":{"transport":"tcp","pull":"10.0.0.1:41000"}}'
PUB='{"rank":0,"world":1,"version":VER,"layout":{"manifest_digest":"0123456789abcdef0123456789abcdef","chunk_size":1024,"layout":"even","layout_digest":"ab12","image_size":2048,"world":1,"manifest":{"tensors":[]}},"pieces":[{"id":0,"offset":0,"len":1024,"digest":"0011223344556677"},{"id":1,"offset":1024,"len":1024,"digest":"8899aabbccddeeff"}]}'
pub() { echo "${PUB/VER/$1}"; }

expect healthz 200 ok -- GET /healthz
expect status_json 200 '"latest_version":0' -- GET /v1/status
expect metrics 200 'wsync_latest_version 0' -- GET /metrics
ctype=$(curl -s -o /dev/null -w '%{content_type}' "$U/metrics")
check metrics_content_type test "$ctype" = 'text/plain; version=0.0.4'
expect unknown_route_404 404 '"code":404' -- GET /v1/nothing
expect wrong_method_405 405 '"code":405' -- PUT /v1/status
expect no_token_401 401 'bearer token' -- POST /v1/engines/register "$ENG"
expect wrong_token_401 401 'bearer token' -- POST /v1/engines/register "$ENG" -H 'Authorization: Bearer tok-124'
expect publish_no_token_401 401 '"code":401' -- POST /v1/publish "$(pub 1)"
expect register_engine 200 '' -- POST /v1/engines/register "$ENG" "${AUTH[@]}"
expect register_trainer 200 '' -- POST /v1/trainers/register "$TR" "${AUTH[@]}"
expect trainers_lookup 200 '"pull":"10.0.0.1:41000"' -- GET /v1/trainers
expect malformed_400 400 '"code":400' -- POST /v1/engines/register '{"id":' "${AUTH[@]}"
expect wrong_type_422 422 "field 'local_ranks'" -- POST /v1/engines/register '{"id":"x","host":"h","local_ranks":"8"}' "${AUTH[@]}"
expect missing_field_422 422 "field 'host' is required" -- POST /v1/engines/register '{"id":"x","local_ranks":8}' "${AUTH[@]}"
big=$(head -c 70000 /dev/zero | tr '\0' x)
expect body_cap_413 413 '"code":413' -- POST /v1/engines/register "{\"id\":\"x\",\"host\":\"$big\",\"local_ranks\":1}" "${AUTH[@]}"
expect ready_unpublished_409 409 'never published' -- POST /v1/engines/node-1/report '{"version":1,"state":"ready"}' "${AUTH[@]}"
expect long_poll_timeout_204 204 '' -- GET '/v1/versions/latest?after=0&timeout_ms=200'

# A long poll waiting in the background is answered by the publish.
curl -s -o "$TMP/poll" -w '%{http_code}' "$U/v1/versions/latest?after=0&timeout_ms=20000" >"$TMP/poll.code" &
pollpid=$!
sleep 0.3
expect publish_v3 200 '"published":true' -- POST /v1/publish "$(pub 3)" "${AUTH[@]}"
wait $pollpid
check long_poll_answered grep -q '"version":3' "$TMP/poll"
expect publish_same_again_200 200 '"duplicate":true' -- POST /v1/publish "$(pub 3)" "${AUTH[@]}"
expect publish_equal_other_content_409 409 'other content' -- POST /v1/publish "$(pub 3 | sed 's/0011223344556677/0011223344556678/')" "${AUTH[@]}"
expect publish_lower_409 409 'not newer' -- POST /v1/publish "$(pub 2)" "${AUTH[@]}"
expect version_record 200 '"pieces":\[{"id":0' -- GET /v1/versions/3
expect version_unknown_404 404 'version 2' -- GET /v1/versions/2
expect report_pulling 200 '' -- POST /v1/engines/node-1/report '{"version":3,"state":"pulling"}' "${AUTH[@]}"
expect report_ready 200 '' -- POST /v1/engines/node-1/report '{"version":3,"state":"ready","duration_s":0.8,"bytes":2000000000}' "${AUTH[@]}"
expect status_engine_ready 200 '"state":"ready"' -- GET /v1/status
# A report is not written on the HTTP thread but by the timer within a second:
# in the state file, or appended to its log (PATH.log, docs/API.md).
engine_version_in_state() {
    python3 - "$TMP/state.json" 2>/dev/null <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
held = {e["id"]: e["version"] for e in d["engines"]}
if os.path.exists(sys.argv[1] + ".log"):
    for line in open(sys.argv[1] + ".log"):
        e = json.loads(line)
        if e["op"] == "held" and e["seq"] > d.get("log_seq", 0):
            held[e["id"]] = e["version"]
assert held.get("node-1") == 3
PY
}
report_saved=0
for _ in $(seq 30); do engine_version_in_state && { report_saved=1; break; }; sleep 0.1; done
check report_reaches_state_file_within_3s test "$report_saved" = 1
expect metrics_engine 200 'wsync_engine_version{engine="node-1"} 3' -- GET /metrics
check metrics_requests grep -q 'wsync_http_requests_total{route="/v1/publish",code="409"} 2' "$TMP/body"

# `wsync status`: the table a person reads, and the raw JSON.
"$WSYNC" status --control "$U" >"$TMP/table" 2>&1
check status_table grep -qE '^node-1 +ready +3 +0 +8 +0\.800s +2\.50' "$TMP/table"
"$WSYNC" status --control "$U" --json >"$TMP/sj" 2>&1
check status_json_flag python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["engines"][0]["id"]=="node-1"' "$TMP/sj"
# gzip for a client that takes it (once the document stood still for two
# requests): Python's gzip module, not wsync's code, decodes it, and the JSON
# equals the plain answer's; a client that refuses gzip (q=0) or says nothing
# gets plain JSON.
curl -s -o "$TMP/plain.json" "$U/v1/status"
curl -s -D "$TMP/gz.h" -H 'Accept-Encoding: gzip' -o "$TMP/status.gz" "$U/v1/status"
check status_gzip_header grep -qi '^content-encoding: gzip' "$TMP/gz.h"
check status_gzip_same_json python3 -c 'import gzip,json,sys
a=json.load(open(sys.argv[1])); b=json.loads(gzip.decompress(open(sys.argv[2],"rb").read()))
assert a == b, (a, b)' "$TMP/plain.json" "$TMP/status.gz"
curl -s -D "$TMP/q0.h" -H 'Accept-Encoding: gzip;q=0, identity' -o "$TMP/q0.json" "$U/v1/status"
check status_gzip_q0_plain sh -c "! grep -qi '^content-encoding' '$TMP/q0.h' && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '$TMP/q0.json'"
"$WSYNC" status --control http://127.0.0.1:1 >"$TMP/st_err" 2>&1
rc=$?
check status_unreachable_fails test "$rc" = 1 -a -n "$(grep 127.0.0.1:1 "$TMP/st_err")"

# Garbage on the socket: none of it may take the server down.
python3 - "$port" <<'EOF'
import os, socket, sys
port = int(sys.argv[1])
junk = [b"\x00\xff" * 5000, b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 100000 + b"\r\n\r\n",
        b"POST /v1/publish HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{",
        b"POST /v1/engines/register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET /v1/versions/latest?after=0&timeout_ms=99999999999999999999 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\r\n\r\n\r\n", b"GET /%00%ff/../.. HTTP/1.1\r\nHost: x\r\n\r\n"]
for i in range(200):
    junk.append(os.urandom(64 + i * 7))
# All at once, then close: an incomplete request line is held until the idle
# timeout, so waiting for an answer to each would only measure that timeout.
socks = []
for j in junk:
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    try:
        s.sendall(j)
    except OSError:
        pass
    socks.append(s)
for s in socks:
    s.close()
EOF
check garbage_server_alive curl -fsS -o /dev/null --max-time 5 "$U/healthz"
check garbage_server_pid_alive kill -0 "$SERVE"

# Restart from the state file: the version counter continues.
kill "$SERVE"; wait "$SERVE" 2>/dev/null
check state_file_written python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["latest_version"]==3' "$TMP/state.json"
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/state.json" --token-file "$TMP/token" 2>>"$TMP/serve.log"
SERVE=$!
wait_http "$U/healthz" || fail restart "no /healthz after restart"
expect restart_latest 200 '"version":3' -- GET '/v1/versions/latest?after=0&timeout_ms=0'
expect restart_engine_kept 200 '"id":"node-1"' -- GET /v1/status
expect restart_same_publish_200 200 '"duplicate":true' -- POST /v1/publish "$(pub 3)" "${AUTH[@]}"
expect restart_refuses_old 409 'not newer' -- POST /v1/publish "$(pub 2)" "${AUTH[@]}"
expect restart_publish_next 200 '"published":true' -- POST /v1/publish "$(pub 4)" "${AUTH[@]}"
check logs_state_changes grep -q 'version 4 published' "$TMP/serve.log"
kill "$SERVE"; wait "$SERVE" 2>/dev/null

# A corrupt state file stops the server with a message naming it.
head -c 40 "$TMP/state.json" >"$TMP/bad.json"
"$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/bad.json" >"$TMP/bad.out" 2>&1
rc=$?
check corrupt_state_refused test "$rc" != 0
check corrupt_state_message grep -q "state file $TMP/bad.json is unreadable or corrupt" "$TMP/bad.out"
