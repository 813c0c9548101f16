#!/usr/bin/env bash
# Issue 26.8, the first impression: while the first pull reserves image
# memory, `wsync engine` says once why that much (2 slots of the model's
# size in staged mode, and what for), then on a terminal one line rewritten
# in place, and into a file or a pipe a plain line every 5 s with no
# terminal codes (it printed "setting up: reserving ..." every second, 64
# lines in `make demo`, and never why).
source "$(dirname "$0")/lib.sh"
export WSYNC_HOST_ID=progline-$$
port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }
bg "$WSYNC" trainer --control "$url" --rank 0 --world 1 --synthetic 8M --versions 1 >"$TMP/t.log" 2>&1

# engine_run ID CMD...: one engine rank pulling one version with a 7 s set-up.
engine_run() {
    local id=$1
    shift
    WSYNC_TEST_SETUP_DELAY_MS=7000 timeout 60 "$@" "$WSYNC" engine --control "$url" --engine "$id" \
        --local-rank 0 --local-world 1 --versions 1 --max-failures 1
}
engine_run plain >"$TMP/plain.log" 2>&1
reason='setting up: reserving 16.00 MiB of image memory (first pull, version 1): 2 slots of 8.00 MiB each, as staged mode keeps the held version readable while the next one lands'
check plain_says_why_that_much_memory grep -qF "engine plain: $reason" "$TMP/plain.log"
n=$(grep -c 'setting up' "$TMP/plain.log")
check plain_two_lines_for_a_7s_setup [ "$n" -ge 1 -a "$n" -le 2 ]
check plain_no_terminal_codes sh -c "! grep -q \$(printf '\\033') '$TMP/plain.log'"
check plain_ready_line grep -q '^engine plain: version 1 ready' "$TMP/plain.log"

if command -v script >/dev/null; then
    # A terminal (script(1) gives the engine one): the progress line is
    # rewritten in place ("\r" + erase line), and the ready line replaces it.
    script -qec "WSYNC_TEST_SETUP_DELAY_MS=7000 '$WSYNC' engine --control '$url' --engine tty --local-rank 0 \
        --local-world 1 --versions 1 --max-failures 1" /dev/null >"$TMP/tty.log" 2>&1 </dev/null
    inplace=$(grep -o $'\r\033\\[Kengine tty: setting up image memory' "$TMP/tty.log" | wc -l)
    check tty_progress_rewritten_in_place [ "$inplace" -ge 3 ]
    check tty_says_why_that_much_memory grep -qF "engine tty: $reason" "$TMP/tty.log"
    check tty_ready_line grep -q 'engine tty: version 1 ready' "$TMP/tty.log"
else
    skip tty_progress_rewritten_in_place "no script(1) here (util-linux)"
fi
