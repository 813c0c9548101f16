#!/usr/bin/env bash
# configs/ and the settings table: every example deployment file is parsed
# and checked, docs/CONFIG.md's tables equal what the code declares, the
# precedence flag > env > file > default holds, and small deployments start
# from configs/single-host.json and configs/two-host-tcp.json (addresses
# overridden by flags to this machine's loopback) with every engine rank
# verifying every version; `wsync demo --config FILE` takes its options and
# settings from the file, flags winning.
source "$(dirname "$0")/lib.sh"

for f in "$WSYNC_ROOT"/configs/*.json; do
    name=config_parses_$(basename "$f" .json | tr '-' '_')
    out=$("$WSYNC" config --config "$f" 2>&1); rc=$?
    if [ $rc = 0 ] && grep -q '^tcp_conns ' <<<"$out"; then pass "$name"; else fail "$name" "rc=$rc: $out"; fi
done
check configs_dir_has_the_four_deployments \
    test -f "$WSYNC_ROOT/configs/single-host.json" -a -f "$WSYNC_ROOT/configs/two-host-tcp.json" \
         -a -f "$WSYNC_ROOT/configs/rdma-two-nics.json" -a -f "$WSYNC_ROOT/configs/gpu-engine-node.json"

# The doc's generated sections, byte for byte.
doc="$WSYNC_ROOT/docs/CONFIG.md"
md=$("$WSYNC" config --markdown)
want_set=$(sed '/^$/,$d' <<<"$md")
want_hooks=$(sed '1,/^$/d' <<<"$md")
got_set=$(sed -n '/^<!-- settings:/,/^<!-- end settings -->/p' "$doc" | sed '1d;$d')
got_hooks=$(sed -n '/^<!-- test hooks:/,/^<!-- end test hooks -->/p' "$doc" | sed '1d;$d')
if [ -n "$got_set" ] && [ "$got_set" = "$want_set" ]; then pass doc_settings_table_matches_the_code
else fail doc_settings_table_matches_the_code "docs/CONFIG.md differs from 'wsync config --markdown': $(diff <(echo "$want_set") <(echo "$got_set") | head -5)"; fi
if [ -n "$got_hooks" ] && [ "$got_hooks" = "$want_hooks" ]; then pass doc_test_hooks_table_matches_the_code
else fail doc_test_hooks_table_matches_the_code "$(diff <(echo "$want_hooks") <(echo "$got_hooks") | head -5)"; fi
# Every WSYNC_ variable the sources read is in the table (an independent
# look: the sources' string literals, not the table).
missing=""
for v in $(grep -rhoE '"WSYNC_[A-Z0-9_]+"' "$WSYNC_ROOT"/common "$WSYNC_ROOT"/trainer_side "$WSYNC_ROOT"/engine_side \
           "$WSYNC_ROOT"/cli | tr -d '"' | sort -u); do
    grep -q "\`$v\`" "$doc" || missing="$missing $v"
done
check every_variable_in_the_sources_is_documented [ -z "$missing" ]
[ -z "$missing" ] || echo "undocumented:$missing" >&2

# Precedence: default < file < env < flag, as `wsync config` reports it.
src() { awk -v k="$1" '$1 == k { print $2 "/" $3 ($4 == "file" ? " file" : "") }'; }
f2="$WSYNC_ROOT/configs/two-host-tcp.json"
a=$("$WSYNC" config | src tcp_conns)
b=$("$WSYNC" config --config "$f2" --set log=info | src connect_timeout_ms)
c=$(WSYNC_CONNECT_TIMEOUT_MS=5s "$WSYNC" config --config "$f2" | src connect_timeout_ms)
d=$(WSYNC_CONNECT_TIMEOUT_MS=5s "$WSYNC" config --config "$f2" --set connect_timeout_ms=7s | src connect_timeout_ms)
if [ "$a" = "4/default" ] && [ "$b" = "10s/config file" ] && [ "$c" = "5s/env" ] && [ "$d" = "7s/flag" ]; then
    pass precedence_flag_env_file_default
else fail precedence_flag_env_file_default "got '$a' '$b' '$c' '$d'"; fi

# Bad input: exit 2 with a message naming what is wrong.
echo '{"settings": {"tcp_conns": 99}}' >"$TMP/bad1.json"
echo '{"engine": {"local_wrld": 2}}' >"$TMP/bad2.json"
echo '{"trainer": {"zero_copy": "yes"}}' >"$TMP/bad3.json"
echo '{"engines": {}}' >"$TMP/bad4.json"
echo '{"serve": ' >"$TMP/bad5.json"
ok=1
for spec in "bad1:tcp_conns = '99' (from config file" "bad2:engine.local_wrld is not an option of wsync engine" \
            "bad3:trainer.zero_copy is a switch" "bad4:unknown key \"engines\"" "bad5:bad5.json"; do
    f=${spec%%:*} want=${spec#*:}
    out=$("$WSYNC" engine --config "$TMP/$f.json" 2>&1); rc=$?
    if [ $rc != 2 ] || ! grep -qF "$want" <<<"$out"; then ok=0; echo "$f: rc=$rc: $out" >&2; fi
done
out=$(WSYNC_LOG=loud "$WSYNC" status 2>&1); rc=$?
{ [ $rc = 2 ] && grep -q "setting log = 'loud' (from the environment, WSYNC_LOG)" <<<"$out"; } || { ok=0; echo "env: $rc $out" >&2; }
out=$("$WSYNC" config --config "$TMP/missing.json" 2>&1); rc=$?
{ [ $rc = 2 ] && grep -q "missing.json" <<<"$out"; } || { ok=0; echo "missing: $rc $out" >&2; }
check bad_files_and_values_exit_2_naming_the_problem [ $ok = 1 ]
# wsync demo reads the same files: its own object is checked, the others too.
echo '{"demo": {"trainerz": 1}}' >"$TMP/bad6.json"
ok=1
for spec in "bad6:$TMP/bad6.json: demo.trainerz is not an option of wsync demo (known: trainers, engines" \
            "bad1:tcp_conns = '99' (from config file $TMP/bad1.json" "bad2:$TMP/bad2.json: engine.local_wrld" \
            "bad4:config file $TMP/bad4.json: unknown key \"engines\" (expected about, settings, serve, trainer, engine, demo)"; do
    f=${spec%%:*} want=${spec#*:}
    out=$("$WSYNC" demo --config "$TMP/$f.json" 2>&1); rc=$?
    if [ $rc != 2 ] || ! grep -qF "$want" <<<"$out"; then ok=0; echo "demo $f: rc=$rc: $out" >&2; fi
done
check demo_bad_files_exit_2_naming_the_key_and_file [ $ok = 1 ]

# wsync demo --config FILE: the file's "demo" options are defaults (a flag
# wins: here the model size), and its settings reach the trainer and engine
# processes it starts (trace: their TRACE lines), unless --set says otherwise.
out=$(env -u WSYNC_TRACE "$WSYNC" demo --config "$WSYNC_ROOT/configs/single-host.json" --synthetic 24M 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '2 trainer ranks -> 1 engine node x 2 local ranks, model 24M, 3 versions' <<<"$out" &&
   grep -q 'verified all 3 versions of 24M' <<<"$out"; then pass demo_from_single_host_json
else fail demo_from_single_host_json "rc=$rc: $(tail -3 <<<"$out")"; fi
cat >"$TMP/demo.json" <<JSON
{"settings": {"trace": true, "tcp_conns": 2},
 "demo": {"trainers": 1, "engines": 1, "local_ranks": 2, "synthetic": "8M", "chunk": "1M", "versions": 3,
          "dump": "$TMP/dump", "timeout_s": 300}}
JSON
env -u WSYNC_TRACE "$WSYNC" demo --config "$TMP/demo.json" --versions 2 >"$TMP/demo.out" 2>"$TMP/demo.err"; rc=$?
if [ $rc = 0 ] && grep -q 'model 8M, 2 versions' "$TMP/demo.out" && grep -q 'verified all 2 versions of 8M' "$TMP/demo.out" &&
   grep -q '^TRACE .*engine e0 rank 0: pull of version 1 opened' "$TMP/demo.err" &&
   grep -q '^TRACE .*trainer rank 0: publish of version 1 started' "$TMP/demo.err"; then
    pass demo_config_options_and_settings_reach_its_processes
else fail demo_config_options_and_settings_reach_its_processes "rc=$rc: $(tail -3 "$TMP/demo.out") $(head -3 "$TMP/demo.err")"; fi
# --safetensors on the command line replaces the file's --synthetic; --set
# beats the file's settings in the processes too.
st=$TMP/dump/e0/rank0/v1.safetensors
out=$(env -u WSYNC_TRACE "$WSYNC" demo --config "$TMP/demo.json" --safetensors "$st" --versions 1 --set trace=0 \
      --dump "$TMP/dump2" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "model $st, 1 version," <<<"$out" && grep -q "verified all 1 version of $st" <<<"$out" &&
   ! grep -q '^TRACE' <<<"$out" && cmp -s "$st" "$TMP/dump2/e0/rank0/v1.safetensors"; then
    pass demo_flags_override_the_file
else fail demo_flags_override_the_file "rc=$rc: $(grep -c '^TRACE' <<<"$out") TRACE lines: $(tail -3 <<<"$out")"; fi

# start_deployment NAME FILE HOSTIDS...: serve, 2 trainer ranks and 2 engine
# ranks from FILE, addresses overridden by flags; every engine rank must
# exit 0 after holding (and verifying) 2 versions.
start_deployment() {
    local name=$1 f=$2 thost=$3 ehost=$4 port url pids=() r rc ok=1 spid
    port=$(free_port); url=http://127.0.0.1:$port
    bg "$WSYNC" serve --config "$f" --listen 127.0.0.1:$port --state "$TMP/$name/state/state.json" \
        >"$TMP/$name.serve.log" 2>&1
    spid=$!
    wait_http "$url/healthz" 10 || { fail "$name" "serve did not come up: $(tail -3 "$TMP/$name.serve.log")"; return; }
    for r in 0 1; do
        bg "$WSYNC" engine --config "$f" --control "$url" --local-rank $r --versions 2 --bind 127.0.0.1 \
            --host-id "$ehost" --engine "$name-e" >"$TMP/$name.e$r.log" 2>&1
        pids+=($!)
    done
    for r in 0 1; do
        bg "$WSYNC" trainer --config "$f" --control "$url" --rank $r --synthetic 24M --chunk 2M --versions 2 \
            --interval-ms 0 --wait-engines 1 --advertise 127.0.0.1 --listen 127.0.0.1:0 --host-id "$thost" \
            --exit-after-publish >"$TMP/$name.t$r.log" 2>&1
    done
    for r in 0 1; do
        wait "${pids[$r]}"; rc=$?
        [ $rc = 0 ] || { ok=0; echo "$name engine rank $r: rc=$rc: $(tail -3 "$TMP/$name.e$r.log")" >&2; }
    done
    [ "$(grep -c 'ready on 2 ranks' "$TMP/$name.e0.log")" = 2 ] || ok=0
    [ -s "$TMP/$name/state/state.json" ] || { ok=0; echo "$name: no state file" >&2; }
    kill "$spid" 2>/dev/null
    check "$name" [ $ok = 1 ]
}
# Host ids of this run's own: two runs at once never share a node board.
start_deployment deployment_from_single_host_json "$WSYNC_ROOT/configs/single-host.json" h-single-$$ h-single-$$
start_deployment deployment_from_two_host_tcp_json "$WSYNC_ROOT/configs/two-host-tcp.json" h-train-$$ h-infer-$$
