#!/usr/bin/env bash
# Goals named together with -j (`make -j4 all all-tests`): each goal runs a
# make of its own, and two of them used to write build/libwsync.a at once (1
# of 3 such builds on the 2-core dev VM failed: "error adding symbols: no more
# archived files", build/wsync missing). Now the top-level make takes its goals
# one at a time, each still parallel inside, also when it is itself started
# from a make's recipe (as here under `make test`: MAKELEVEL 1, where the first
# fix, keyed on MAKELEVEL 0, did not apply). Two fresh builds (no CUDA, as
# CI), each must succeed and leave every binary.
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
for i in 1 2; do
    rm -rf "$TMP/b$i"
    make -j4 --no-print-directory BUILD="$TMP/b$i" CUDA=0 NCCL=0 all all-tests >"$TMP/make$i.log" 2>&1
    rc=$?
    check make_two_goals_parallel_build_$i [ $rc = 0 ]
    [ $rc = 0 ] || grep -E "\*\*\*|error:|no more archived" "$TMP/make$i.log" | tail -5 >&2
    check make_two_goals_left_every_binary_$i sh -c "[ -x '$TMP/b$i/wsync' ] && [ -f '$TMP/b$i/libwsync.a' ] && [ -f '$TMP/b$i/libwsync.so' ] && [ -x '$TMP/b$i/tests/unit/common/digest/digest_test' ] && [ -x '$TMP/b$i/bench/tp_e2e_bench' ]"
    rm -rf "$TMP/b$i"
done
