#!/usr/bin/env bash
# cli_args_test.sh: every numeric option of every command refuses a value
# that is not a number, has anything after it, or is out of range: exit
# status 2 and one message naming the option, the value given and what is
# accepted (before anything starts). Valid values still work, values from a
# config file go through the same check, and no command parses a number
# with atoi/atol/strtol of its own.
source "$(dirname "$0")/lib.sh"

# bad NAME 'EXPECTED MESSAGE' COMMAND ARGS...: exit 2 and the message.
bad() {
    local name=$1 want=$2 out rc; shift 2
    out=$("$WSYNC" "$@" 2>&1 </dev/null); rc=$?
    if [ $rc = 2 ] && grep -qF -- "$want" <<<"$out"; then pass "$name"
    else fail "$name" "wsync $*: rc=$rc (want 2), output: $(head -3 <<<"$out" | tr '\n' '|') (want '$want')"; fi
}
U=http://127.0.0.1:9 # never reached: the options are refused first

# Not a number, trailing garbage, out of range: one case of each per command.
bad demo_versions_not_a_number "wsync demo: --versions: expected a whole number from 1 to 2147483647, got 'abc'" \
    demo --versions abc
bad demo_trainers_zero "wsync demo: --trainers: expected a whole number from 1 to 512, got '0'" demo --trainers 0
bad demo_engines_trailing "wsync demo: --engines: expected a whole number from 1 to 512, got '2x'" demo --engines 2x
bad demo_local_ranks_negative "--local-ranks: expected a whole number from 1 to 512, got '-2'" demo --local-ranks -2
bad demo_timeout_s_fraction "--timeout-s: expected a whole number from 1 to 2147483647, got '1.5'" demo --timeout-s 1.5
bad demo_tp_not_a_number "wsync demo: --tp: expected a whole number from 1 to 512, got 'two'" demo --tp two
bad demo_chunk_bad_suffix "wsync demo: --chunk: expected a size such as 4096, 64M or 1G, from 4K to 1T, got '12Q'" \
    demo --chunk 12Q
bad demo_chunk_too_small "--chunk: expected a size such as 4096, 64M or 1G, from 4K to 1T, got '100'" demo --chunk 100
bad demo_synthetic_not_a_size "--synthetic: expected a size such as 4096, 64M or 1G, from 1M to 1T, got 'big'" \
    demo --synthetic big
bad demo_too_many_processes "is more than 512 processes" demo --engines 100 --local-ranks 100
bad demo_tp_not_dividing "--tp T needs T >= 1 dividing --local-ranks (2)" demo --tp 3
bad trainer_rank_negative "wsync trainer: --rank: expected a whole number from 0 to 4095, got '-1'" \
    trainer --control $U --rank -1 --world 2 --synthetic 8M
bad trainer_world_trailing "wsync trainer: --world: expected a whole number from 1 to 4096, got '2 '" \
    trainer --control $U --rank 0 --world '2 ' --synthetic 8M
bad trainer_versions_not_a_number "wsync trainer: --versions: expected a whole number from 0 to 2147483647, got 'abc'" \
    trainer --control $U --rank 0 --world 1 --synthetic 8M --versions abc
bad trainer_interval_too_big "--interval-ms: expected a whole number from 0 to 3600000, got '99999999999999999999'" \
    trainer --control $U --rank 0 --world 1 --synthetic 8M --interval-ms 99999999999999999999
bad trainer_wait_engines_hex "--wait-engines: expected a whole number from 0 to 2147483647, got '0x10'" \
    trainer --control $U --rank 0 --world 1 --synthetic 8M --wait-engines 0x10
bad trainer_chunk_bad_suffix "wsync trainer: --chunk: expected a size such as 4096, 64M or 1G, from 4K to 1T, got '12Q'" \
    trainer --control $U --rank 0 --world 1 --synthetic 8M --chunk 12Q
bad engine_local_rank_negative "wsync engine: --local-rank: expected a whole number from 0 to 4095, got '-1'" \
    engine --control $U --engine e --local-rank -1 --local-world 2
bad engine_local_world_empty "wsync engine: --local-world: expected a whole number from 1 to 4096, got ''" \
    engine --control $U --engine e --local-rank 0 --local-world ''
bad engine_versions_zero "wsync engine: --versions: expected a whole number from 1 to 2147483647, got '0'" \
    engine --control $U --engine e --local-rank 0 --local-world 1 --versions 0
bad engine_timeout_overflow "--timeout-ms: expected a whole number from 1 to 2147483647, got '4294967296'" \
    engine --control $U --engine e --local-rank 0 --local-world 1 --timeout-ms 4294967296
bad engine_max_failures_zero "--max-failures: expected a whole number from 1 to 2147483647, got '0'" \
    engine --control $U --engine e --local-rank 0 --local-world 1 --max-failures 0
bad engine_tp_leading_space "wsync engine: --tp: expected a whole number from 1 to 4096, got ' 2'" \
    engine --control $U --engine e --local-rank 0 --local-world 2 --tp ' 2'
bad serve_max_connections_garbage "wsync serve: --max-connections: expected a whole number from 0 to 1048576, got '10k'" \
    serve --listen 127.0.0.1:0 --max-connections 10k
bad serve_max_engines_negative "wsync serve: --max-engines: expected a whole number from 0 to 2147483647, got '-5'" \
    serve --listen 127.0.0.1:0 --max-engines -5
bad serve_max_client_connections_word "--max-client-connections: expected a whole number from 0 to 2147483647, got 'many'" \
    serve --listen 127.0.0.1:0 --max-client-connections many
bad plan_chunk_zero "wsync plan: --chunk: expected a size such as 4096, 64M or 1G, from 4K to 1T, got '0'" \
    plan --synthetic 64M --chunk 0
bad plan_trainers_plus "wsync plan: --trainers: expected a whole number from 1 to 1000000, got '+2'" \
    plan --synthetic 64M --trainers +2
bad plan_delta_density_trailing "wsync plan: --delta-density: expected a fraction from 0 to 1 (0.02, or 2%), got '2x'" \
    plan --synthetic 64M --links "$WSYNC_ROOT/configs/links/h200-8x400g.json" --predict --delta-density 2x
bad plan_delta_density_above_one "wsync plan: --delta-density: expected a fraction from 0 to 1 (0.02, or 2%), got '1.5'" \
    plan --synthetic 64M --links "$WSYNC_ROOT/configs/links/h200-8x400g.json" --predict --delta-density 1.5
bad plan_delta_width_three "wsync plan: --delta-width: expected 1, 2, 4 or 8 (bytes per element)" \
    plan --synthetic 64M --links "$WSYNC_ROOT/configs/links/h200-8x400g.json" --predict --delta-width 3
bad plan_delta_on_without_density "--delta on needs --delta-density F" \
    plan --synthetic 64M --links "$WSYNC_ROOT/configs/links/h200-8x400g.json" --predict --delta on
bad target_rank_too_big "wsync target: --rank: expected a whole number from 0 to 4095, got '4096'" \
    target --synthetic 64M --tp 2 --rank 4096

# A config file's value goes through the same check, as text.
echo '{"engine": {"local_rank": "x", "local_world": 2}}' >"$TMP/engine.json"
echo '{"demo": {"chunk": "12Q"}}' >"$TMP/demo.json"
echo '{"trainer": {"versions": 2.5}}' >"$TMP/trainer.json"
bad file_engine_local_rank "wsync engine: --local-rank: expected a whole number from 0 to 4095, got 'x'" \
    engine --config "$TMP/engine.json" --control $U --engine e
bad file_demo_chunk "wsync demo: --chunk: expected a size such as 4096, 64M or 1G, from 4K to 1T, got '12Q'" \
    demo --config "$TMP/demo.json"
bad file_trainer_versions "wsync trainer: --versions: expected a whole number from 0 to 2147483647, got '2.5'" \
    trainer --config "$TMP/trainer.json" --control $U --rank 0 --world 1 --synthetic 8M

# Valid values still parse: the commands that do nothing but compute.
out=$("$WSYNC" plan --synthetic 64M --trainers 3 --engines 2 --local-ranks 4 --chunk 1M 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '^chunks *64 of 1.00 MiB' <<<"$out"; then pass valid_plan_numbers_accepted
else fail valid_plan_numbers_accepted "rc=$rc: $(head -5 <<<"$out")"; fi
out=$("$WSYNC" target --synthetic 64M --tp 2 --rank 1 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '^TP rank 1 of 2' <<<"$out"; then pass valid_target_numbers_accepted
else fail valid_target_numbers_accepted "rc=$rc: $(tail -2 <<<"$out")"; fi

# No command reads a number on its own (they would take "12Q" as 12 again).
own=$(grep -nE '\b(atoi|atol|atoll|strtol|strtoll|strtoul|strtoull|strtod|atof)\(' "$WSYNC_ROOT"/cli/*.c |
    grep -v '^[^:]*/cli/args\.c:')
if [ -z "$own" ]; then pass numbers_parsed_only_in_cli_args
else fail numbers_parsed_only_in_cli_args "$(tr '\n' '|' <<<"$own")"; fi
