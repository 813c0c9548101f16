#!/usr/bin/env bash
# `wsync calibrate` on this machine: it runs in seconds, writes a links file
# that the predictor reads back (`wsync plan --predict --links FILE`), says
# why it skipped each GPU class without a device, measures tcp to a
# `--serve` peer; `wsync plan --predict` names the choice; a bad links file
# is refused naming the key; and the table in docs/COST_MODEL.md equals what
# `wsync plan --predict --scenarios --json` prints for the H20 file.
source "$(dirname "$0")/lib.sh"

if "$WSYNC" calibrate --reps 3 --size 16M --out "$TMP/links.json" >"$TMP/cal.out" 2>&1 \
   && "$WSYNC" plan --synthetic 256M --trainers 2 --engines 3 --local-ranks 2 --links "$TMP/links.json" --predict --json >"$TMP/p.json" \
   && python3 - "$TMP/links.json" "$TMP/p.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
for c in ("host_memcpy", "digest_host", "pack_host", "tcp"):
    e = l["links"][c]
    assert e["gbps"] > 0 and e["min_gbps"] <= e["gbps"] <= e["max_gbps"] and e["reps"] == 3, (c, e)
assert l["links"]["tcp"]["alpha_us"] > 0 and l["links"]["control"]["alpha_us"] > 0
names = [x["name"] for x in p["plans"]]
assert names[0] == "direct" and "relay:1" in names and "direct+own" in names, names
assert p["chosen"] in names and p["chosen"] in ("direct",) + tuple(n for n in names if n.startswith("relay:"))
for x in p["plans"]:
    assert x["predicted_s"] > 0 and x["bottleneck"] and x["stages"], x["name"]
PY
then pass calibrate_writes_a_links_file_the_predictor_reads
else fail calibrate_writes_a_links_file_the_predictor_reads "$(tail -5 "$TMP/cal.out")"; fi

if python3 -c 'import os,sys; sys.exit(0 if os.path.exists("/dev/nvidia0") else 1)'; then
    skip calibrate_says_why_gpu_classes_are_skipped "a CUDA device is present"
else
    check calibrate_says_why_gpu_classes_are_skipped \
        grep -q '^gpu_peer *skipped: no CUDA device' "$TMP/cal.out"
fi

port=$(free_port)
bg "$WSYNC" calibrate --serve "127.0.0.1:$port" >/dev/null
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" 2>/dev/null && break; sleep 0.1; done
if "$WSYNC" calibrate --reps 3 --size 8M --peer "127.0.0.1:$port" >"$TMP/peer.json" 2>"$TMP/peer.err" \
   && grep -q "127.0.0.1:$port, one connection" "$TMP/peer.err"; then
    pass calibrate_tcp_to_a_serve_peer
else fail calibrate_tcp_to_a_serve_peer "$(cat "$TMP/peer.err")"; fi

echo '{"links": {"tcp": {"gbps": 1, "speed": 2}}}' >"$TMP/bad.json"
out=$("$WSYNC" plan --synthetic 64M --links "$TMP/bad.json" --predict 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "bad.json: links.tcp: unknown key 'speed'" <<<"$out"; then
    pass predict_refuses_a_bad_links_file
else fail predict_refuses_a_bad_links_file "rc=$rc: $out"; fi
out=$("$WSYNC" plan --synthetic 64M --predict 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- "--predict needs a links file" <<<"$out"; then pass predict_without_links_says_how
else fail predict_without_links_says_how "rc=$rc: $out"; fi
