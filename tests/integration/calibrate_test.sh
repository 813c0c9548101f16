#!/usr/bin/env bash
# `wsync calibrate` on this machine: it runs in seconds, writes a links file
# that the predictor reads back (`wsync plan --predict --links FILE`), says
# why it skipped each GPU class without a device, times a whole version
# (the version class), measures tcp to a
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

# The version class: a whole version timed end to end here (a trainer and an
# engine rank in the calibrating process), not entered by hand; the predictor
# costs it as the plan's "version" stage.
if python3 - "$TMP/links.json" "$TMP/p.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
e = l["links"]["version"]
assert e["alpha_us"] > 0 and e["reps"] == 9 and "publish() start -> ready" in e["note"], e
direct = [x for x in p["plans"] if x["name"] == "direct"][0]
assert any(s["name"] == "version" for s in direct["stages"]), direct["stages"]
PY
then pass calibrate_times_a_whole_version
else fail calibrate_times_a_whole_version "$(grep '^version' "$TMP/cal.out")"; fi

# FP8 on the way: calibrate measures the host quantizer (quant_host), and
# `--quant fp8` costs a serial exchange of block maxima between the 2
# trainer ranks (a request and an answer with each of two neighbours, at most
# one fp32 per 128 x 128 block of a rank's bf16 share) and a serial quant
# stage on the trainers, then half the
# bytes (one FP8 byte per bf16 element plus an fp32 scale per 128 x 128
# block, computed here from that definition) everywhere after it.
if "$WSYNC" plan --synthetic 256M --trainers 2 --engines 3 --local-ranks 2 --links "$TMP/links.json" --predict --json \
       --quant fp8 >"$TMP/q.json" 2>"$TMP/q.err" \
   && python3 - "$TMP/links.json" "$TMP/p.json" "$TMP/q.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1])); full = json.load(open(sys.argv[2])); q = json.load(open(sys.argv[3]))
e = l["links"]["quant_host"]
assert e["gbps"] > 0 and e["reps"] == 3 and "128 x 128" in e["note"], e
src = 256 << 20
assert q["quant"]["source_bytes"] == src, q["quant"]
assert q["deployment"]["image_bytes"] == round(src * (0.5 + 4 / (2 * 128 * 128))), q["deployment"]
d = [x for x in q["plans"] if x["name"] == "direct"][0]
d0 = [x for x in full["plans"] if x["name"] == "direct"][0]
a, qs = d["stages"][0], d["stages"][1]
assert a["name"] == "amax" and a["overlap"] == "serial", a
assert a["loads"][0]["class"] == "tcp" and a["loads"][0]["messages"] == 4 and abs(a["loads"][0]["bytes"] / ((src / 2) / (128 * 128 * 2) * 4) - 1) < 1e-9, a
assert qs["name"] == "quant" and qs["overlap"] == "serial", qs
assert abs(qs["loads"][0]["bytes"] / (src / 2) - 1) < 1e-5, qs
t, t0 = d["bytes_by_class"]["tcp"], d0["bytes_by_class"]["tcp"]
assert abs(t / t0 - (0.5 + 4 / 32768)) < 1e-3, (t, t0)
PY
then pass calibrate_quant_class_and_fp8_prediction
else fail calibrate_quant_class_and_fp8_prediction "$(cat "$TMP/q.err"; grep '^quant' "$TMP/cal.out")"; fi
out=$("$WSYNC" plan --synthetic 256M --links "$TMP/links.json" --predict --quant int4 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- "--quant: expected 'fp8'" <<<"$out"; then pass plan_refuses_an_unknown_quant
else fail plan_refuses_an_unknown_quant "rc=$rc: $out"; fi

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

# One file from two runs, one per host role: the trainer host's uplink, then between engine hosts
# on top of it (--base keeps what the second run does not measure).
if "$WSYNC" calibrate --reps 3 --size 8M --peer "127.0.0.1:$port" --tcp-class tcp_trainer --out "$TMP/t.json" \
       >/dev/null 2>&1 \
   && "$WSYNC" calibrate --reps 3 --size 8M --peer "127.0.0.1:$port" --tcp-class tcp_engine --base "$TMP/t.json" \
       --out "$TMP/te.json" >/dev/null 2>&1 \
   && "$WSYNC" plan --synthetic 64M --chunk 4M --trainers 2 --trainer-hosts 1 --engines 4 --local-ranks 1 --memory host \
       --transport tcp --links "$TMP/te.json" --predict --json >"$TMP/te-p.json" \
   && python3 - "$TMP/t.json" "$TMP/te.json" "$TMP/te-p.json" <<'PY'
import json, sys
t, te, p = (json.load(open(f)) for f in sys.argv[1:4])
assert t["links"]["tcp_trainer"]["gbps"] > 0 and t["links"]["tcp"].get("present") is False
assert te["links"]["tcp_trainer"] == {**t["links"]["tcp_trainer"], "note": te["links"]["tcp_trainer"]["note"]}
assert "kept from" in te["links"]["tcp_trainer"]["note"] and te["links"]["tcp_engine"]["gbps"] > 0
d = {x["name"]: x for x in p["plans"]}
classes = lambda plan, stage: {l["class"] for s in d[plan]["stages"] if s["name"] == stage for l in s["loads"]}
assert classes("direct", "cross") == {"tcp_trainer", "tcp_engine"}, classes("direct", "cross")
assert classes("relay:1", "relay") == {"tcp_engine"}
PY
then pass calibrate_tcp_class_per_host_role
else fail calibrate_tcp_class_per_host_role "$(cat "$TMP/te-p.json" 2>/dev/null | head -5)"; fi
out=$("$WSYNC" calibrate --tcp-class nic 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- "--tcp-class: expected tcp, tcp_trainer" <<<"$out"; then pass calibrate_refuses_a_bad_tcp_class
else fail calibrate_refuses_a_bad_tcp_class "rc=$rc: $out"; fi

echo '{"links": {"tcp": {"gbps": 1, "speed": 2}}}' >"$TMP/bad.json"
out=$("$WSYNC" plan --synthetic 64M --links "$TMP/bad.json" --predict 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "bad.json: links.tcp: unknown key 'speed'" <<<"$out"; then
    pass predict_refuses_a_bad_links_file
else fail predict_refuses_a_bad_links_file "rc=$rc: $out"; fi
out=$("$WSYNC" plan --synthetic 64M --predict 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- "--predict needs a links file" <<<"$out"; then pass predict_without_links_says_how
else fail predict_without_links_says_how "rc=$rc: $out"; fi
