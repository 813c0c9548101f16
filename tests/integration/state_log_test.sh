#!/usr/bin/env bash
# State-file writes cost O(1) per registration (issue 25.10): 5,000 engine
# node registrations against `wsync serve --state FILE`, the bytes the
# endpoint wrote counted (/proc/<pid>/io wchar: every write() it made, the
# state file, its log and its log lines), must stay under 20x the state
# file's final size (before: the whole file rewritten per registration,
# ~2,000x); and a restart after SIGKILL (no clean stop) recovers every one.
# WSYNC_STATE_LOG_N sets the count (default 5000).
source "$(dirname "$0")/lib.sh"
N=${WSYNC_STATE_LOG_N:-5000}

port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/st/state.json" 2>"$TMP/serve.log" >/dev/null
spid=$!
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 1; }

# Registrations over one keep-alive connection: the endpoint's writes are
# what is counted, not the client's connects.
wchar() { awk '$1 == "wchar:" { print $2 }' "/proc/$spid/io"; }
w0=$(wchar)
python3 - "$port" "$N" <<'PY' || fail registrations_answered "not every registration got 200"
import http.client, json, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for i in range(n):
    body = json.dumps({"id": "node-%05d" % i, "host": "host-%d" % (i % 97), "local_ranks": 8,
                       "endpoint": {"host_id": "hid-%d" % i}})
    c.request("POST", "/v1/engines/register", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status != 200:
        sys.exit("registration %d: HTTP %d" % (i, r.status))
PY
w1=$(wchar)
written=$((w1 - w0))
metric=$(curl -s "$url/metrics" | awk '$1 == "wsync_state_bytes_written_total" { print $2 }')

# Killed, not stopped: what was answered 200 must be on disk already.
kill -9 "$spid"; wait "$spid" 2>/dev/null
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/st/state.json" 2>"$TMP/serve2.log" >/dev/null
spid=$!
wait_http "$url/healthz" 30 || { fail restart "$(tail -3 "$TMP/serve2.log")"; exit 1; }
size=$(stat -c %s "$TMP/st/state.json")
ratio=$(python3 -c "print('%.1f' % ($written / $size))")
echo "state_log: $N registrations wrote $written bytes (wchar; metric $metric) for a $size-byte state file: ${ratio}x" >&2
if python3 -c "import sys; sys.exit(0 if $written < 20 * $size else 1)"; then pass state_writes_linear_in_registrations
else fail state_writes_linear_in_registrations "$written bytes written for a $size-byte file (${ratio}x, limit 20x)"; fi

got=$(curl -s "$url/v1/status" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ids = {e["id"] for e in d["engines"]}
want = {"node-%05d" % i for i in range(int(sys.argv[1]))}
ok = ids == want and all(e["local_ranks"] == 8 and e["endpoint"]["host_id"] == "hid-%d" % int(e["id"][5:])
                         for e in d["engines"])
print("ok" if ok else "%d of %d, %d missing" % (len(ids), len(want), len(want - ids)))' "$N")
check restart_after_kill_recovers_every_registration test "$got" = ok
# The start folded the log into the state file.
check restart_folds_the_log test ! -e "$TMP/st/state.json.log"

# A log line cut short by a crash (no newline) is dropped with a warning;
# the lines before it are kept.
kill "$spid"; wait "$spid" 2>/dev/null
seq0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("log_seq", 0))' "$TMP/st/state.json")
printf '{"op":"engine","body":{"id":"late-1","host":"h","local_ranks":1},"seq":%d}\n{"op":"engine","body":{"id":"cut' \
    $((seq0 + 1)) >"$TMP/st/state.json.log"
bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$TMP/st/state.json" 2>"$TMP/serve3.log" >/dev/null
spid=$!
if wait_http "$url/healthz" 30 && curl -s "$url/v1/status" | grep -q '"id":"late-1"' &&
   grep -q 'cut short' "$TMP/serve3.log"; then pass torn_last_log_line_dropped_rest_kept
else fail torn_last_log_line_dropped_rest_kept "$(tail -3 "$TMP/serve3.log")"; fi
kill "$spid"; wait "$spid" 2>/dev/null

# A corrupt line in the middle refuses the start, naming the file and line.
printf 'garbage\n{"op":"engine","body":{"id":"x","host":"h","local_ranks":1},"seq":%d}\n' $((seq0 + 5)) \
    >"$TMP/st/state.json.log"
out=$(timeout 20 "$WSYNC" serve --listen 127.0.0.1:0 --state "$TMP/st/state.json" 2>&1); rc=$?
if [ $rc != 0 ] && grep -q 'state.json.log: line 1 is corrupt' <<<"$out"; then pass corrupt_log_line_refused
else fail corrupt_log_line_refused "rc=$rc: $out"; fi
