#!/usr/bin/env bash
# A short seeded fault campaign (tests/chaos/chaos.py, 30 faults; `make chaos`
# runs 120): no torn version among those the engines hold, no crash, no exit
# the campaign did not cause, convergence after the last fault.
source "$(dirname "$0")/lib.sh"
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    skip chaos_short "needs numpy for /usr/bin/python3 (make deps)"; exit 0
fi
/usr/bin/python3 "$WSYNC_ROOT/tests/chaos/chaos.py" --wsync "$WSYNC" --faults 30 --seed "${CHAOS_SEED:-14}" \
    --time-limit 240 --converge-s 120 >"$TMP/chaos.out" 2>&1
rc=$?
cat "$TMP/chaos.out" >&2
line() { grep -E "^$1" "$TMP/chaos.out" | head -1; }
check chaos_short_30_faults grep -Eq '^total +(3[0-9]|[4-9][0-9]|[0-9]{3,})$' "$TMP/chaos.out"
check chaos_short_torn_0 grep -qx 'torn: 0' "$TMP/chaos.out"
check chaos_short_crashes_0 grep -qx 'crashes: 0' "$TMP/chaos.out"
check chaos_short_unexpected_exits_0 grep -qx 'exits not caused by the campaign: 0' "$TMP/chaos.out"
check chaos_short_converged grep -Eq '^time to converge after the last fault: [0-9.]+ s' "$TMP/chaos.out"
check chaos_short_campaign_passed [ $rc = 0 ]
