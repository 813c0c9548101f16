#!/usr/bin/env bash
# Connections that never prove anything hold little and keep no one out
# (issue 25 item 9):
#
# --- 1. 400 silent connections on a trainer's pull port (from the address a
#        real engine uses too) while that engine pulls: the pull succeeds, the
#        trainer's threads stay bounded (at most 16 handshakes pending per
#        address), and its warnings come 5 lines per 10 s, then one with a count (it
#        was a thread and a line per connection: 408 threads, 410 lines).
# --- 2. Another uid (nobody) keeps connections open on a node's board
#        socket while local rank 1 restarts: the rank gets in at once and the
#        node pulls again (rank 0 admitted one process at a time, 2 s each),
#        without a token (turned away) and with one (a few may try to prove it).
source "$(dirname "$0")/lib.sh"

port=$(free_port); URL=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$URL/healthz" || { fail preauth_control_up "$(tail -2 "$TMP/serve.log")"; exit 1; }

# A holder of silent connections: N connections to ADDR (on a Unix socket
# re-opened when the server closes them); prints "open K" once they are made.
cat >"$TMP/hold.py" <<'PY'
import socket, sys, time
kind, addr, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def conn():
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + addr)
    else:
        h, p = addr.rsplit(":", 1)
        s = socket.create_connection((h, int(p)))
    s.setblocking(False)
    return s
socks, opened = [], 0
for _ in range(n):
    try:
        socks.append(conn()); opened += 1
    except OSError:
        pass
print("open", opened, flush=True)
while kind == "tcp":
    time.sleep(1)
while True:  # keep n open: replace the ones the server closed
    time.sleep(0.05)
    for i, s in enumerate(socks):
        try:
            if s.recv(4096) == b"":
                raise OSError
        except BlockingIOError:
            continue
        except OSError:
            s.close()
            try:
                socks[i] = conn()
            except OSError:
                pass
PY

# --- 1 ------------------------------------------------------------------
pp=$(free_port)
bg "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 1 \
    --listen 127.0.0.1:$pp --advertise 127.0.0.1 >"$TMP/t.log" 2>&1; T=$!
for i in $(seq 1 200); do grep -q 'published version' "$TMP/t.log" && break; sleep 0.05; done
base=$(ls /proc/$T/task | wc -l)
bg python3 "$TMP/hold.py" tcp 127.0.0.1:$pp 400 >"$TMP/hold.log" 2>&1; H=$!
for i in $(seq 1 200); do grep -q '^open' "$TMP/hold.log" && break; sleep 0.05; done
sleep 1
threads=$(ls /proc/$T/task | wc -l)
echo "pull port: $(cat "$TMP/hold.log"), trainer threads $base before, $threads with them" >&2
if [ "$threads" -le $((base + 16 + 4)) ]; then pass preauth_pull_port_threads_bounded
else fail preauth_pull_port_threads_bounded "$threads threads with 400 silent connections ($base before)"; fi
t0=$(date +%s.%N)
if timeout 60 "$WSYNC" engine --control "$URL" --engine pa$$ --local-rank 0 --local-world 1 --versions 1 \
    --timeout-ms 30000 >"$TMP/e.log" 2>&1; then
    pass preauth_pull_succeeds_under_silent_flood
    echo "engine pulled in $(echo "$(date +%s.%N) - $t0" | bc) s under the flood" >&2
else
    fail preauth_pull_succeeds_under_silent_flood "$(tail -3 "$TMP/e.log")"
fi
# The silent ones time out (connect_timeout_ms, 10 s) or give way: their
# warnings must not be a line each: the flood spans two 10 s windows, so at
# most 2 x 5 lines.
sleep 11
lines=$(grep -c 'WARN.*trainer rank 0:' "$TMP/t.log")
echo "trainer warning lines after the flood: $lines" >&2
grep 'WARN.*trainer rank 0:' "$TMP/t.log" | head -3 >&2
if [ "$lines" -le 10 ]; then pass preauth_pull_port_log_rate_limited
else fail preauth_pull_port_log_rate_limited "$lines warning lines for 400 silent connections"; fi
check preauth_pull_port_log_says_count grep -q 'more connections refused or failed before their proof' "$TMP/t.log"
kill $H $T 2>/dev/null; wait $H $T 2>/dev/null

# --- 2 ------------------------------------------------------------------
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
    skip preauth_board_strangers_rank_rejoins "needs root to run a process as another user (setpriv)"
    exit 0
fi
chmod 755 "$TMP"; chmod 644 "$TMP/hold.py"
# board_strangers TAG URL [--token-file F]: a node of 2 ranks pulling from a
# trainer; uid nobody holds 50 connections on its board socket (re-opened as
# fast as they are closed); local rank 1 is killed and restarted: the node
# must pull a newer version within 15 s.
board_strangers() {
    local tag=$1 url=$2 i ok before took name R1 T2 H
    shift 2
    bg "$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 100000 \
        --interval-ms 500 "$@" >"$TMP/t-$tag.log" 2>&1; T2=$!
    local ENGINE=(engine --control "$url" --engine $tag$$ --local-world 2 --follow --timeout-ms 5000 "$@")
    bg "$WSYNC" "${ENGINE[@]}" --local-rank 0 >"$TMP/$tag-0.log" 2>&1
    bg "$WSYNC" "${ENGINE[@]}" --local-rank 1 >"$TMP/$tag-1.log" 2>&1; R1=$!
    node_at() {
        curl -fsS "$url/v1/status" 2>/dev/null | python3 -c "
import json, sys
e = next((e for e in json.load(sys.stdin)['engines'] if e['id'] == '$tag$$'), {})
print(e.get('version', 0), e.get('state', ''))" 2>/dev/null
    }
    for i in $(seq 1 300); do set -- $(node_at); [ "${1:-0}" -gt 0 ] && break; sleep 0.1; done
    name=$(grep -o "@wsync/[^ ]*/$tag$$\$" /proc/net/unix | head -1)
    [ -n "$name" ] || { fail preauth_board_${tag}_socket_found "no @wsync/.../$tag$$ in /proc/net/unix"; return; }
    bg setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$TMP/hold.py" unix "${name#@}" 50 \
        >"$TMP/hold-$tag.log" 2>&1; H=$!
    for i in $(seq 1 200); do grep -q '^open' "$TMP/hold-$tag.log" && break; sleep 0.05; done
    check preauth_board_${tag}_strangers_connected grep -q '^open [1-9]' "$TMP/hold-$tag.log"
    sleep 1
    kill -9 $R1; wait $R1 2>/dev/null
    set -- $(node_at); before=${1:-0}
    t0=$(date +%s.%N)
    bg "$WSYNC" "${ENGINE[@]}" --local-rank 1 >"$TMP/$tag-1b.log" 2>&1; R1=$!
    ok=0
    for i in $(seq 1 150); do
        set -- $(node_at)
        if [ "${1:-0}" -gt "$before" ] && [ "${2:-}" = ready ]; then ok=1; break; fi
        sleep 0.1
    done
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "board ($tag): $(cat "$TMP/hold-$tag.log") from uid nobody; node ready at a newer version" \
        "${ok/0/never} after ${took} s" >&2
    if [ $ok = 1 ]; then pass preauth_board_${tag}_strangers_rank_rejoins
    else fail preauth_board_${tag}_strangers_rank_rejoins "node at $(node_at) (was $before) ${took} s after rank 1 restarted; rank 1: $(tail -2 "$TMP/$tag-1b.log")"; fi
    check preauth_board_${tag}_rank1_runs kill -0 $R1
    lines=$(grep -c 'node board' "$TMP/$tag-0.log")
    echo "rank 0's node board lines ($tag): $lines" >&2; grep 'node board' "$TMP/$tag-0.log" | head -2 >&2
    if [ "$lines" -le 10 ]; then pass preauth_board_${tag}_log_rate_limited
    else fail preauth_board_${tag}_log_rate_limited "$lines lines on rank 0 for strangers"; fi
    pkill -f -- "--engine $tag$$" 2>/dev/null
    kill $H $T2 2>/dev/null; wait $H $T2 2>/dev/null
}

# Without a token another uid is turned away before any byte.
board_strangers pb "$URL"
# With one it may try to prove it, a few at a time, never ahead of a rank.
TOKEN="tok-$$-$RANDOM"; echo "$TOKEN" >"$TMP/token"
port=$(free_port); URL2=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port --token-file "$TMP/token" >"$TMP/serve2.log" 2>&1
wait_http "$URL2/healthz" || { fail preauth_token_control_up "$(tail -2 "$TMP/serve2.log")"; exit 1; }
board_strangers pt "$URL2" --token-file "$TMP/token"
