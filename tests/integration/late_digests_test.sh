#!/usr/bin/env bash
# Late digests (setting late_digests, docs/API.md): a single-copy trainer
# announces each version before its digests and posts them in a second
# report; engines land meanwhile and compare every piece's sum with them
# before anything is ready. Real processes on host memory (late_digests=on;
# `auto` turns it on for GPU trainers only):
#   - every version dumped equals the safetensors file (written by python,
#     not wsync) it was published from, the engine having landed every chunk
#     before the digests came (the trainer sleeps before digesting);
#   - the endpoint: a record announced without digests has digests_pending,
#     and GET /v1/versions/<v>?digests=1 answers once the second report
#     filled them in;
#   - a trainer that announces and never posts its digests (test hook, as if
#     it died after announcing): the engine's attempt fails at its timeout
#     naming trainer rank 0, and the version it held stays the one ready;
#   - a wrong late digest: caught, naming the piece and the trainer rank.
source "$(dirname "$0")/lib.sh"

ST="$WSYNC_ROOT/tests/integration/st_tool.py"
python3 "$ST" make "$TMP/m" 3 >/dev/null
FILES="$TMP/m0.safetensors,$TMP/m1.safetensors,$TMP/m2.safetensors"
export WSYNC_LATE_DIGESTS=on

# engine_field ID FIELD: the engine's FIELD in /v1/status.
engine_field() {
    curl -fsS "$URL/v1/status" | python3 -c '
import json, sys
for e in json.load(sys.stdin)["engines"]:
    if e["id"] == sys.argv[1]:
        print(e.get(sys.argv[2]))' "$1" "$2"
}

# --- every version verified against the late digests
for mode in staged in-place; do
    serve_local $mode
    WSYNC_TRACE=1 bg "$WSYNC" engine --control "$URL" --engine e0 --local-rank 0 --local-world 1 --mode $mode \
        --host-id hc --versions 3 --dump "$TMP/d-$mode" >"$TMP/e-$mode.log" 2>&1
    E=$!
    wait_registered "$URL" e0
    WSYNC_TRACE=1 WSYNC_TEST_DIGEST_DELAY_MS=300 "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 3 \
        --chunk 64K --single-copy --hold-timeout-ms 60000 --host-id hc --exit-after-publish \
        >"$TMP/t-$mode.log" 2>&1
    trc=$?
    wait $E
    erc=$?
    ok=1
    for v in 1 2 3; do
        python3 "$ST" compare "$TMP/m$(((v - 1) % 3)).safetensors" "$TMP/d-$mode/e0/rank0/v$v.safetensors" || ok=0
    done
    announced=$(grep -c "announced, digests to follow" "$TMP/t-$mode.log")
    # (the trainer digests 300 ms after announcing: every chunk landed first)
    waited=$(grep -c "late digests of version [0-9]* in, [1-9][0-9]* chunks waited" "$TMP/e-$mode.log")
    if [ $trc = 0 ] && [ $erc = 0 ] && [ $ok = 1 ] && [ "$announced" = 3 ] && [ "$waited" = 3 ]; then
        pass late_digests_${mode//-/_}_every_version_verified
    else
        fail late_digests_${mode//-/_}_every_version_verified \
            "trainer rc=$trc engine rc=$erc dumps ok=$ok announced=$announced waited=$waited: $(tail -3 "$TMP/e-$mode.log")"
    fi
done

# --- the endpoint: a record without digests, the long poll for them
serve_local http
# (rank 0's layout carries its manifest inline, which registers it as
# clients from before /v1/layouts did)
LAYOUT='{"manifest_digest":"00112233445566778899aabbccddeeff","chunk_size":8,"layout":"even","layout_digest":"cd","image_size":16,"world":1,"manifest":{}}'
curl -fsS -X POST "$URL/v1/trainers/register" -d '{"rank":0,"world":1,"host":"h","endpoint":{}}' >/dev/null
post() {
    curl -sS -o "$TMP/post.json" -w '%{http_code}' -X POST "$URL/v1/publish" \
        -d "{\"rank\":0,\"world\":1,\"version\":1,\"layout\":$LAYOUT,\"pieces\":[$1]}"
}
c1=$(post '{"id":0,"offset":0,"len":8},{"id":1,"offset":8,"len":8}')
pending=$(curl -fsS "$URL/v1/versions/1?digests=1&timeout_ms=200" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("digests_pending"))')
curl -sS --max-time 30 "$URL/v1/versions/1?digests=1&timeout_ms=60000" >"$TMP/waited.json" 2>&1 &
W=$!
sleep 0.3
c2=$(post '{"id":0,"offset":0,"len":8,"digest":"0000000000000001"},{"id":1,"offset":8,"len":8,"digest":"0000000000000002"}')
c3=$(post '{"id":0,"offset":0,"len":8,"digest":"0000000000000003"},{"id":1,"offset":8,"len":8,"digest":"0000000000000002"}')
wait $W
wrc=$?
got=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(",".join(p.get("digest", "-") for p in r["pieces"]), r.get("digests_pending", 0))' "$TMP/waited.json" 2>&1)
if [ "$c1" = 200 ] && [ "$pending" = 2 ] && [ "$c2" = 200 ] && [ "$c3" = 409 ] && [ $wrc = 0 ] &&
    [ "$got" = "0000000000000001,0000000000000002 0" ]; then
    pass late_digests_endpoint_record_and_long_poll
else
    fail late_digests_endpoint_record_and_long_poll \
        "publish $c1/$c2/$c3 pending=$pending long poll rc=$wrc got '$got': $(cat "$TMP/post.json")"
fi

# --- a version whose digests never come, and one with a wrong digest: the
# engine holds version 1 (from a well-behaved trainer), then fails version 2
# and exits (--max-failures 1) with version 1 still the one it holds.
# fault_case NAME HOOK=VALUE: prints the engine's log.
fault_case() {
    serve_local "$1"
    bg "$WSYNC" engine --control "$URL" --engine e1 --local-rank 0 --local-world 1 --mode staged --host-id hc \
        --versions 2 --max-failures 1 --timeout-ms 4000 --dump "$TMP/d-$1" >"$TMP/e-$1.log" 2>&1
    E=$!
    wait_registered "$URL" e1
    "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 1 --chunk 64K \
        --single-copy --hold-timeout-ms 60000 --host-id hc --exit-after-publish >"$TMP/t1-$1.log" 2>&1
    env "$2" "$WSYNC" trainer --control "$URL" --rank 0 --world 1 --safetensors "$FILES" --versions 1 \
        --chunk 64K --single-copy --hold-timeout-ms 8000 --host-id hc --exit-after-publish \
        >"$TMP/t2-$1.log" 2>&1
    wait $E
    erc=$?
    held=$(engine_field e1 version)
}

fault_case nodigests WSYNC_TEST_NO_DIGESTS=1
if [ $erc != 0 ] && [ "$held" = 1 ] && [ ! -e "$TMP/d-nodigests/e1/rank0/v2.safetensors" ] &&
    grep -q "late digests of trainer rank 0, which never came" "$TMP/e-nodigests.log"; then
    pass late_digests_never_sent_fails_naming_the_rank
else
    fail late_digests_never_sent_fails_naming_the_rank \
        "engine rc=$erc holds $held: $(tail -3 "$TMP/e-nodigests.log")"
fi

fault_case baddigest WSYNC_TEST_BAD_DIGEST=1
if [ $erc != 0 ] && [ "$held" = 1 ] && [ ! -e "$TMP/d-baddigest/e1/rank0/v2.safetensors" ] &&
    grep -q "piece 1 (bytes [0-9.]*, tensor.* from trainer rank 0) failed verification" "$TMP/e-baddigest.log"; then
    pass late_digests_wrong_digest_caught
else
    fail late_digests_wrong_digest_caught "engine rc=$erc holds $held: $(tail -3 "$TMP/e-baddigest.log")"
fi
