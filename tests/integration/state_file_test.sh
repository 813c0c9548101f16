#!/usr/bin/env bash
# `wsync serve --state FILE` never loses the state silently: a missing
# directory is created, an unwritable one refuses the start, and a write
# that fails later (read-only file system or directory, full file system)
# shows in /healthz (503), /v1/status ("state_file") and /metrics, is logged
# once per change of condition, and clears when writes work again.
source "$(dirname "$0")/lib.sh"
MOUNTS=()
umount_all() { local m; for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done; MOUNTS=(); }
trap 'umount_all; cleanup' EXIT
root=0; [ "$(id -u)" = 0 ] && root=1

# small_mount DIR SIZE: a tmpfs of SIZE at DIR (root), 0 on success.
small_mount() { mkdir -p "$1" && mount -t tmpfs -o size="$2" wsync-test "$1" 2>/dev/null && MOUNTS+=("$1"); }

# serve_on STATE LOG: starts serve, sets $url and $spid; 1 if it did not come up.
serve_on() {
    local port; port=$(free_port); url=http://127.0.0.1:$port
    bg "$WSYNC" serve --listen 127.0.0.1:$port --state "$1" 2>"$2" >/dev/null
    spid=$!
    wait_http "$url/metrics" 10
}
code() { curl -s -o /dev/null -w '%{http_code}' "$url/healthz"; }
register() { curl -s -o /dev/null -X POST "$url/v1/engines/register" -d "{\"id\":\"$1\",\"host\":\"h\",\"local_ranks\":1}"; }
status_field() { curl -s "$url/v1/status" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['state_file']['$1'])"; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# 1. A missing directory (two levels) is created.
serve_on "$TMP/new/sub/state.json" "$TMP/s1.log"
check missing_directory_is_created test -s "$TMP/new/sub/state.json"
check healthz_ok_while_writes_work test "$(code)" = 200
check status_state_file_ok test "$(status_field ok)" = True
kill "$spid"; wait "$spid" 2>/dev/null

# 2. A path through a regular file: refused at start, saying why.
touch "$TMP/plain"
out=$("$WSYNC" serve --listen 127.0.0.1:0 --state "$TMP/plain/state.json" 2>&1); rc=$?
if [ $rc != 0 ] && grep -q "$TMP/plain is not a directory" <<<"$out"; then pass state_dir_through_a_file_refused
else fail state_dir_through_a_file_refused "rc=$rc: $out"; fi

# make_readonly DIR / make_writable DIR: a read-only mount as root (root
# ignores permission bits), the directory's mode otherwise.
make_readonly() { if [ $root = 1 ]; then mount -o remount,ro "$1"; else chmod 0555 "$1"; fi; }
make_writable() { if [ $root = 1 ]; then mount -o remount,rw "$1"; else chmod 0755 "$1"; fi; }
ro_ok=1
if [ $root = 1 ]; then small_mount "$TMP/ro" 1m || ro_ok=0; else mkdir -p "$TMP/ro"; fi
if [ $ro_ok = 0 ]; then
    for n in unwritable_dir_refused_at_start read_only_later_shows_in_healthz_status_metrics \
             read_only_logged_once_per_change writes_work_again_clears_it; do
        skip $n "cannot mount a tmpfs here"; done
else
    # 3. Unwritable at start: refused, saying why.
    make_readonly "$TMP/ro"
    out=$("$WSYNC" serve --listen 127.0.0.1:0 --state "$TMP/ro/state.json" 2>&1); rc=$?
    if [ $rc != 0 ] && grep -q "refusing to start" <<<"$out" && grep -qi "read-only\|permission" <<<"$out"; then
        pass unwritable_dir_refused_at_start
    else fail unwritable_dir_refused_at_start "rc=$rc: $out"; fi
    make_writable "$TMP/ro"

    # 4. Read-only later: every mutation fails to write; said once.
    serve_on "$TMP/ro/state.json" "$TMP/s4.log"
    make_readonly "$TMP/ro"
    for i in 1 2 3 4 5 6; do register "n$i"; sleep 0.3; done
    c=$(code); okf=$(status_field ok); fw=$(status_field failed_writes); m=$(metric wsync_state_write_failures_total)
    g=$(metric wsync_state_file_ok)
    if [ "$c" = 503 ] && [ "$okf" = False ] && [ "$fw" -ge 6 ] && [ "${m:-0}" -ge 6 ] && [ "$g" = 0 ] &&
       curl -s "$url/healthz" | grep -q "degraded: state file"; then
        pass read_only_later_shows_in_healthz_status_metrics
    else fail read_only_later_shows_in_healthz_status_metrics "healthz $c ok=$okf failed_writes=$fw metric=$m gauge=$g"; fi
    n=$(grep -c 'ERROR.*state file' "$TMP/s4.log")
    check read_only_logged_once_per_change test "$n" = 1
    make_writable "$TMP/ro"
    register n7
    for _ in $(seq 30); do [ "$(code)" = 200 ] && break; sleep 0.1; done
    if [ "$(code)" = 200 ] && grep -q 'written again, after' "$TMP/s4.log" &&
       /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "n7" in [e["id"] for e in d["engines"]]' \
           "$TMP/ro/state.json"; then
        pass writes_work_again_clears_it
    else fail writes_work_again_clears_it "healthz $(code): $(tail -2 "$TMP/s4.log")"; fi
    kill "$spid"; wait "$spid" 2>/dev/null
fi

# 5. A full file system (root: a 16 KiB tmpfs filled by registrations).
if [ $root != 1 ]; then skip full_filesystem_shows_and_logs_once "needs root (mounts a small tmpfs)"
elif ! small_mount "$TMP/full" 16k; then skip full_filesystem_shows_and_logs_once "cannot mount a tmpfs here"
else
    serve_on "$TMP/full/state.json" "$TMP/s5.log"
    long=$(printf "x%.0s" $(seq 100))
    for i in $(seq 150); do register "e$i-$long"; [ "$(code)" = 503 ] && break; done
    c=$(code); n=$(grep -c 'ERROR.*state file' "$TMP/s5.log")
    if [ "$c" = 503 ] && [ "$n" = 1 ] && grep -q 'No space left on device' "$TMP/s5.log" &&
       [ "$(status_field ok)" = False ]; then
        pass full_filesystem_shows_and_logs_once
    else fail full_filesystem_shows_and_logs_once "healthz $c, $n error lines: $(tail -2 "$TMP/s5.log")"; fi
    kill "$spid"; wait "$spid" 2>/dev/null
fi

# 6. A state file whose latest_version is 2^53 or more (the publish route
#    refuses such a version): refused at load, naming the file and the
#    field; the registrations and the other versions are kept.
big=9007199254740993 # 2^53 + 1
# A state file as the endpoint writes it: versions 1..7 from a real trainer
# rank, then (with Python, not wsync) latest_version and a copy of record 7
# set to 2^53 + 1, and two engines, one of them at that version.
serve_on "$TMP/real.json" "$TMP/s6a.log"
"$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 7 >"$TMP/t6.log" 2>&1 &
tpid=$!
for i in $(seq 200); do [ "$(curl -s "$url/v1/status" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latest_version"])' 2>/dev/null)" = 7 ] && break; sleep 0.1; done
kill "$tpid" "$spid" 2>/dev/null; wait "$tpid" "$spid" 2>/dev/null
/usr/bin/python3 - "$TMP/real.json" "$TMP/big.json" "$big" <<'PY'
import copy, json, sys
s = json.load(open(sys.argv[1]))
big = int(sys.argv[3])
seven = [r for r in s["versions"] if r["version"] == 7][0]
s["versions"] = [dict(copy.deepcopy(seven), version=big), seven]
s["latest_version"] = big
s["engines"] = [{"id": "kept-node", "host": "h", "local_ranks": 1, "version": 3},
                {"id": "big-node", "host": "h", "local_ranks": 1, "version": big}]
json.dump(s, open(sys.argv[2], "w"))
PY
for f in "$TMP"/real.json.layout-*; do cp "$f" "$TMP/big.json${f#"$TMP"/real.json}"; done # the layouts it names
serve_on "$TMP/big.json" "$TMP/s6.log"
# Independent of wsync: what the endpoint reports, read with Python's json.
got=$(curl -s "$url/v1/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
e = {x["id"]: x.get("version") for x in s["engines"]}
print(s["latest_version"], e.get("kept-node"), e.get("big-node"))')
check big_latest_version_refused_at_load test "$got" = "7 3 0"
check big_latest_version_error_names_file_and_field \
    grep -q "state file $TMP/big.json: latest_version $big is 2^53 or more" "$TMP/s6.log"
check big_version_record_error_names_field grep -q "versions\[0\].version $big" "$TMP/s6.log"
kill "$spid"; wait "$spid" 2>/dev/null
