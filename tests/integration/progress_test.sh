#!/usr/bin/env bash
# What a user sees while waiting: the first pull's image set-up is its own
# phase (before a version is chosen, so trainers publishing faster than the
# set-up cannot make the first pull fail), phases over a second print
# progress in `wsync engine` and show in `wsync status`, and `wsync
# trainer`'s "published version N (X ms)" times the publish alone.
source "$(dirname "$0")/lib.sh"

port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port 2>"$TMP/serve.log" >/dev/null
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }

# 1. A set-up (made slow by the test hook) that outlasts several publishes,
# trainers not waiting for engines (the README's by-hand shape): the first
# pull must not fail, and it pulls a version the trainers still hold.
# (The engines take a host id of this run's own: two runs at once never share a node board.)
for r in 0 1; do
    WSYNC_TEST_SETUP_DELAY_MS=3000 bg "$WSYNC" engine --control "$url" --engine slow --local-rank $r --local-world 2 \
        --versions 1 --max-failures 1 --host-id progress-$$ >"$TMP/slow$r.log" 2>&1
    epid[$r]=$!
done
for r in 0 1; do
    bg "$WSYNC" trainer --control "$url" --rank $r --world 2 --synthetic 8M --chunk 1M --versions 30 \
        --interval-ms 700 >"$TMP/t$r.log" 2>&1
done
seen_setup=0
for _ in $(seq 100); do
    "$WSYNC" status --control "$url" 2>/dev/null | grep -q '^slow .*setting up: reserving' && { seen_setup=1; break; }
    sleep 0.05
done
ok=1
for r in 0 1; do wait "${epid[$r]}" || ok=0; done
check first_pull_survives_a_setup_longer_than_two_publishes [ $ok = 1 ]
no_failure() { ! grep -q 'pull failed' "$TMP/slow0.log" "$TMP/slow1.log"; }
no_failure || { echo "a pull failed:" >&2; cat "$TMP/slow0.log" "$TMP/slow1.log" >&2; }
check first_pull_had_no_failed_attempt no_failure
check engine_prints_setup_progress grep -q '^engine slow: setting up: reserving 16.00 MiB of image memory' "$TMP/slow0.log"
# The ready line reports the set-up apart from the pull (at least the 3 s
# the hook added), and the pulled version is a later one than 1.
line=$(grep '^engine slow: version .* ready' "$TMP/slow0.log")
setup=$(sed -n 's/.*image memory set up before it in \([0-9.]*\) s.*/\1/p' <<<"$line")
ver=$(sed -n 's/^engine slow: version \([0-9]*\) ready.*/\1/p' <<<"$line")
if [ -n "$setup" ] && awk -v s="$setup" 'BEGIN { exit !(s >= 3.0) }' && [ "${ver:-0}" -gt 1 ]; then
    pass ready_line_reports_setup_apart
else fail ready_line_reports_setup_apart "'$line'"; fi
check status_shows_the_setup_phase [ $seen_setup = 1 ]
for p in "${WSYNC_PIDS[@]:1}"; do kill "$p" 2>/dev/null; done

# 2. Landing slowed by the test hook: progress lines in `wsync engine` and
# the bytes in `wsync status`.
port2=$(free_port); url2=http://127.0.0.1:$port2
bg "$WSYNC" serve --listen 127.0.0.1:$port2 2>"$TMP/serve2.log" >/dev/null
wait_http "$url2/healthz" 10
for r in 0 1; do
    WSYNC_TEST_LAND_DELAY_MS=150 bg "$WSYNC" engine --control "$url2" --engine slowland --local-rank $r --local-world 2 \
        --versions 1 --max-failures 1 --host-id progress-$$ >"$TMP/land$r.log" 2>&1
    lpid[$r]=$!
done
for r in 0 1; do
    bg "$WSYNC" trainer --control "$url2" --rank $r --world 2 --synthetic 8M --chunk 256K --versions 1 \
        --wait-engines 1 --exit-after-publish >"$TMP/lt$r.log" 2>&1
done
seen_land=0
while kill -0 "${lpid[0]}" 2>/dev/null; do
    "$WSYNC" status --control "$url2" 2>/dev/null | grep -q '^slowland .*landing .* of 8.00 MiB' && seen_land=1
    [ $seen_land = 1 ] && break
    sleep 0.1
done
ok=1
for r in 0 1; do wait "${lpid[$r]}" || ok=0; done
check slow_landing_pull_succeeds [ $ok = 1 ]
check status_shows_landing_bytes [ $seen_land = 1 ]
check engine_prints_landing_progress grep -q '^engine slowland: version 1: .* of 8.00 MiB landed and verified' "$TMP/land0.log"

# 3. The published time is the publish alone: with a 3 s interval between
# versions it used to include the interval (so it was >= 3000 ms).
port3=$(free_port); url3=http://127.0.0.1:$port3
bg "$WSYNC" serve --listen 127.0.0.1:$port3 2>"$TMP/serve3.log" >/dev/null
wait_http "$url3/healthz" 10
"$WSYNC" trainer --control "$url3" --rank 0 --world 1 --synthetic 2M --versions 2 --interval-ms 3000 \
    --exit-after-publish >"$TMP/int.log" 2>&1
ms=$(sed -n 's/.*published version 2 (\([0-9.]*\) ms).*/\1/p' "$TMP/int.log")
if [ -n "$ms" ] && awk -v m="$ms" 'BEGIN { exit !(m < 3000) }'; then pass published_time_excludes_the_interval
else fail published_time_excludes_the_interval "$(cat "$TMP/int.log")"; fi
