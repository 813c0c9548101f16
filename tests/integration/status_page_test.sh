#!/usr/bin/env bash
# The status page (GET /) in a real headless browser (Debian's chromium,
# driven through the DevTools protocol by page_driver.py): it loads with no
# console error, shows the engines, trainer ranks and versions of a live run
# (serve + 2 trainer ranks + an engine node), and updates by itself when a
# new version is ready. With --private-status it asks for the token and then
# shows the same. Screenshots: build/status_page.png, build/status_page_token.png.
source "$(dirname "$0")/lib.sh"

OUTDIR=${WSYNC_BUILD:-$WSYNC_ROOT/build}
DRIVER="/usr/bin/python3 $(dirname "$0")/page_driver.py"
if ! command -v chromium >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import websocket' 2>/dev/null; then
    skip status_page "needs chromium and python3-websocket (make deps installs them)"
    exit 0
fi
mkdir -p "$OUTDIR"
# stop_run: SIGTERM to what this test started, SIGKILL to what is left after
# 3 s (this test is about the page, not about how fast each command stops).
stop_run() {
    local p i
    for p in "${WSYNC_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for ((i = 0; i < 30; i++)); do
        for p in "${WSYNC_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && break; done
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    for p in "${WSYNC_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
}

# 1. The page is served, with no data in it, to anyone.
port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port 2>"$TMP/serve.log" >/dev/null
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }
code=$(curl -s -o "$TMP/page.html" -w '%{http_code} %{content_type}' "$url/")
check page_is_served [ "$code" = "200 text/html; charset=utf-8" ]
check page_is_the_status_page grep -q '<title>wsync status</title>' "$TMP/page.html"
check page_fetches_nothing_from_elsewhere bash -c "! grep -Eq '(src|href)=\"(https?:)?//' '$TMP/page.html'"

# 2. A live run: engine node-a follows; 2 trainer ranks publish version 1, then
# wait for 2 engine nodes to hold it before version 2. The browser's step
# starts node-b (pulls version 1 and exits): the trainers publish version 2,
# node-a pulls it, and the page must show it without being reloaded.
bg "$WSYNC" engine --control "$url" --engine node-a --local-rank 0 --local-world 1 --follow \
    --host-id page-a-$$ >"$TMP/node-a.log" 2>&1
for r in 0 1; do
    bg "$WSYNC" trainer --control "$url" --rank $r --world 2 --synthetic 8M --chunk 1M --versions 2 \
        --wait-engines 2 >"$TMP/t$r.log" 2>&1
done
node_b="'$WSYNC' engine --control '$url' --engine node-b --local-rank 0 --local-world 1 --versions 1 \
    --host-id page-b-$$ >'$TMP/node-b.log' 2>&1"
row='document.querySelector'
$DRIVER --url "$url/" \
    "wait:60:$row('tr[data-engine=\"node-a\"][data-state=\"ready\"][data-held=\"1\"]')" \
    "wait:20:$row('tr[data-version=\"1\"][data-ready=\"1\"]') && document.querySelectorAll('tr[data-rank]').length === 2" \
    "text:$TMP/page_v1.txt" \
    "run:$node_b" \
    "wait:60:$row('tr[data-engine=\"node-a\"][data-state=\"ready\"][data-held=\"2\"]')" \
    "wait:20:$row('tr[data-version=\"2\"][data-ready]:not([data-ready=\"0\"])') && document.querySelectorAll('#chart-time rect').length >= 2" \
    "text:$TMP/page_v2.txt" \
    "shot:$OUTDIR/status_page.png" >"$TMP/driver.log" 2>&1
drc=$?
check page_shows_engine_ready_at_version_1 grep -q '^step ok: wait:60:.*data-held="1"' "$TMP/driver.log"
check page_shows_both_trainer_ranks grep -q '^step ok: wait:20:.*data-rank' "$TMP/driver.log"
check page_updates_when_version_2_is_ready grep -q '^step ok: wait:60:.*data-held="2"' "$TMP/driver.log"
check page_charts_publish_to_ready_per_version [ $drc = 0 ]
check page_screenshot_written test -s "$OUTDIR/status_page.png"
if grep -q '^console:' "$TMP/driver.log"; then
    fail page_has_no_console_error "$(grep '^console:' "$TMP/driver.log" | head -3)"
else pass page_has_no_console_error; fi
[ $drc = 0 ] || { echo "driver:" >&2; cat "$TMP/driver.log" >&2; tail -5 "$TMP/node-a.log" "$TMP/t0.log" >&2; }
# What a reader sees (the text of the page, not its markup).
check page_text_names_engines_and_hosts bash -c "grep -q 'node-a' '$TMP/page_v2.txt' && grep -q 'node-b' '$TMP/page_v2.txt'"
check page_text_shows_held_lag_and_rate bash -c "grep -q 'GB/s' '$TMP/page_v2.txt' && grep -q 'lag' '$TMP/page_v2.txt'"
check page_text_shows_publish_to_ready bash -c "grep -q 'publish → ready' '$TMP/page_v2.txt'"
stop_run

# 3. --private-status: the page asks for the token (nothing shown without
# it), a wrong one is refused, the right one shows the run; kept in the tab.
printf 's3cret-page-token\n' >"$TMP/token"; chmod 600 "$TMP/token"
port2=$(free_port); url2=http://127.0.0.1:$port2
bg "$WSYNC" serve --listen 127.0.0.1:$port2 --private-status --token-file "$TMP/token" 2>"$TMP/serve2.log" >/dev/null
wait_http "$url2/healthz" 10 || { fail private_serve_started "$(tail -3 "$TMP/serve2.log")"; exit 0; }
check private_page_is_served_without_token [ "$(curl -s -o /dev/null -w '%{http_code}' "$url2/")" = 200 ]
bg "$WSYNC" engine --control "$url2" --engine node-p --local-rank 0 --local-world 1 --follow \
    --token-file "$TMP/token" --host-id page-p-$$ >"$TMP/node-p.log" 2>&1
wait_registered_tok() {
    local i
    for ((i = 0; i < 300; i++)); do
        curl -fsS -H "Authorization: Bearer s3cret-page-token" "$url2/v1/status" 2>/dev/null | grep -q '"id":"node-p"' && return 0
        sleep 0.1
    done
    return 1
}
wait_registered_tok
submit() { echo "eval:document.getElementById('token').value='$1'; document.getElementById('authform').requestSubmit()"; }
$DRIVER --url "$url2/" \
    "wait:30:getComputedStyle(document.getElementById('auth')).display === 'block'" \
    "wait:5:!document.querySelector('tr[data-engine]')" \
    "$(submit wrong-token)" \
    "wait:20:document.getElementById('autherr').textContent.includes('refused')" \
    "$(submit s3cret-page-token)" \
    "wait:30:$row('tr[data-engine=\"node-p\"]') && getComputedStyle(document.getElementById('auth')).display === 'none'" \
    "wait:5:sessionStorage.getItem('wsync_token') === 's3cret-page-token'" \
    "shot:$OUTDIR/status_page_token.png" >"$TMP/driver2.log" 2>&1
drc2=$?
check private_page_asks_for_the_token grep -q "^step ok: wait:30:getComputedStyle" "$TMP/driver2.log"
check private_page_refuses_a_wrong_token grep -q "^step ok: wait:20:.*refused" "$TMP/driver2.log"
check private_page_shows_status_with_the_token [ $drc2 = 0 ]
# The 401s the page gets before it has a token show as network errors in the
# console; nothing else may (no script error, no other failed load).
if grep '^console:' "$TMP/driver2.log" | grep -vq '^console: error network .*401'; then
    fail private_page_has_no_console_error "$(grep '^console:' "$TMP/driver2.log" | grep -v ' 401' | head -3)"
else pass private_page_has_no_console_error; fi
[ $drc2 = 0 ] || { echo "driver:" >&2; cat "$TMP/driver2.log" >&2; }
stop_run
exit 0
