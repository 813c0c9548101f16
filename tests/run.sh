#!/usr/bin/env bash
# Runs every test program and script against the build in $1 and ends with the
# line "N passed, N failed". Each test prints "PASS name", "FAIL name" or
# "SKIP name: skipped: why"; a program that crashes or exits non-zero without
# a FAIL line counts as one failure. WSYNC_ONLY=unit|integration|gpu picks a
# group; any other word the tests whose name (as printed, e.g.
# gpu/relay_delta_gpu_test) contains it. WSYNC_WRAP (e.g. valgrind) wraps the
# unit programs. Each test's wall time goes to $build/test-logs/times.txt (one
# line "seconds name" a test); the 15 slowest are printed, slowest first, just
# before the last line.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
export WSYNC_BIN="$root/$build/wsync" WSYNC_BUILD="$root/$build" WSYNC_ROOT="$root"
only=${WSYNC_ONLY:-}
pass=0 fail=0 skip=0
failed_names=()
logdir="$root/$build/test-logs"
mkdir -p "$logdir"
times="$logdir/times.txt"
: >"$times"

# picks GROUP: WSYNC_ONLY runs (some of) GROUP's tests.
picks() { case "$only" in "" | "$1") return 0 ;; unit | integration | gpu) return 1 ;; *) return 0 ;; esac; }

run_one() { # kind name command...
    local kind=$1 name=$2; shift 2
    case "$only" in "" | unit | integration | gpu) ;; *) [[ "$name" == *"$only"* ]] || return 0 ;; esac
    local log="$logdir/$(echo "$name" | tr '/' '_').log"
    local t0=$(date +%s.%N)
    "$@" >"$log.out" 2>"$log" </dev/null
    local rc=$?
    local t1=$(date +%s.%N)
    local p f s
    p=$(grep -c '^PASS ' "$log.out"); f=$(grep -c '^FAIL ' "$log.out"); s=$(grep -c '^SKIP ' "$log.out")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        f=1; echo "FAIL $name: exited with status $rc" >>"$log.out"
    fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    echo "$secs $name" >>"$times"
    printf '%-12s %-44s %3d passed %3d failed %3d skipped  %5.1fs\n' "$kind" "$name" "$p" "$f" "$s" "$secs"
    grep '^SKIP ' "$log.out" | sed 's/^/    /'
    if [ "$f" != 0 ]; then
        failed_names+=("$name")
        grep '^FAIL ' "$log.out" | sed 's/^/    /'
        echo "    --- stderr (last 30 lines of $log) ---"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
}

if picks unit; then
    while IFS= read -r bin; do
        name=${bin#$root/$build/tests/}
        run_one unit "$name" ${WSYNC_WRAP:-} "$bin"
    done < <(find "$root/$build/tests/unit" -type f -perm -u+x 2>/dev/null | sort)
fi
if picks integration; then
    for t in "$root"/tests/integration/*_test.sh; do
        [ -e "$t" ] || continue
        run_one integration "integration/$(basename "$t" .sh)" bash "$t"
    done
fi
if picks gpu; then
    for bin in "$root/$build"/tests/gpu/*_test; do
        [ -e "$bin" ] || continue
        run_one gpu "gpu/$(basename "$bin")" "$bin"
    done
    for t in "$root"/tests/gpu/*_test.sh; do
        [ -e "$t" ] || continue
        run_one gpu "gpu/$(basename "$t" .sh)" bash "$t"
    done
fi

if [ -s "$times" ]; then
    echo "slowest (seconds; all in $times):"
    sort -rn "$times" | head -n 15 | awk '{ printf "  %7.1f  %s\n", $1, $2 }'
    awk '{ t += $1 } END { printf "total %.1f s over %d tests\n", t, NR }' "$times"
fi
[ ${#failed_names[@]} = 0 ] || echo "failed: ${failed_names[*]}"
echo "$skip skipped (see the 'skipped:' lines above for why)"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
