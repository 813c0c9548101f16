#!/usr/bin/env bash
# tests/gpu/devcheck.sh, the check made before a device call, on staged folders
# made here: one with nothing staged names the missing env.sh and
# libmicrohttpd; a run.sh with only the preamble has no commands; a run.sh
# naming a binary of its folder that is not there names it; a complete one
# is ready. The folders live under devbuild/ (git-ignored) and are removed.
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
name=devcheck-test-$$
d=devbuild/$name
trap 'rm -rf "$d"; cleanup' EXIT
mkdir -p "$d/build/bench"
bash tests/gpu/devcheck.sh "$name" >"$TMP/empty" 2>&1
check devcheck_refuses_an_unstaged_folder [ $? = 1 ]
check devcheck_names_env_sh grep -q "device-libs/env.sh is missing" "$TMP/empty"
check devcheck_names_microhttpd grep -q "no libmicrohttpd" "$TMP/empty"
mkdir -p "$d/build/device-libs"
: >"$d/build/device-libs/env.sh"
: >"$d/build/device-libs/libmicrohttpd.so.12"
printf '#!/bin/bash\n# preamble\ncd x\nsource y\nB=z\nexport A=1\ncd ../..\nexport R=1\nB=w\n' >"$d/run.sh"
bash tests/gpu/devcheck.sh "$name" >"$TMP/bare" 2>&1
check devcheck_names_a_run_sh_without_commands grep -q "run.sh has no commands after the preamble" "$TMP/bare"
printf 'P=%s/prev\n%s/build/bench/tp_e2e_bench gpu 1G\n' "$d" "$d" >>"$d/run.sh"
bash tests/gpu/devcheck.sh "$name" >"$TMP/missing" 2>&1
check devcheck_names_a_missing_binary grep -q "names $d/build/bench/tp_e2e_bench, which is not there" "$TMP/missing"
: >"$d/build/bench/tp_e2e_bench"
mkdir -p "$d/prev"
bash tests/gpu/devcheck.sh "$name" >"$TMP/ready" 2>&1
check devcheck_ready_when_complete [ $? = 0 ]
check devcheck_says_ready grep -q "devcheck $name: ready" "$TMP/ready"
