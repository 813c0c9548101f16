#!/bin/bash
# tests/gpu/devcheck.sh NAME: is devbuild/NAME ready to carry to the GPU host? Run it right before the device
# call (a refused or wasted call costs minutes of the session's device time). Checks: the staged runtime
# libraries and env.sh are there (a run without them fails every test for a missing libmicrohttpd), run.sh has
# commands after devbuild.sh's preamble and parses, every binary it names under devbuild/NAME exists, and the
# working tree plus devbuild/NAME fit the 64 MiB a call carries. Prints what is wrong and exits 1, else "ready".
set -uo pipefail
name=${1:?usage: tests/gpu/devcheck.sh NAME}
d=devbuild/$name
bad=0
say() { echo "devcheck $name: $*"; bad=1; }
[ -d "$d" ] || { echo "devcheck $name: no $d (make it with tests/gpu/devbuild.sh $name)"; exit 1; }
[ -f "$d/build/device-libs/env.sh" ] || say "$d/build/device-libs/env.sh is missing: stage again (WSYNC_STAGE=... tests/gpu/devbuild.sh $name)"
ls "$d"/build/device-libs/libmicrohttpd.so.* >/dev/null 2>&1 || say "no libmicrohttpd in $d/build/device-libs: the control endpoint cannot start there"
for s in "$d"/run*.sh; do
    [ -f "$s" ] || { say "no run.sh in $d"; continue; }
    bash -n "$s" 2>/dev/null || say "$s does not parse (bash -n)"
    [ "$(grep -vc '^\s*#\|^\s*$' "$s")" -gt 8 ] || say "$s has no commands after the preamble"
    for p in $(grep -o "$d/[A-Za-z0-9_./-]*" "$s" | sort -u); do
        [ -e "$p" ] || say "$s names $p, which is not there"
    done
done
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb "$d" | cut -f1)
total=$(( (tree + carry) / 1048576 ))
[ "$total" -lt 64 ] || say "the tree and $d come to $total MiB, over the 64 MiB a call carries: strip or drop binaries"
[ $bad = 0 ] && echo "devcheck $name: ready ($total MiB with the tree)"
exit $bad
