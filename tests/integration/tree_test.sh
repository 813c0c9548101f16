#!/usr/bin/env bash
# The tree keeps its shape (tests/tools/tree_check.py): no layer of common/
# includes a higher one and no two folders of one layer include each other;
# no file over 600 lines and no function over 120. The checker itself is
# checked on a copy with a planted fault of each kind, so a checker that
# finds nothing cannot pass.
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
CHECK=tests/tools/tree_check.py

python3 $CHECK layers . >"$TMP/layers" 2>&1
check tree_layers_in_order [ $? = 0 ]
grep -v '^layers: [0-9]' "$TMP/layers" | head -20 >&2
python3 $CHECK sizes . >"$TMP/sizes" 2>&1
check tree_files_and_functions_within_limits [ $? = 0 ]
grep -v '^files and functions: ' "$TMP/sizes" | head -20 >&2

# Planted faults: a base header including a transport, two folders of one
# layer including each other, the command line including a receiver's
# internals, a 601-line file and a 121-line function.
mkdir -p "$TMP/t/common/base" "$TMP/t/common/net" "$TMP/t/common/digest" "$TMP/t/cli"
printf '#include "common/transport/transport.h"\n' >"$TMP/t/common/base/a.h"
printf '#include "common/digest/b.h"\n' >"$TMP/t/common/net/a.h"
printf '#include "common/net/a.h"\n' >"$TMP/t/common/digest/b.h"
printf '#include "engine_side/receiver_internal.h"\n' >"$TMP/t/cli/internals.c"
{ echo 'int f(void)'; echo '{'; for i in $(seq 118); do echo '    ;'; done; echo '}'; } >"$TMP/t/cli/f.c"
for i in $(seq 601); do echo "/* $i */"; done >"$TMP/t/cli/long.c"
mkdir -p "$TMP/t/tests/unit" "$TMP/t/bench"
for i in $(seq 602); do echo "# $i"; done >"$TMP/t/tests/unit/long_test.sh"
for i in $(seq 600); do echo "/* $i */"; done >"$TMP/t/bench/just_fits.c"
python3 $CHECK "$TMP/t" >"$TMP/planted" 2>&1
rc=$?
check tree_check_fails_on_planted_faults [ $rc = 1 ]
check tree_check_names_upward_include grep -q 'common/base/a.h:1: #include "common/transport/transport.h".*higher layer' "$TMP/planted"
check tree_check_names_same_layer_pair grep -q 'common/net/a.h:1: .*one layer' "$TMP/planted"
check tree_check_names_cli_internals grep -q 'cli/internals.c:1: #include "engine_side/receiver_internal.h": the command line' "$TMP/planted"
check tree_check_names_long_file grep -q 'cli/long.c has 601 lines' "$TMP/planted"
check tree_check_names_long_test_file grep -q 'tests/unit/long_test.sh has 602 lines' "$TMP/planted"
check tree_check_lets_600_lines_pass sh -c "! grep -q 'bench/just_fits.c' '$TMP/planted'"
check tree_check_names_long_function grep -q 'cli/f.c:1: f() has 121 lines' "$TMP/planted"
