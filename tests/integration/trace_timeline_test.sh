#!/usr/bin/env bash
# tests/tools/trace_timeline.py: per engine configuration, the median time of
# each traced event after its version's publish started. Checked on a planted
# trace whose offsets are known (awk computes the expected medians apart), and
# on a real run's trace (the events of a pull are all there, in order).
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
TOOL=tests/tools/trace_timeline.py

# Versions 1..4 of configuration "alpha": digested 2+v ms after the publish,
# chunks landed at 5 and 7+v ms, done at 12 ms; a line of another process
# (no TRACE prefix) between them.
for v in 1 2 3 4; do
    t0=$((1000 + v))
    awk -v t0=$t0 -v v=$v 'BEGIN {
        printf "TRACE %.6f [10] trainer rank 0: publish of version %d started\n", t0, v
        printf "TRACE %.6f [10] trainer rank 0: version %d digested\n", t0 + (2 + v) / 1e3, v
        printf "some other line\n"
        printf "TRACE %.6f [30] local: put of piece 7 (req %x) queued, 1 on this connection\n", t0 + 0.004, 4096 + v
        printf "TRACE %.6f [30] local: put of piece 9 (req ab%x) queued, 2 on this connection\n", t0 + 0.0045, v
        printf "TRACE %.6f [10] local: launch of 1 put(s), 1 piece(s), 1000000000 bytes to %cw%c: 2000.0 us on the stream, 500 GB/s\n", t0 + 0.006, 39, 39
        printf "TRACE %.6f [10] local: launch of 2 put(s), 2 piece(s), 2000000000 bytes to %cw%c: 1500.0 us on the stream, 1333 GB/s\n", t0 + 0.007, 39, 39
        printf "TRACE %.6f [30] local: launch of 1 put(s), 1 piece(s), 1000000000 bytes to %cw%c: 1000.0 us on the stream, 1000 GB/s\n", t0 + 0.010, 39, 39
        printf "TRACE %.6f [20] engine alpha rank 0: chunk 3 landed (1 of 2)\n", t0 + 0.005
        printf "TRACE %.6f [20] engine alpha rank 0: chunk 4 landed (2 of 2)\n", t0 + (7 + v) / 1e3
        printf "TRACE %.6f [20] engine alpha rank 0: every local rank verified\n", t0 + 0.012 }'
done >"$TMP/trace"
python3 $TOOL "$TMP/trace" --from 1 >"$TMP/all" 2>&1
check timeline_reads_planted_trace [ $? = 0 ]
# medians over versions 1..4, by awk apart from the tool: digested (3+4+5+6)/4 ms, last landing (8+..+11)/4
dig=$(awk 'BEGIN { printf "%.3f", (3 + 4 + 5 + 6) / 4 }')
land=$(awk 'BEGIN { printf "%.3f", (8 + 9 + 10 + 11) / 4 }')
check timeline_median_of_an_event grep -q "^  *$dig ..  *$dig  trainer rank N: version N digested" "$TMP/all"
check timeline_first_and_last_of_an_event grep -q "^  *5.000 ..  *$land  engine alpha rank N: chunk N landed (N of N)" "$TMP/all"
check timeline_names_the_configuration grep -q "^alpha: median ms after the publish started, over 4 versions" "$TMP/all"
# request ids (hex) are blanked: one row for the puts queued, 4.0 .. 4.5 ms
check timeline_blanks_request_ids [ "$(grep -c 'local: put of piece N (req H) queued' "$TMP/all")" = 1 ]
check timeline_request_row_spans_both grep -q "^  *4.000 ..  *4.500  local: put of piece N (req H) queued" "$TMP/all"
# launches: trainer rank 0's (pid 10) [4, 6] and [5.5, 7] ms, busy 3 ms, 3 GB; pid 30's [9, 10]
check timeline_launches_of_a_sender grep -q "^  launches of trainer rank 0: 4.000 .. 7.000 ms, the GPU busy 3.000 ms, 3.000 GB" "$TMP/all"
check timeline_launches_of_all grep -q "^  launches of all: 4.000 .. 10.000 ms, the GPU busy 4.000 ms, 4.000 GB" "$TMP/all"
# by kind: trainer rank 0's launch of one put 1 GB in 2 ms, of two puts 2 GB in 1.5 ms (awk apart from the tool)
one=$(awk 'BEGIN { printf "%.3f", 1 / 2 }')
sev=$(awk 'BEGIN { printf "%.3f", 2 / 1.5 }')
check timeline_launches_by_kind grep -q "^  launches of trainer rank 0: .*; 1 of one put: 1.000 GB, $one GB/ms on the stream; 1 of several: 2.000 GB, $sev GB/ms on the stream" "$TMP/all"
python3 $TOOL "$TMP/trace" >"$TMP/late" 2>&1 # from version 3: digested 5 and 6 ms
check timeline_skips_warm_up_versions grep -q "^  *5.500 ..  *5.500  trainer rank N: version N digested" "$TMP/late"
printf 'no trace here\n' >"$TMP/none"
python3 $TOOL "$TMP/none" >"$TMP/none.out" 2>&1
check timeline_says_when_no_trace sh -c "[ $? = 1 ] && grep -q 'WSYNC_TRACE=1' '$TMP/none.out'"

# A real run (tp_e2e_bench, 32 MB on the CPU, six engine configurations): every
# configuration has a timeline in which the pull opens after the publish and
# rank 0 hears last that every local rank verified.
BENCH=${WSYNC_BUILD:-build}/bench/tp_e2e_bench
if [ -x "$BENCH" ]; then
    WSYNC_TRACE=1 timeout 120 "$BENCH" cpu 32M auto single-copy >/dev/null 2>"$TMP/real"
    python3 $TOOL "$TMP/real" >"$TMP/real.out" 2>&1
    check timeline_of_a_real_run [ $? = 0 ]
    check timeline_real_run_every_configuration [ "$(grep -c '^[a-z-]*: median ms' "$TMP/real.out")" = 6 ]
    check timeline_real_run_in_order python3 - "$TMP/real.out" <<'PY'
import sys
text = open(sys.argv[1]).read().splitlines()
ok, cur = True, []
def judge(rows):
    names = [r.split("  ", 2)[-1] for r in rows]
    opened = next(i for i, n in enumerate(names) if "opened" in n)
    return names[0].endswith("publish of version N started") and names[-1].endswith("every local rank verified") and opened > 0
for line in text + ["x: median"]:
    if ": median" in line:
        if cur and not judge(cur):
            ok = False
            print("out of order:", cur, file=sys.stderr)
        cur = []
    else:
        cur.append(line.strip())
sys.exit(0 if ok else 1)
PY
else
    fail timeline_of_a_real_run "$BENCH is not built (make all-tests builds it)"
fi
